package agentnet_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	agentnet "github.com/agent-network/agent-network/bridges/go"
	"github.com/agent-network/agent-network/bridges/go/internal/testhub"
	"google.golang.org/grpc/codes"
)

// governancePolicy is the policy file the governance tests start their hub
// with (the schema is docs/governance.md): one rule per refusal, each picking
// the identities by a name prefix.
const governancePolicy = `version: 1
rules:
  - id: slow-posters
    match: {names: ["gov-slow-*"]}
    rule:
      rate: {posts_per_second: 1, burst: 1}
  - id: shy-joiners
    match: {names: ["gov-shy-*"]}
    rule:
      rate: {posts_per_second: 0.5, burst: 1}
  - id: no-discussions
    match: {names: ["gov-nodisc-*"]}
    rule:
      access: {channel_types: [consulting, conversation]}
  - id: one-channel
    match: {names: ["gov-single-*"]}
    rule:
      limits: {max_open_channels: 1}
  - id: slow-readers
    match: {names: ["gov-reader-*"]}
    rule:
      inbox: {max_pending: 3}
`

// startGovernedHub starts a real hub with --policy governancePolicy.
func startGovernedHub(t *testing.T) *testhub.Hub {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(governancePolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	return testhub.StartWith(t, "--policy", path)
}

// openConversation opens an OPENED conversation from p to target.
func openConversation(t *testing.T, ctx context.Context, p *participant, target string) string {
	t.Helper()
	res, err := p.c.OpenChannel(ctx, agentnet.OpenChannelRequest{Type: "conversation", Targets: []string{target}, WaitUntilOpened: true})
	if err != nil {
		t.Fatalf("open a conversation with %s: %v", target, err)
	}
	if res.Channel.GetState().String() != "CHANNEL_STATE_OPENED" {
		t.Fatalf("conversation with %s is %v", target, res.Channel.GetState())
	}
	return res.Channel.GetChannelId()
}

// postUntilRateLimited posts until the hub refuses with RATE_LIMITED (a
// burst of 1 empties at the first post, unless the machine is so slow that a
// token arrives between two posts: then the next one finds it empty).
func postUntilRateLimited(t *testing.T, ctx context.Context, c *agentnet.Client, channelID, via string) *agentnet.RateLimitedError {
	t.Helper()
	for i := range 20 {
		_, err := c.PostText(ctx, channelID, via+" "+strconv.Itoa(i))
		if err == nil {
			continue
		}
		var rl *agentnet.RateLimitedError
		if !errors.As(err, &rl) {
			t.Fatalf("%s: post %d refused with %v, want a *RateLimitedError", via, i, err)
		}
		return rl
	}
	t.Fatalf("%s: 20 quick posts were never rate limited", via)
	return nil
}

// waitForToken sleeps the refusal's RetryAfter and posts again, as long as
// the hub keeps refusing with a new RetryAfter (bounded by ctx).
func waitForToken(t *testing.T, ctx context.Context, c *agentnet.Client, channelID string, rl *agentnet.RateLimitedError) *agentnet.Envelope {
	t.Helper()
	for {
		select {
		case <-time.After(rl.RetryAfter):
		case <-ctx.Done():
			t.Fatal("timed out waiting for a token")
		}
		env, err := c.PostText(ctx, channelID, "after the retry-after")
		if err == nil {
			return env
		}
		if !errors.As(err, &rl) || rl.RetryAfter <= 0 {
			t.Fatalf("post after waiting the retry-after: %v", err)
		}
	}
}

func checkRateLimited(t *testing.T, via string, rl *agentnet.RateLimitedError) {
	t.Helper()
	e := rl.Err
	if e.Code != codes.ResourceExhausted || e.Reason != agentnet.ReasonRateLimited || e.Message == "" {
		t.Errorf("%s: %v %q %q", via, e.Code, e.Reason, e.Message)
	}
	// One token per second: the next arrives within a second, and later than now.
	if rl.RetryAfter <= 0 || rl.RetryAfter > time.Second {
		t.Errorf("%s: RetryAfter %v (metadata %q)", via, rl.RetryAfter, e.Metadata["retry_after_seconds"])
	}
	want := map[string]string{"rule": "slow-posters", "posts_per_second": "1", "burst": "1"}
	for k, v := range want {
		if e.Metadata[k] != v {
			t.Errorf("%s: metadata %s = %q, want %q (all: %v)", via, k, e.Metadata[k], v, e.Metadata)
		}
	}
}

// A rate-limited post is a *RateLimitedError with the hub's retry-after,
// over the Connect stream and over PostEnvelope alike, and a post after
// waiting it is admitted.
func TestGovernanceRateLimitedIsTyped(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 60*time.Second)
	h := startGovernedHub(t)
	alice := newParticipant(t, ctx, h.Addr, "gov-slow-alice", agentnet.ConnectOptions{AutoAck: true})
	newParticipant(t, ctx, h.Addr, "gov-bob", agentnet.ConnectOptions{AutoAck: true})
	cid := openConversation(t, ctx, alice, "gov-bob")

	// Over the Connect stream (PostResult.error).
	if !alice.s.Connected() {
		t.Fatal("alice's session is not connected")
	}
	rl := postUntilRateLimited(t, ctx, alice.c, cid, "stream")
	checkRateLimited(t, "stream", rl)
	if !errors.Is(rl, agentnet.ErrRateLimited) {
		t.Error("errors.Is(ErrRateLimited) does not match")
	}
	env := waitForToken(t, ctx, alice.c, cid, rl)
	if env.Seq == 0 || env.EnvelopeID == "" {
		t.Fatalf("admitted envelope without seq: %+v", env)
	}

	// Over PostEnvelope (a gRPC status with ErrorInfo), from a second client
	// of the same identity without a stream.
	unary, err := agentnet.Dial(h.Addr, alice.c.Credentials())
	if err != nil {
		t.Fatal(err)
	}
	defer unary.Close()
	rl = postUntilRateLimited(t, ctx, unary, cid, "unary")
	checkRateLimited(t, "unary", rl)
	waitForToken(t, ctx, unary, cid, rl)
}

