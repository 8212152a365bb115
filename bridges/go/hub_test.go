package agentnet_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	agentnet "github.com/agent-network/agent-network/bridges/go"
	"github.com/agent-network/agent-network/bridges/go/internal/testhub"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// (1) A Go asker consults the Go consulting_agent process.
func TestConsultingWithGoAgentProcess(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 40*time.Second)
	h := testhub.Start(t)
	agent := startAgent(t, "--hub", h.Addr, "--name", "go-consultant")
	asker := newParticipant(t, ctx, h.Addr, "asker", agentnet.ConnectOptions{})

	res, err := asker.c.OpenChannel(ctx, agentnet.OpenChannelRequest{
		Type: "consulting", Targets: []string{"go-consultant"}, Intent: "test",
		Message: "hello world", WaitUntilOpened: true,
	})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if res.Channel.GetState() != agentnet.ChannelOpened && res.Channel.GetState() != agentnet.ChannelClosed {
		t.Fatalf("channel state %v, want OPENED", res.Channel.GetState())
	}
	if res.SeedEnvelopeID == "" {
		t.Fatal("no seed envelope id")
	}
	ch := res.Channel.GetChannelId()
	reply := asker.next(t, ctx, "reply", func(e *agentnet.Envelope) bool {
		return e.ChannelID == ch && e.EventType == agentnet.EventText && e.SenderID == agent.agentID()
	})
	if got, want := reply.Text(), answer("hello world"); got != want {
		t.Fatalf("reply %q, want %q", got, want)
	}
	if reply.CausationID != res.SeedEnvelopeID {
		t.Errorf("reply causation %q, want the question %q", reply.CausationID, res.SeedEnvelopeID)
	}
	closed := asker.next(t, ctx, "closed", func(e *agentnet.Envelope) bool {
		return e.ChannelID == ch && e.EventType == agentnet.EventClosed
	})
	if r := closed.String("reason"); r != "consulting_complete" {
		t.Fatalf("close reason %q", r)
	}
	info, err := asker.c.DescribeChannel(ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	if info.Channel.GetState() != agentnet.ChannelClosed || info.Channel.GetCloseReason() != "consulting_complete" {
		t.Fatalf("describe: %v", info.Channel)
	}
}

