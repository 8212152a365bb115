package agentnet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	agentnet "github.com/agent-network/agent-network/bridges/go"
	"github.com/agent-network/agent-network/bridges/go/internal/testhub"
	agentnetv1 "github.com/agent-network/agent-network/gen/go/agentnet/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// partitions is the partition count of the steering tests' store.
const partitions = 8

// dividedReplica is a hub replica of a store whose channels are divided, with
// its operator API.
type dividedReplica struct {
	hub *testhub.Hub
	op  agentnetv1.OperatorServiceClient
	tok string
}

// startDivided starts a replica dividing the channels. Ownership rounds every
// 0.2 s make a joining replica settle quickly (a holder releases what the
// newcomer should own at its next round, whatever the lease time); leases of 5 s
// keep a replica the loaded machine starves of CPU for a moment from losing
// its partitions, which would move the channels these tests place. A stream
// is considered for steering every second instead of every 10.
func startDivided(t *testing.T, store string, args ...string) *dividedReplica {
	t.Helper()
	h := testhub.StartWith(t, append([]string{"--store", store, "--partitions", strconv.Itoa(partitions),
		"--replica-ttl", "5", "--replica-refresh", "0.2", "--steer-interval", "1"}, args...)...)
	tok, err := os.ReadFile(filepath.Join(h.Dir, "hub-operator.token"))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(h.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &dividedReplica{hub: h, op: agentnetv1.NewOperatorServiceClient(conn), tok: strings.TrimSpace(string(tok))}
}

func (r *dividedReplica) status(t *testing.T, ctx context.Context) *agentnetv1.GetStatusResponse {
	t.Helper()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+r.tok)
	st, err := r.op.GetStatus(ctx, &agentnetv1.GetStatusRequest{})
	if err != nil {
		t.Fatalf("GetStatus of %s: %v", r.hub.Addr, err)
	}
	return st
}

// assignment is the partition -> replica id assignment the replicas steer
// their leases towards (hubsvc.core.partition_map.assign, the rendezvous
// hashing every replica computes).
func assignment(t *testing.T, ids ...string) map[int]string {
	t.Helper()
	cmd := exec.Command(testhub.Python(), append([]string{"-c",
		"import json, sys; from hubsvc.core.partition_map import assign; print(json.dumps(assign(int(sys.argv[1]), sys.argv[2:])))",
		strconv.Itoa(partitions)}, ids...)...)
	cmd.Dir = testhub.RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("compute the partition assignment: %v", err)
	}
	var raw map[string]string
	if err := json.Unmarshal(out, &raw); err != nil {
		t.Fatal(err)
	}
	want := map[int]string{}
	for p, id := range raw {
		n, _ := strconv.Atoi(p)
		want[n] = id
	}
	return want
}

// settle waits until each replica holds exactly its share of the partitions
// and both see every partition's holder so; it returns the one holding
// partitions (a channel opened through it is held there) and the other.
func settle(t *testing.T, ctx context.Context, a, b *dividedReplica) (holding, other *dividedReplica) {
	t.Helper()
	want := assignment(t, a.status(t, ctx).GetReplicaId(), b.status(t, ctx).GetReplicaId())
	eventually(t, ctx, "the replicas to settle their partitions", func() bool {
		for _, r := range []*dividedReplica{a, b} {
			st := r.status(t, ctx)
			var held []int32
			for p := range partitions {
				if want[p] == st.GetReplicaId() {
					held = append(held, int32(p))
				}
			}
			owners := st.GetPartitions().GetOwners()
			if !slices.Equal(st.GetPartitions().GetHeld(), held) || len(owners) != partitions {
				return false
			}
			for _, o := range owners {
				if want[int(o.GetPartition())] != o.GetReplicaId() || o.GetAddress() == "" {
					return false
				}
			}
		}
		return true
	})
	if len(a.status(t, ctx).GetPartitions().GetHeld()) > 0 {
		return a, b
	}
	return b, a
}