// An identity whose bucket is empty when it is invited still joins: its
// Session waits the retry-after of the refused invite answer and answers again.
func TestGovernanceRateLimitedInviteAnswerIsRetried(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 60*time.Second)
	h := startGovernedHub(t)
	carol := newParticipant(t, ctx, h.Addr, "gov-carol", agentnet.ConnectOptions{AutoAck: true})
	newParticipant(t, ctx, h.Addr, "gov-shy-dan", agentnet.ConnectOptions{AutoAck: true})
	// dan's answer to the first invite takes his only token (one per 2 s) ...
	openConversation(t, ctx, carol, "gov-shy-dan")
	// ... so his answer to the second is refused with RATE_LIMITED at first.
	res, err := carol.c.OpenChannel(ctx, agentnet.OpenChannelRequest{Type: "conversation", Targets: []string{"gov-shy-dan"},
		WaitUntilOpened: true, InviteAckTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Channel.GetState().String(); got != "CHANNEL_STATE_OPENED" {
		t.Fatalf("the second conversation is %s (close reason %q), want OPENED", got, res.Channel.GetCloseReason())
	}
}

// An access rule's refusal is a *RuleDeniedError naming the rule and check.
func TestGovernanceRuleDeniedIsTyped(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 40*time.Second)
	h := startGovernedHub(t)
	alice := newParticipant(t, ctx, h.Addr, "gov-nodisc-alice", agentnet.ConnectOptions{AutoAck: true})
	newParticipant(t, ctx, h.Addr, "gov-bob", agentnet.ConnectOptions{AutoAck: true})
	newParticipant(t, ctx, h.Addr, "gov-carol", agentnet.ConnectOptions{AutoAck: true})

	_, err := alice.c.OpenChannel(ctx, agentnet.OpenChannelRequest{Type: "discussion", Targets: []string{"gov-bob", "gov-carol"}})
	var denied *agentnet.RuleDeniedError
	if !errors.As(err, &denied) {
		t.Fatalf("open a discussion: %v, want a *RuleDeniedError", err)
	}
	if denied.Rule != "no-discussions" || denied.Check != "access.channel_types" || denied.Err.Code != codes.PermissionDenied ||
		denied.Err.Metadata["channel_type"] != "discussion" || !errors.Is(err, agentnet.ErrRuleDenied) {
		t.Errorf("RuleDeniedError %+v, err %+v", denied, denied.Err)
	}
	// A type the rule allows opens.
	openConversation(t, ctx, alice, "gov-bob")
}