// (2) The agent process is SIGKILLed mid-stream and restarted with the same
// cursor file: it gets every envelope it had not processed exactly once.
func TestKillAndResumeExactlyOnce(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 50*time.Second)
	h := testhub.Start(t)
	dir := t.TempDir()
	cursorFile := filepath.Join(dir, "agent.json")
	args := []string{"--hub", h.Addr, "--name", "go-worker", "--cursor-file", cursorFile, "--delay", "40ms"}
	run1 := startAgent(t, args...)
	agentID := run1.agentID()
	asker := newParticipant(t, ctx, h.Addr, "asker", agentnet.ConnectOptions{AutoAck: true})

	res, err := asker.c.OpenChannel(ctx, agentnet.OpenChannelRequest{
		Type: "conversation", Targets: []string{"go-worker"}, WaitUntilOpened: true,
	})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	ch := res.Channel.GetChannelId()
	questions := map[string]string{} // envelope id -> text
	post := func(from, to int) {
		for i := from; i <= to; i++ {
			env, err := asker.c.PostText(ctx, ch, fmt.Sprintf("message %02d", i))
			if err != nil {
				t.Fatalf("post %d: %v", i, err)
			}
			questions[env.EnvelopeID] = env.Text()
		}
	}
	post(1, 25)
	doneTexts := func(evs []map[string]any) int {
		n := 0
		for _, e := range filter(evs, "done") {
			if e["type"] == agentnet.EventText && e["sender"] != agentID {
				n++
			}
		}
		return n
	}
	run1.waitFor(20*time.Second, "some processed messages", func(evs []map[string]any) bool { return doneTexts(evs) >= 8 })
	run1.kill()
	ev1 := run1.snapshot()
	if n := doneTexts(ev1); n >= 25 {
		t.Fatalf("run 1 processed all %d messages before the kill; nothing left to resume", n)
	}
	post(26, 35) // while the agent is down

	run2 := startAgent(t, args...)
	if id := run2.agentID(); id != agentID {
		t.Fatalf("restarted agent is %s, want the same identity %s", id, agentID)
	}
	// Wait until every question got its reply, then close the channel.
	replied := map[string]bool{}
	asker.next(t, ctx, "all replies", func(e *agentnet.Envelope) bool {
		if e.ChannelID == ch && e.SenderID == agentID && e.EventType == agentnet.EventText {
			replied[e.CausationID] = true
		}
		return len(replied) == len(questions)
	})
	closedMeta, err := asker.c.CloseChannel(ctx, ch, "")
	if err != nil {
		t.Fatal(err)
	}
	last := closedMeta.GetLastSeq()
	run2.waitFor(20*time.Second, "the close", func(evs []map[string]any) bool {
		for _, e := range filter(evs, "done") {
			if e["channel"] == ch && seqOf(e) == last {
				return true
			}
		}
		return false
	})
	ev2 := run2.snapshot()

	// What the agent may see of the channel, read with its own credentials.
	creds, err := agentnet.LoadCredentials(cursorFile + ".credential")
	if err != nil {
		t.Fatal(err)
	}
	reader, err := agentnet.Dial(h.Addr, creds)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	wal, err := reader.ReadWalAll(ctx, agentnet.ReadWalRequest{ChannelID: ch})
	if err != nil {
		t.Fatal(err)
	}

	seqs := func(evs []map[string]any, kind string) map[uint64]int {
		out := map[uint64]int{}
		for _, e := range filter(evs, kind) {
			if e["channel"] == ch {
				out[seqOf(e)]++
			}
		}
		return out
	}
	recv1, done1, recv2, done2 := seqs(ev1, "recv"), seqs(ev1, "done"), seqs(ev2, "recv"), seqs(ev2, "done")
	for _, m := range []map[uint64]int{recv1, recv2} {
		for s, n := range m {
			if n > 1 {
				t.Errorf("seq %d handed out %d times within one run", s, n)
			}
		}
	}
	for s := range done1 {
		if recv2[s] > 0 {
			t.Errorf("seq %d was processed by run 1 and delivered again to run 2", s)
		}
	}
	var inKillWindow []uint64 // acked (saved) by run 1 but killed before it printed "done"
	for s := range recv1 {
		if done1[s] == 0 && recv2[s] == 0 {
			inKillWindow = append(inKillWindow, s)
		}
	}
	if len(inKillWindow) > 1 {
		t.Errorf("run 1 received %v without processing them, and run 2 never got them", inKillWindow)
	}
	for _, env := range wal {
		if env.EventType == agentnet.EventInvite || env.SenderID == agentID {
			continue // invites are answered by the Session; own posts are not delivered back
		}
		s := env.Seq
		if recv1[s] == 0 && recv2[s] == 0 {
			t.Errorf("gap: seq %d (%s %q) was never delivered", s, env.EventType, env.Text())
		}
		if done1[s] == 0 && done2[s] == 0 && !slices.Contains(inKillWindow, s) {
			t.Errorf("seq %d was never processed", s)
		}
	}
	if len(recv2) == 0 || len(done1) == 0 {
		t.Fatalf("expected work in both runs: run1 done %d, run2 recv %d", len(done1), len(recv2))
	}
	// Exactly one reply per question in the WAL (idempotent replies).
	replies := map[string]int{}
	for _, env := range wal {
		if env.SenderID == agentID && env.EventType == agentnet.EventText {
			replies[env.CausationID]++
			if q, ok := questions[env.CausationID]; ok && env.Text() != answer(q) {
				t.Errorf("reply %q to %q", env.Text(), q)
			}
		}
	}
	for id, q := range questions {
		if replies[id] != 1 {
			t.Errorf("question %q has %d replies, want 1", q, replies[id])
		}
	}
	replays := 0
	for _, e := range filter(ev2, "recv") {
		if e["replay"] == true {
			replays++
		}
	}
	t.Logf("run 1: %d received, %d processed; run 2: %d received (%d replayed)",
		len(recv1), len(done1), len(recv2), replays)
}