// holderAddr is the address of the replica holding channelID, as r sees it.
func holderAddr(t *testing.T, ctx context.Context, r *dividedReplica, channelID string) string {
	t.Helper()
	p := int32(crc32.ChecksumIEEE([]byte(channelID)) % partitions)
	for _, o := range r.status(t, ctx).GetPartitions().GetOwners() {
		if o.GetPartition() == p {
			return o.GetAddress()
		}
	}
	t.Fatalf("no replica holds partition %d", p)
	return ""
}

// A member connected through the replica that does not hold its channel is
// moved to the holder by a Redirect and gets every text once, in order,
// while it and the sender keep posting across the move; one that ignores
// redirects stays and gets everything too.
func TestSessionFollowsRedirectToHolder(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 90*time.Second)
	store := testhub.StartRedis(t, 5)
	holding, other := settle(t, ctx, startDivided(t, store), startDivided(t, store))
	logs := logOnFailure(t)
	fast := agentnet.ConnectOptions{
		MinBackoff: 50 * time.Millisecond, MaxBackoff: 300 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	alice := register(t, ctx, holding.hub.Addr, "alice")
	cursors := agentnet.NewMemoryCursorStore()
	fast.Cursors = cursors
	stay := fast
	stay.IgnoreRedirects = true
	// Bob joins his conversation on a stream that stays where it connected;
	// he follows redirects on the stream he opens later, while texts flow.
	bob := newParticipant(t, ctx, other.hub.Addr, "bob", stay)
	stay.Cursors = nil
	carol := newParticipant(t, ctx, other.hub.Addr, "carol", stay)

	open := func(member string) string {
		var res *agentnet.OpenChannelResult
		eventually(t, ctx, "a conversation with "+member, func() bool { // known at the holder once its feed caught up
			var err error
			res, err = alice.OpenChannel(ctx, agentnet.OpenChannelRequest{Type: "conversation", Targets: []string{member}, WaitUntilOpened: true})
			if err != nil && !agentnet.IsReason(err, agentnet.ReasonNotFound) {
				t.Fatalf("open a conversation with %s: %v", member, err)
			}
			return err == nil
		})
		ch := res.Channel.GetChannelId()
		if got := holderAddr(t, ctx, other, ch); got != holding.hub.Addr {
			t.Fatalf("the conversation with %s is held at %s, not at %s, where it was opened", member, got, holding.hub.Addr)
		}
		return ch
	}
	withBob, withCarol := open("bob"), open("carol")
	if err := bob.s.Close(); err != nil {
		t.Fatal(err)
	}

	// Alice posts into both conversations, without pause: half of her texts
	// to bob while he is away (he gets them replayed), the rest once he caught
	// up on the stream he opens again through the other replica, where the
	// first of them draws the Redirect (replays do not) and the rest are under
	// way while he moves. Bob posts into his conversation over his stream
	// meanwhile. Every post must succeed: the bridge sends again what the move
	// cut off.
	const texts = 40
	var posters sync.WaitGroup
	errs := make(chan error, 4)
	post := func(c *agentnet.Client, ch, prefix string, from, to int) {
		posters.Add(1)
		go func() {
			defer posters.Done()
			for i := from; i < to; i++ {
				if _, err := c.PostText(ctx, ch, fmt.Sprintf("%s %d", prefix, i)); err != nil {
					errs <- fmt.Errorf("%s %d: %w", prefix, i, err)
					return
				}
			}
		}()
	}
	post(alice, withCarol, "to carol", 0, texts)
	post(alice, withBob, "to bob", 0, texts/2)
	var err error
	if bob.s, err = bob.c.Connect(ctx, fast); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bob.s.Close() })
	post(bob.c, withBob, "from bob", 0, texts)

	receive := func(p *participant, ch, prefix string, from, to int) {
		t.Helper()
		var last uint64
		for i := from; i < to; i++ {
			want := fmt.Sprintf("%s %d", prefix, i)
			env := p.next(t, ctx, want, func(e *agentnet.Envelope) bool {
				return e.ChannelID == ch && e.EventType == agentnet.EventText && e.SenderID == alice.AgentID()
			})
			if got := env.Text(); got != want || env.Seq <= last {
				t.Fatalf("%s got %q (seq %d after %d), want %q: every text once, in order", p.c.Name(), got, env.Seq, last, want)
			}
			last = env.Seq
		}
	}
	receive(bob, withBob, "to bob", 0, texts/2)
	// Alice keeps posting to bob until his stream moved and ten more texts
	// followed (at least texts in all), then an end marker.
	posters.Add(1)
	go func() {
		defer posters.Done()
		end := -1
		for i := texts / 2; ; i++ {
			text := fmt.Sprintf("to bob %d", i)
			if end >= 0 && i >= end {
				text = "to bob end"
			}
			if _, err := alice.PostText(ctx, withBob, text); err != nil {
				errs <- fmt.Errorf("%s: %w", text, err)
				return
			}
			if text == "to bob end" {
				return
			}
			if end < 0 && bob.s.RedirectedTo() != "" {
				end = max(i+10, texts)
			}
		}
	}()
	var last uint64
	for i := texts / 2; ; i++ {
		env := bob.next(t, ctx, fmt.Sprintf("to bob %d", i), func(e *agentnet.Envelope) bool {
			return e.ChannelID == withBob && e.EventType == agentnet.EventText && e.SenderID == alice.AgentID()
		})
		if env.Text() == "to bob end" && i >= texts {
			break
		}
		if want := fmt.Sprintf("to bob %d", i); env.Text() != want || env.Seq <= last {
			t.Fatalf("bob got %q (seq %d after %d), want %q: every text once, in order", env.Text(), env.Seq, last, want)
		}
		last = env.Seq
	}
	receive(carol, withCarol, "to carol", 0, texts)
	posters.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a post failed: %v", err)
	}

	eventually(t, ctx, "bob's stream to move to the holder", func() bool {
		return bob.s.RedirectedTo() == holding.hub.Addr && bob.s.Connected()
	})
	if n := agentnet.Redirects(bob.s); n != 1 {
		t.Fatalf("bob followed %d redirects, want 1", n)
	}
	if got := carol.s.RedirectedTo(); got != "" || agentnet.Redirects(carol.s) != 0 {
		t.Fatalf("carol, who ignores redirects, was moved to %q", got)
	}
	// Bob's own posts landed once each, in his order.
	env, err := alice.ReadWalAll(ctx, agentnet.ReadWalRequest{ChannelID: withBob})
	if err != nil {
		t.Fatal(err)
	}
	var fromBob []string
	for _, e := range env {
		if e.SenderID == bob.id() && e.EventType == agentnet.EventText {
			fromBob = append(fromBob, e.Text())
		}
	}
	for i, got := range fromBob {
		if want := fmt.Sprintf("from bob %d", i); got != want {
			t.Fatalf("bob's text %d in the WAL is %q, want %q", i, got, want)
		}
	}
	if len(fromBob) != texts {
		t.Fatalf("the WAL holds %d of bob's %d texts", len(fromBob), texts)
	}
	// After the move, bob's stream is on the holder: new texts reach him there.
	said, err := alice.PostText(ctx, withBob, "on the holder now")
	if err != nil {
		t.Fatal(err)
	}
	bob.next(t, ctx, "the text after the move", func(e *agentnet.Envelope) bool { return e.EnvelopeID == said.EnvelopeID })
}