// A limit's refusal is a *LimitExceededError naming the rule and the limit;
// closing the channel frees the slot.
func TestGovernanceLimitExceededIsTyped(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 40*time.Second)
	h := startGovernedHub(t)
	alice := newParticipant(t, ctx, h.Addr, "gov-single-alice", agentnet.ConnectOptions{AutoAck: true})
	newParticipant(t, ctx, h.Addr, "gov-bob", agentnet.ConnectOptions{AutoAck: true})
	newParticipant(t, ctx, h.Addr, "gov-carol", agentnet.ConnectOptions{AutoAck: true})
	first := openConversation(t, ctx, alice, "gov-bob")

	_, err := alice.c.OpenChannel(ctx, agentnet.OpenChannelRequest{Type: "conversation", Targets: []string{"gov-carol"}})
	var limit *agentnet.LimitExceededError
	if !errors.As(err, &limit) {
		t.Fatalf("open a second channel: %v, want a *LimitExceededError", err)
	}
	if limit.Rule != "one-channel" || limit.Limit != "1" || limit.Err.Code != codes.ResourceExhausted ||
		limit.Err.Metadata["check"] != "limits.max_open_channels" || !errors.Is(err, agentnet.ErrLimitExceeded) {
		t.Errorf("LimitExceededError %+v, err %+v", limit, limit.Err)
	}
	if _, err := alice.c.CloseChannel(ctx, first, "done"); err != nil {
		t.Fatal(err)
	}
	openConversation(t, ctx, alice, "gov-carol")
}

// A post to a recipient whose inbox is at its cap is an *InboxFullError
// naming the recipient; acking what waits does not answer it, the
// recipient's reply does, and posts pass again.
func TestGovernanceInboxFullIsTyped(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 40*time.Second)
	h := startGovernedHub(t)
	alice := newParticipant(t, ctx, h.Addr, "gov-alice", agentnet.ConnectOptions{AutoAck: true})
	reader := newParticipant(t, ctx, h.Addr, "gov-reader-rita", agentnet.ConnectOptions{}) // acks nothing by itself
	cid := openConversation(t, ctx, alice, "gov-reader-rita")

	var full *agentnet.InboxFullError
	admitted := 0
	for i := 0; full == nil; i++ {
		if i == 10 {
			t.Fatal("10 posts to a reader capped at 3 pending were all admitted")
		}
		_, err := alice.c.PostText(ctx, cid, "unread "+strconv.Itoa(i))
		switch {
		case err == nil:
			admitted++
		case !errors.As(err, &full):
			t.Fatalf("post %d: %v, want an *InboxFullError", i, err)
		}
	}
	if admitted > 3 {
		t.Errorf("%d posts admitted to an inbox capped at 3", admitted)
	}
	e := full.Err
	if full.Recipient != reader.id() || e.Code != codes.ResourceExhausted || e.Metadata["recipient_name"] != "gov-reader-rita" ||
		e.Metadata["rule"] != "slow-readers" || e.Metadata["limit"] != "3" || !errors.Is(full, agentnet.ErrInboxFull) {
		t.Errorf("InboxFullError recipient %q (want %q), err %+v", full.Recipient, reader.id(), e)
	}
	// Nothing was admitted by the refusal.
	wal, err := alice.c.ReadWalAll(ctx, agentnet.ReadWalRequest{ChannelID: cid})
	if err != nil {
		t.Fatal(err)
	}
	texts := 0
	for _, env := range wal {
		if env.EventType == agentnet.EventText {
			texts++
		}
	}
	if texts != admitted {
		t.Errorf("%d texts in the WAL, %d admitted", texts, admitted)
	}

	// The reader reads and acks its deliveries: read is not answered, the
	// inbox stays full. Its answer (a text into the channel) frees it at once.
	reader.next(t, ctx, "the last admitted text", func(env *agentnet.Envelope) bool {
		return env.EventType == agentnet.EventText && env.Text() == "unread "+strconv.Itoa(admitted-1)
	})
	if _, err := alice.c.PostText(ctx, cid, "read, not answered"); !errors.As(err, &full) {
		t.Fatalf("post after the reader only acked: %v, want an *InboxFullError", err)
	}
	if _, err := reader.c.PostText(ctx, cid, "answered"); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.c.PostText(ctx, cid, "answered now"); err != nil {
		t.Fatalf("post after the reader answered: %v", err)
	}
}