func seqOf(e map[string]any) uint64 {
	f, _ := e["seq"].(float64)
	return uint64(f)
}

// (3) Refusals surface as typed errors with the hub's reason.
func TestErrorReasons(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 40*time.Second)
	h := testhub.Start(t)
	a := newParticipant(t, ctx, h.Addr, "alice", agentnet.ConnectOptions{AutoAck: true})
	b := newParticipant(t, ctx, h.Addr, "bob", agentnet.ConnectOptions{AutoAck: true})
	c := newParticipant(t, ctx, h.Addr, "carol", agentnet.ConnectOptions{AutoAck: true})

	check := func(what string, err error, reason string, code codes.Code) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: no error, want %s", what, reason)
		}
		if !agentnet.IsReason(err, reason) {
			t.Fatalf("%s: %v, want reason %s", what, err, reason)
		}
		e, _ := agentnet.AsError(err)
		if e.Code != code || status.Code(err) != code {
			t.Fatalf("%s: code %v, want %v", what, e.Code, code)
		}
		if !errors.Is(err, &agentnet.Error{Reason: reason}) {
			t.Fatalf("%s: errors.Is does not match the reason", what)
		}
		if e.Message == "" {
			t.Fatalf("%s: empty message", what)
		}
	}

	// Spoofed sender, over the stream and over the unary RPC.
	conv, err := a.c.OpenChannel(ctx, agentnet.OpenChannelRequest{Type: "conversation", Targets: []string{"bob"}, WaitUntilOpened: true})
	if err != nil {
		t.Fatal(err)
	}
	spoof := agentnet.NewText(conv.Channel.GetChannelId(), "I am bob")
	spoof.SenderID = b.id()
	if !a.s.Connected() {
		t.Fatal("alice's session is not connected")
	}
	_, err = a.c.Post(ctx, spoof)
	check("spoofed sender (stream)", err, agentnet.ReasonPermissionDenied, codes.PermissionDenied)
	unary, err := agentnet.Dial(h.Addr, a.c.Credentials())
	if err != nil {
		t.Fatal(err)
	}
	defer unary.Close()
	_, err = unary.Post(ctx, spoof)
	check("spoofed sender (unary)", err, agentnet.ReasonPermissionDenied, codes.PermissionDenied)
	if _, err := unary.PostText(ctx, conv.Channel.GetChannelId(), "hi over unary"); err != nil {
		t.Fatalf("unary post: %v", err)
	}

	// Discussion: strict round robin, initiator first.
	disc, err := a.c.OpenChannel(ctx, agentnet.OpenChannelRequest{
		Type: "discussion", Targets: []string{"bob", "carol"}, WaitUntilOpened: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	dch := disc.Channel.GetChannelId()
	_, err = b.c.PostText(ctx, dch, "me first")
	check("out of turn (bob before alice)", err, agentnet.ReasonNotYourTurn, codes.FailedPrecondition)
	if _, err := a.c.PostText(ctx, dch, "alice opens"); err != nil {
		t.Fatal(err)
	}
	_, err = c.c.PostText(ctx, dch, "carol jumps the queue")
	check("out of turn (carol before bob)", err, agentnet.ReasonNotYourTurn, codes.FailedPrecondition)
	cs, err := c.c.CanSend(ctx, dch, "")
	if err != nil {
		t.Fatal(err)
	}
	if cs.Allowed || cs.Refusal == nil || cs.Refusal.Reason != agentnet.ReasonNotYourTurn || !slices.Contains(cs.ExpectedNext, b.id()) {
		t.Fatalf("CanSend for carol: %+v", cs)
	}
	bobs, err := b.c.PostText(ctx, dch, "bob's turn")
	if err != nil {
		t.Fatal(err)
	}
	// Carol's turn on bob's envelope fails: a discussion only hears of it (on_turn_failed "notify").
	if posted, action, err := c.c.ReportTurnFailure(ctx, dch, bobs.EnvelopeID, "ModelError", "model down", 3); err != nil || !posted || action != "notify" {
		t.Fatalf("ReportTurnFailure: %v, %q, %v", posted, action, err)
	}
	_, _, err = c.c.ReportTurnFailure(ctx, dch, bobs.EnvelopeID, "", "no class", 1)
	check("turn failure without an error class", err, agentnet.ReasonInvalidArgument, codes.InvalidArgument)

	// Consulting: one question, one reply, then closed.
	cons, err := a.c.OpenChannel(ctx, agentnet.OpenChannelRequest{
		Type: "consulting", Targets: []string{"bob"}, Message: "question?", WaitUntilOpened: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	cch := cons.Channel.GetChannelId()
	if none, err := b.c.FindReply(ctx, cch, cons.SeedEnvelopeID, ""); err != nil || none != nil {
		t.Fatalf("FindReply before the reply: %v, %v", none, err)
	}
	answer, err := b.c.PostText(ctx, cch, "the answer", agentnet.WithCausation(cons.SeedEnvelopeID))
	if err != nil {
		t.Fatalf("reply: %v", err)
	}
	// A handler answering the question again (a redelivery) finds its reply first.
	if found, err := b.c.FindReply(ctx, cch, cons.SeedEnvelopeID, ""); err != nil || found == nil || found.EnvelopeID != answer.EnvelopeID {
		t.Fatalf("FindReply (own): %v, %v", found, err)
	}
	if found, err := a.c.FindReply(ctx, cch, cons.SeedEnvelopeID, "bob"); err != nil || found == nil || found.Text() != "the answer" {
		t.Fatalf("FindReply (bob's, by name): %v, %v", found, err)
	}
	_, err = a.c.FindReply(ctx, cch, "", "")
	check("FindReply without causation", err, agentnet.ReasonInvalidArgument, codes.InvalidArgument)
	_, err = b.c.PostText(ctx, cch, "and another thing")
	check("consulting double reply", err, agentnet.ReasonChannelClosed, codes.FailedPrecondition)
	_, err = a.c.PostText(ctx, cch, "follow-up")
	check("consulting follow-up", err, agentnet.ReasonChannelClosed, codes.FailedPrecondition)

	// Not a participant, unknown channel, bad credential, bad input.
	_, err = c.c.PostText(ctx, conv.Channel.GetChannelId(), "let me in")
	check("not participant", err, agentnet.ReasonNotParticipant, codes.PermissionDenied)
	_, err = a.c.DescribeChannel(ctx, "no-such-channel")
	check("unknown channel", err, agentnet.ReasonNotFound, codes.NotFound)
	bogus, err := agentnet.Dial(h.Addr, agentnet.Credentials{Credential: "not-a-credential"})
	if err != nil {
		t.Fatal(err)
	}
	defer bogus.Close()
	_, err = bogus.ListTools(ctx, agentnet.ListToolsRequest{})
	check("bad credential (unary)", err, agentnet.ReasonUnauthenticated, codes.Unauthenticated)
	_, err = bogus.Connect(ctx, agentnet.ConnectOptions{})
	check("bad credential (connect)", err, agentnet.ReasonUnauthenticated, codes.Unauthenticated)
	_, err = a.c.Post(ctx, &agentnet.Envelope{EventType: agentnet.EventText})
	check("no channel id", err, agentnet.ReasonInvalidArgument, codes.InvalidArgument)
	_, err = agentnet.Register(ctx, h.Addr, &agentnet.Passport{Name: "alice"}, nil)
	check("duplicate name", err, agentnet.ReasonAlreadyExists, codes.AlreadyExists)
	_, err = agentnet.Register(ctx, h.Addr, &agentnet.Passport{Name: "human-via-register", Kind: agentnet.KindHuman}, nil)
	check("human via Register", err, agentnet.ReasonInvalidArgument, codes.InvalidArgument)
	// A cursor store written for another agent is refused (and left alone).
	storePath := filepath.Join(t.TempDir(), "alice.json")
	aliceStore := agentnet.NewFileCursorStore(storePath)
	if err := aliceStore.Save(&agentnet.CursorState{AgentID: a.id(), Channels: map[string]agentnet.ChannelCursor{"x": {Seq: 9}}}); err != nil {
		t.Fatal(err)
	}
	dave := register(t, ctx, h.Addr, "dave")
	_, err = dave.Connect(ctx, agentnet.ConnectOptions{Cursors: aliceStore})
	check("foreign cursor store", err, agentnet.ReasonFailedPrecondition, codes.FailedPrecondition)
	daveByCred, err := agentnet.Dial(h.Addr, agentnet.Credentials{Credential: dave.Credentials().Credential})
	if err != nil {
		t.Fatal(err)
	}
	defer daveByCred.Close()
	_, err = daveByCred.Connect(ctx, agentnet.ConnectOptions{Cursors: aliceStore})
	check("foreign cursor store (learnt from Welcome)", err, agentnet.ReasonFailedPrecondition, codes.FailedPrecondition)
	if st, err := aliceStore.Load(); err != nil || st.AgentID != a.id() || st.Channels["x"].Seq != 9 {
		t.Fatalf("foreign store modified: %+v %v", st, err)
	}
	if daveByCred.AgentID() != dave.AgentID() {
		t.Fatalf("Dial'ed client learnt agent id %q, want %q", daveByCred.AgentID(), dave.AgentID())
	}

	human, err := agentnet.RegisterHuman(ctx, h.Addr, &agentnet.Passport{Name: "hannah"}, nil)
	if err != nil {
		t.Fatalf("RegisterHuman: %v", err)
	}
	defer human.Close()
	if human.Record().GetPassport().GetKind() != agentnet.KindHuman {
		t.Fatalf("human kind %v", human.Record().GetPassport().GetKind())
	}
}

// The cursor moves over seqs this agent never gets (its own seed post, another invitee's
// invite), so a discussion initiator ends at the channel's last seq.
func TestCursorSkipsInvisibleSeqs(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 30*time.Second)
	h := testhub.Start(t)
	a := newParticipant(t, ctx, h.Addr, "alice", agentnet.ConnectOptions{AutoAck: true})
	newParticipant(t, ctx, h.Addr, "bob", agentnet.ConnectOptions{AutoAck: true})
	newParticipant(t, ctx, h.Addr, "carol", agentnet.ConnectOptions{AutoAck: true})
	disc, err := a.c.OpenChannel(ctx, agentnet.OpenChannelRequest{
		Type: "discussion", Targets: []string{"bob", "carol"}, Message: "topic", WaitUntilOpened: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ch := disc.Channel.GetChannelId()
	meta, err := a.c.CloseChannel(ctx, ch, "done")
	if err != nil {
		t.Fatal(err)
	}
	a.next(t, ctx, "closed", func(e *agentnet.Envelope) bool { return e.ChannelID == ch && e.EventType == agentnet.EventClosed })
	deadline := time.Now().Add(10 * time.Second)
	for a.s.Cursors()[ch] != meta.GetLastSeq() {
		if time.Now().After(deadline) {
			t.Fatalf("cursor %d, want the last seq %d", a.s.Cursors()[ch], meta.GetLastSeq())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// (4) The network tools over RPC, and Delegate to the Go agent process.
func TestTools(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 40*time.Second)
	h := testhub.Start(t)
	startAgent(t, "--hub", h.Addr, "--name", "go-consultant")
	u := newParticipant(t, ctx, h.Addr, "tool-user", agentnet.ConnectOptions{AutoAck: true})

	names := func(tools []*agentnet.ToolSchema) []string {
		var out []string
		for _, tool := range tools {
			var schema map[string]any
			if err := json.Unmarshal([]byte(tool.GetParametersJsonSchema()), &schema); err != nil {
				t.Fatalf("schema of %s: %v", tool.GetName(), err)
			}
			out = append(out, tool.GetName())
		}
		slices.Sort(out)
		return out
	}
	tools, err := u.c.ListTools(ctx, agentnet.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(tools), []string{"channels", "context", "delegate", "peers", "tasks"}; !slices.Equal(got, want) {
		t.Fatalf("plugin tools %v, want %v", got, want)
	}

	conv, err := u.c.OpenChannel(ctx, agentnet.OpenChannelRequest{
		Type: "conversation", Targets: []string{"go-consultant"}, WaitUntilOpened: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ch := conv.Channel.GetChannelId()
	tools, err = u.c.ListTools(ctx, agentnet.ListToolsRequest{ChannelID: ch})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(tools); !slices.Contains(got, "say") || len(got) != 6 {
		t.Fatalf("tools in a conversation: %v, want the plugin tools and say", got)
	}

	raw, err := u.c.CallTool(ctx, agentnet.ToolCall{Name: "peers", Arguments: map[string]any{"action": "find", "query": "consultant"}})
	if err != nil {
		t.Fatal(err)
	}
	var found struct {
		Peers []struct {
			Name string `json:"name"`
			Kind string `json:"kind"`
		} `json:"peers"`
	}
	if err := json.Unmarshal(raw, &found); err != nil {
		t.Fatalf("peers result %s: %v", raw, err)
	}
	if len(found.Peers) != 1 || found.Peers[0].Name != "go-consultant" {
		t.Fatalf("peers find: %s", raw)
	}
	_, err = u.c.CallTool(ctx, agentnet.ToolCall{Name: "peers", Arguments: `{"action": "fly"}`})
	if !agentnet.IsReason(err, agentnet.ReasonInvalidArgument) {
		t.Fatalf("bad tool arguments: %v", err)
	}
	raw, err = u.c.CallTool(ctx, agentnet.ToolCall{Name: "say", Arguments: map[string]any{"content": "via the say tool"}, ChannelID: ch})
	if err != nil {
		t.Fatalf("say tool: %v", err)
	}
	if !strings.Contains(string(raw), "envelope_id") {
		t.Fatalf("say tool result %s", raw)
	}
	said, err := u.c.Say(ctx, ch, "via the Say RPC")
	if err != nil {
		t.Fatal(err)
	}
	if said.Text() != "via the Say RPC" || said.Seq == 0 {
		t.Fatalf("say: %+v", said)
	}

	d, err := u.c.Delegate(ctx, agentnet.DelegateRequest{Target: "go-consultant", Prompt: "what is 6 x 7?", Timeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("delegate: %v", err)
	}
	if want := answer("what is 6 x 7?"); d.Text != want {
		t.Fatalf("delegate answer %q, want %q", d.Text, want)
	}

	// The delegator example does the same from its own process.
	out, err := exec.CommandContext(ctx, exampleBin(t, "delegator"), "--hub", h.Addr, "--target", "go-consultant", "ping", "pong").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("delegator: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("delegator: %v", err)
	}
	if got, want := strings.TrimSpace(string(out)), answer("ping pong"); got != want {
		t.Fatalf("delegator printed %q, want %q", got, want)
	}
}

// The Session survives a hub crash and restart: it reconnects with backoff,
// resumes from its cursors and hands out each envelope once.
func TestReconnectAcrossHubRestart(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 45*time.Second)
	dir := t.TempDir()
	h := testhub.StartIn(t, dir)
	hub := testhub.Forward(t, h.Addr) // the address the clients keep across the restart
	fast := agentnet.ConnectOptions{MinBackoff: 50 * time.Millisecond, MaxBackoff: 300 * time.Millisecond}
	a := newParticipant(t, ctx, hub.Addr, "alice", agentnet.ConnectOptions{AutoAck: true, MinBackoff: fast.MinBackoff, MaxBackoff: fast.MaxBackoff})
	b := newParticipant(t, ctx, hub.Addr, "bob", fast)
	conv, err := a.c.OpenChannel(ctx, agentnet.OpenChannelRequest{Type: "conversation", Targets: []string{"bob"}, WaitUntilOpened: true})
	if err != nil {
		t.Fatal(err)
	}
	ch := conv.Channel.GetChannelId()
	seen := map[string]int{}
	texts := func(n int) {
		t.Helper()
		got := 0
		b.next(t, ctx, fmt.Sprintf("%d texts", n), func(e *agentnet.Envelope) bool {
			if e.ChannelID == ch && e.EventType == agentnet.EventText {
				seen[e.EnvelopeID]++
				got++
			}
			return got == n
		})
	}
	for i := range 3 {
		if _, err := a.c.PostText(ctx, ch, fmt.Sprintf("before %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	texts(3)

	hub.PointTo("") // refused while down, whoever takes the old port
	h.Kill()
	deadline := time.Now().Add(10 * time.Second)
	for b.s.Connected() {
		if time.Now().After(deadline) {
			t.Fatal("bob's session still looks connected after the hub stopped")
		}
		time.Sleep(20 * time.Millisecond)
	}
	h2 := testhub.StartIn(t, dir)
	hub.PointTo(h2.Addr)
	if err := b.s.WaitConnected(ctx); err != nil {
		t.Fatalf("bob did not reconnect: %v", err)
	}
	if err := a.s.WaitConnected(ctx); err != nil {
		t.Fatalf("alice did not reconnect: %v", err)
	}
	for i := range 3 {
		if _, err := a.c.PostText(ctx, ch, fmt.Sprintf("after %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	texts(3)
	if len(seen) != 6 {
		t.Fatalf("bob saw %d distinct texts, want 6", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("envelope %s handed out %d times", id, n)
		}
	}
	if got := b.s.Cursors()[ch]; got == 0 {
		t.Fatalf("bob's cursor did not advance")
	}
	_ = a.s.Close() // before the hub's cleanup, so it stops without waiting for streams
	_ = b.s.Close()
}

// Closing a Client stops every goroutine its Session and connection started.
// (Not parallel: it counts goroutines.)
func TestCloseStopsGoroutines(t *testing.T) {
	ctx := testContext(t, 30*time.Second)
	h := testhub.Start(t)
	peer := register(t, ctx, h.Addr, "peer")
	time.Sleep(100 * time.Millisecond)
	before := runtime.NumGoroutine()

	c, err := agentnet.Register(ctx, h.Addr, &agentnet.Passport{Name: "short-lived", Kind: agentnet.KindRemoteAgent}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Connect(ctx, agentnet.ConnectOptions{OnInvite: func(context.Context, *agentnet.Invite) bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	res, err := peer.OpenChannel(ctx, agentnet.OpenChannelRequest{Type: "conversation", Targets: []string{"short-lived"}, WaitUntilOpened: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := peer.PostText(ctx, res.Channel.GetChannelId(), "hello"); err != nil {
		t.Fatal(err)
	}
	for env := range s.Envelopes() {
		_ = env.Ack()
		if env.EventType == agentnet.EventText {
			break
		}
	}
	if _, err := c.PostText(ctx, res.Channel.GetChannelId(), "bye"); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	default:
		t.Fatal("session not done after Client.Close")
	}
	if _, ok := <-s.Envelopes(); ok {
		t.Fatal("Envelopes() not closed")
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}