// lockedBuffer is a log sink several goroutines write to.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// logOnFailure is a log sink the test prints when it fails.
func logOnFailure(t *testing.T) *lockedBuffer {
	logs := &lockedBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("session log:\n%s", logs.String())
		}
	})
	return logs
}

// A moved stream whose replica goes away goes back to the target given; a
// Redirect to a replica that cannot be reached sends it back too, and no
// Redirect is followed for RedirectPause after it; nothing is lost.
func TestRedirectThatLeadsNowhereGoesBack(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 90*time.Second)
	store := testhub.StartRedis(t, 6)
	// Each replica advertises a forwarder's address, so the test can make the
	// holder unreachable at the address Redirects name while it keeps its
	// leases (and commits what alice posts to it directly).
	startBehind := func() (*dividedReplica, *testhub.Forwarder) {
		fwd := testhub.Forward(t, "")
		r := startDivided(t, store, "--advertise", fwd.Addr)
		fwd.PointTo(r.hub.Addr)
		return r, fwd
	}
	a, fa := startBehind()
	b, fb := startBehind()
	holding, other := settle(t, ctx, a, b)
	named := map[*dividedReplica]*testhub.Forwarder{a: fa, b: fb}[holding]
	logs := logOnFailure(t)
	opts := agentnet.ConnectOptions{
		MinBackoff: 50 * time.Millisecond, MaxBackoff: 300 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
	}
	alice := register(t, ctx, holding.hub.Addr, "alice")
	bob := newParticipant(t, ctx, other.hub.Addr, "bob", opts)
	var ch string
	eventually(t, ctx, "a conversation with bob", func() bool {
		res, err := alice.OpenChannel(ctx, agentnet.OpenChannelRequest{Type: "conversation", Targets: []string{"bob"}, WaitUntilOpened: true})
		if err != nil && !agentnet.IsReason(err, agentnet.ReasonNotFound) {
			t.Fatalf("open a conversation with bob: %v", err)
		}
		if err == nil {
			ch = res.Channel.GetChannelId()
		}
		return err == nil
	})
	eventually(t, ctx, "bob's stream to move to the holder", func() bool {
		return bob.s.RedirectedTo() == named.Addr && bob.s.Connected()
	})

	// The holder becomes unreachable at its address: bob's stream there breaks
	// and goes back to the target given; the next Redirect (his new stream
	// there gets alice's texts from the holder) leads nowhere.
	named.PointTo("")
	named.Drop()
	// Alice keeps posting until bob followed that Redirect and came back, then
	// for 1.5 s more: over one --steer-interval, in which his stream is sent
	// Redirects he must not follow. Bob gets every text once, in order.
	var last uint64
	after := time.Time{}
	for i := 0; after.IsZero() || time.Now().Before(after); i++ {
		said, err := alice.PostText(ctx, ch, fmt.Sprintf("text %d", i))
		if err != nil {
			t.Fatal(err)
		}
		env := bob.next(t, ctx, said.Text(), func(e *agentnet.Envelope) bool {
			return e.ChannelID == ch && e.EventType == agentnet.EventText
		})
		if env.EnvelopeID != said.EnvelopeID || env.Seq <= last {
			t.Fatalf("bob got %q (seq %d after %d), want %q: every text once, in order", env.Text(), env.Seq, last, said.Text())
		}
		last = env.Seq
		if after.IsZero() && agentnet.Redirects(bob.s) >= 2 && bob.s.RedirectedTo() == "" {
			after = time.Now().Add(1500 * time.Millisecond)
		}
	}
	eventually(t, ctx, "bob's stream back on the target given", func() bool {
		return bob.s.RedirectedTo() == "" && bob.s.Connected()
	})
	if !strings.Contains(logs.String(), "could not connect where the hub redirected") {
		t.Fatalf("no Redirect led nowhere; log:\n%s", logs.String())
	}
	// The first move and the one that led nowhere; the Redirects his streams on
	// the target given got since were not followed (RedirectPause).
	if n := agentnet.Redirects(bob.s); n != 2 {
		t.Fatalf("bob followed %d redirects, want 2; log:\n%s", n, logs.String())
	}
}
