package agentnet

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	agentnetv1 "github.com/agent-network/agent-network/gen/go/agentnet/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Every generated ErrorReason has its constant, with the same spelling.
func TestReasonConstantsMatchEnum(t *testing.T) {
	consts := map[string]string{
		ReasonProtocolError: "PROTOCOL_ERROR", ReasonChannelClosed: "CHANNEL_CLOSED",
		ReasonNotParticipant: "NOT_PARTICIPANT", ReasonNotYourTurn: "NOT_YOUR_TURN",
		ReasonUnauthenticated: "UNAUTHENTICATED", ReasonPermissionDenied: "PERMISSION_DENIED",
		ReasonInboxFull: "INBOX_FULL", ReasonRateLimited: "RATE_LIMITED",
		ReasonInvalidArgument: "INVALID_ARGUMENT", ReasonNotFound: "NOT_FOUND",
		ReasonAlreadyExists: "ALREADY_EXISTS", ReasonTimeout: "TIMEOUT",
		ReasonDepthExceeded: "DEPTH_EXCEEDED", ReasonPayloadTooLarge: "PAYLOAD_TOO_LARGE",
		ReasonTokenExpired: "TOKEN_EXPIRED", ReasonUnimplemented: "UNIMPLEMENTED",
		ReasonInternal: "INTERNAL", ReasonUnavailable: "UNAVAILABLE",
		ReasonFailedPrecondition: "FAILED_PRECONDITION", ReasonOutOfRange: "OUT_OF_RANGE",
		ReasonRuleDenied: "RULE_DENIED", ReasonLimitExceeded: "LIMIT_EXCEEDED",
		ReasonSuperseded: "SUPERSEDED", ReasonTurnFailed: "TURN_FAILED",
	}
	for v := range agentnetv1.ErrorReason_name {
		r := ReasonOf(agentnetv1.ErrorReason(v))
		if v == 0 {
			if r != "" {
				t.Errorf("UNSPECIFIED maps to %q", r)
			}
			continue
		}
		if _, ok := consts[r]; !ok {
			t.Errorf("no Reason constant for %s", agentnetv1.ErrorReason(v))
		}
	}
	if len(consts) != len(agentnetv1.ErrorReason_name)-1 {
		t.Errorf("%d constants for %d enum values", len(consts), len(agentnetv1.ErrorReason_name)-1)
	}
	for c, want := range consts {
		if c != want {
			t.Errorf("constant %q != %q", c, want)
		}
	}
	if ReasonOf(agentnetv1.ErrorReason(999)) != "" {
		t.Error("unknown enum value has a reason")
	}
}

func TestFromStatusReadsErrorInfo(t *testing.T) {
	st, err := status.New(codes.FailedPrecondition, "wait for bob").WithDetails(&errdetails.ErrorInfo{
		Reason: ReasonNotYourTurn, Domain: ErrorDomain, Metadata: map[string]string{"channel_id": "c1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := FromStatus(st.Err())
	e, ok := AsError(got)
	if !ok || e.Code != codes.FailedPrecondition || e.Reason != ReasonNotYourTurn || e.Message != "wait for bob" ||
		e.Metadata["channel_id"] != "c1" {
		t.Fatalf("%+v", got)
	}
	if !IsReason(got, ReasonNotYourTurn) || IsReason(got, ReasonChannelClosed) || ReasonFor(got) != ReasonNotYourTurn {
		t.Fatal("IsReason / ReasonFor")
	}
	if !errors.Is(got, &Error{Reason: ReasonNotYourTurn}) || errors.Is(got, &Error{Code: codes.NotFound}) {
		t.Fatal("errors.Is")
	}
	back, _ := status.FromError(got)
	if back.Code() != codes.FailedPrecondition || len(back.Details()) != 1 {
		t.Fatalf("GRPCStatus round trip: %v", back)
	}
	if FromStatus(nil) != nil {
		t.Fatal("nil error")
	}
	if e, _ := AsError(FromStatus(status.Error(codes.Unavailable, "down"))); e.Reason != "" || e.Code != codes.Unavailable {
		t.Fatalf("transport error %+v", e)
	}
	if !errors.Is(FromStatus(status.Error(codes.DeadlineExceeded, "slow")), context.DeadlineExceeded) {
		t.Fatal("deadline not reachable through errors.Is")
	}
	if !errors.Is(FromStatus(context.Canceled), context.Canceled) {
		t.Fatal("plain context error")
	}
	if e, _ := AsError(FromStatus(errors.New("boom"))); e.Code != codes.Unknown {
		t.Fatal("plain error")
	}
	var nilErr *Error
	if nilErr.Error() != "<nil>" {
		t.Fatal("nil *Error")
	}
}

func TestFromDetail(t *testing.T) {
	e := FromDetail(&agentnetv1.ErrorDetail{Code: 7, Reason: ReasonPermissionDenied, Message: "not you", Metadata: map[string]string{"k": "v"}})
	if e.Code != codes.PermissionDenied || e.Reason != ReasonPermissionDenied || e.Metadata["k"] != "v" {
		t.Fatalf("%+v", e)
	}
	if !strings.Contains(e.Error(), "PERMISSION_DENIED") || !strings.Contains(e.Error(), "not you") {
		t.Fatal(e.Error())
	}
	if FromDetail(nil).Code != codes.Unknown || FromDetail(&agentnetv1.ErrorDetail{Code: 99}).Code != codes.Unknown {
		t.Fatal("bad details")
	}
}

func TestDecodeEventData(t *testing.T) {
	m, err := DecodeEventData(`{"n": 12345678901234567890, "f": 1.5, "s": "x", "o": {"a": [1]}}`)
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := m["n"].(json.Number); !ok || n.String() != "12345678901234567890" {
		t.Fatalf("big int not exact: %#v", m["n"])
	}
	if m, err := DecodeEventData(""); err != nil || len(m) != 0 {
		t.Fatal("empty is {}")
	}
	for _, bad := range []string{"[1,2]", "nope", `{"a":1} {"b":2}`, `"str"`, `{"a":`} {
		m, err := DecodeEventData(bad)
		if err == nil || m == nil {
			t.Errorf("%q: err %v, map %v", bad, err, m)
		}
	}
	env := EnvelopeFromProto(&agentnetv1.Envelope{EventType: EventText, EventDataJson: "[oops"})
	if env.EventDataErr == nil || env.Text() != "" || env.EventData == nil {
		t.Fatal("bad payload must not break the envelope")
	}
	if EnvelopeFromProto(nil).EventData == nil {
		t.Fatal("nil envelope")
	}
	var nilEnv *Envelope
	if nilEnv.Text() != "" || nilEnv.Ack() != nil || nilEnv.IsLifecycle() || nilEnv.Broadcast() {
		t.Fatal("nil envelope helpers")
	}
}

func TestEnvelopeRoundTrip(t *testing.T) {
	in := NewText("c1", "hi", WithAudience("a", "b"), WithCausation("e0"), WithTask("t1"), WithTrace("tr"),
		WithPriority(PriorityUrgent), WithIdempotencyKey("k"), WithTTL(1500*time.Millisecond), WithDepth(2))
	w, err := in.Proto()
	if err != nil {
		t.Fatal(err)
	}
	if w.GetTtlSeconds() != 2 || w.GetIdempotencyKey() != "k" || w.GetEventDataJson() != `{"text":"hi"}` {
		t.Fatalf("%v", w)
	}
	w.Seq, w.EnvelopeId, w.CreatedAt = 4, "e1", "2026-11-30T12:00:00.123456Z"
	out := EnvelopeFromProto(w)
	if out.Text() != "hi" || !reflect.DeepEqual(out.Audience, []string{"a", "b"}) || out.CausationID != "e0" ||
		out.TaskID != "t1" || out.TraceID != "tr" || out.Priority != PriorityUrgent || out.Depth != 2 ||
		out.TTL != 2*time.Second || out.Seq != 4 || out.CreatedAt.Nanosecond() != 123456000 || out.Broadcast() {
		t.Fatalf("%+v", out)
	}
	none, _ := NewText("c1", "x", WithAudience()).Proto()
	if none.Audience == nil || len(none.GetAudience().GetAgentIds()) != 0 {
		t.Fatal("empty audience must stay explicit")
	}
	if EnvelopeFromProto(none).Audience == nil {
		t.Fatal("explicit empty audience lost on the way in")
	}
	broadcast, _ := NewText("c1", "x").Proto()
	if broadcast.Audience != nil {
		t.Fatal("broadcast got an audience")
	}
	if _, err := (&Envelope{EventData: map[string]any{"f": func() {}}}).Proto(); !IsReason(err, ReasonInvalidArgument) {
		t.Fatalf("unencodable payload: %v", err)
	}
	p := NewPacket("c1", Packet{ToolCalled: "next", Set: map[string]any{"k": 1}, Body: "b"})
	if p.Text() != "b" || p.EventData["routing"].(map[string]any)["tool_called"] != "next" {
		t.Fatalf("%+v", p.EventData)
	}
}

func TestTypedPacketRouting(t *testing.T) {
	handoff := NewPacket("c1", Packet{ToolCalled: "pick", Handoff: &Handoff{Target: "bob", Reason: "knows"}})
	want := map[string]any{"tool_called": "pick", "kind": "handoff", "target": "bob", "reason": "knows"}
	if got := handoff.EventData["routing"]; !reflect.DeepEqual(got, want) {
		t.Fatalf("handoff routing %v, want %v", got, want)
	}
	finish := NewPacket("c1", Packet{Reason: "all good", Finish: &Finish{Summary: "done", Reason: "shipped"}})
	want = map[string]any{"tool_called": nil, "reason": "all good", "kind": "finish", "close_reason": "shipped", "summary": "done"}
	if got := finish.EventData["routing"]; !reflect.DeepEqual(got, want) {
		t.Fatalf("finish routing %v, want %v", got, want)
	}
}

func TestInviteFrom(t *testing.T) {
	env := EnvelopeFromProto(&agentnetv1.Envelope{
		ChannelId: "c1", SenderId: HubSender, EventType: EventInvite,
		Audience:      &agentnetv1.Audience{AgentIds: []string{"me"}},
		EventDataJson: `{"channel_id":"c1","type":"consulting","initiator":"a","initiator_name":"alice","intent":"q","participants":["a","me"],"knobs":{"x":1}}`,
	})
	inv := inviteFrom(env)
	if inv.Type != "consulting" || inv.InitiatorName != "alice" || !reflect.DeepEqual(inv.Participants, []string{"a", "me"}) ||
		inv.Knobs["x"] == nil || !env.IsLifecycle() {
		t.Fatalf("%+v", inv)
	}
	odd := inviteFrom(EnvelopeFromProto(&agentnetv1.Envelope{EventDataJson: `{"participants": [1, null], "knobs": 3}`}))
	if len(odd.Participants) != 0 || odd.Knobs != nil {
		t.Fatalf("%+v", odd)
	}
}

// The delivery chain moves the cursor exactly, whatever the ack order.
func TestTrackerChain(t *testing.T) {
	tr := newTracker(nil)
	// Chain 0 -> 3 -> 4 -> 7 (seqs 1, 2, 5, 6 are for others), delivered 3, 7, 4 (7 urgent).
	for _, d := range [][2]uint64{{3, 0}, {7, 4}, {4, 3}} {
		if tr.classify("c", d[0], d[1]) != deliverNew {
			t.Fatalf("seq %d not new", d[0])
		}
	}
	if tr.classify("c", 7, 4) != deliverHeld {
		t.Fatal("redelivery of a held envelope")
	}
	tr.markDone("c", 7, false)
	if got := tr.cursors()["c"]; got != 0 {
		t.Fatalf("cursor %d after acking 7 only", got)
	}
	if tr.classify("c", 7, 4) != deliverProcessed {
		t.Fatal("processed 7 not recognised")
	}
	tr.markDone("c", 3, false)
	if got := tr.cursors()["c"]; got != 3 {
		t.Fatalf("cursor %d, want 3", got)
	}
	snap := tr.snapshot("me")
	if c := snap.Channels["c"]; c.Seq != 3 || !reflect.DeepEqual(c.Done, [][2]uint64{{4, 7}}) {
		t.Fatalf("snapshot %+v", c)
	}
	// A restarted process resumes from the snapshot.
	re := newTracker(snap)
	if re.classify("c", 7, 4) != deliverProcessed || re.classify("c", 3, 0) != deliverProcessed {
		t.Fatal("restored state lost processed seqs")
	}
	if re.classify("c", 4, 3) != deliverNew {
		t.Fatal("unprocessed 4 must come again")
	}
	re.markDone("c", 4, false)
	if got := re.cursors()["c"]; got != 7 {
		t.Fatalf("cursor %d, want 7", got)
	}
	if re.markDone("c", 4, false) || re.markDone("nope", 1, false) {
		t.Fatal("repeated or unknown acks change nothing")
	}
	if !reflect.DeepEqual(re.hello(), map[string]uint64{"c": 7}) {
		t.Fatal(re.hello())
	}
}

func TestTrackerResumeAndForget(t *testing.T) {
	tr := newTracker(&CursorState{Channels: map[string]ChannelCursor{"c": {Seq: 2, Done: [][2]uint64{{5, 8}}}}})
	tr.classify("c", 5, 2)
	// Welcome says the hub resumes c at 6 (e.g. its stored cursor is ahead) and d at 10.
	if !tr.resume(map[string]uint64{"c": 6, "d": 10}) {
		t.Fatal("resume changed nothing")
	}
	c := tr.chans["c"]
	if c.cursor != 8 || len(c.held) != 0 || len(c.done) != 0 {
		t.Fatalf("after resume: cursor %d held %v done %v", c.cursor, c.held, c.done)
	}
	if tr.classify("d", 10, 9) != deliverProcessed || tr.classify("d", 11, 10) != deliverNew {
		t.Fatal("a new channel starts at its Welcome cursor")
	}
	tr.markDone("d", 11, true)
	now := time.Now()
	if tr.forget(now, time.Minute) {
		t.Fatal("forgot before the end was acked to the hub")
	}
	tr.ackSent(map[string]uint64{"d": 11}, now)
	if tr.forget(now.Add(30*time.Second), time.Minute) || !tr.forget(now.Add(2*time.Minute), time.Minute) {
		t.Fatal("forget timing")
	}
	if _, ok := tr.chans["d"]; ok {
		t.Fatal("ended channel kept")
	}
}

func TestFileCursorStore(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cursors.json")
	fs := NewFileCursorStore(path)
	if s, err := fs.Load(); err != nil || s != nil {
		t.Fatalf("missing file: %v %v", s, err)
	}
	want := &CursorState{AgentID: "a1", Channels: map[string]ChannelCursor{"c": {Seq: 3, Done: [][2]uint64{{4, 7}}, EndSeq: 0}}}
	fs.Sync = true
	if err := fs.Save(want); err != nil {
		t.Fatal(err)
	}
	got, err := fs.Load()
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("%+v %v", got, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Load(); err == nil {
		t.Fatal("corrupt file accepted")
	}
	if err := NewFileCursorStore(filepath.Join(dir, "missing", "x.json")).Save(want); err == nil {
		t.Fatal("save into a missing directory succeeded")
	}
	m := NewMemoryCursorStore()
	_ = m.Save(want)
	got, _ = m.Load()
	got.Channels["c"] = ChannelCursor{}
	again, _ := m.Load()
	if again.Channels["c"].Seq != 3 {
		t.Fatal("memory store shares state with callers")
	}
}

func TestCredentialsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "creds.json")
	if err := SaveCredentials(path, Credentials{AgentID: "a", Name: "n", Credential: "secret"}); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	c, err := LoadCredentials(path)
	if err != nil || c.Credential != "secret" || c.AgentID != "a" {
		t.Fatalf("%+v %v", c, err)
	}
	_ = os.WriteFile(path, []byte(`{"agent_id":"a"}`), 0o600)
	if _, err := LoadCredentials(path); err == nil {
		t.Fatal("credentials without a credential accepted")
	}
}

func TestClientArgumentErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := Register(ctx, "127.0.0.1:1", nil, nil); !IsReason(err, ReasonInvalidArgument) {
		t.Fatal(err)
	}
	if _, err := Register(ctx, "", &Passport{Name: "x"}, nil); !IsReason(err, ReasonInvalidArgument) {
		t.Fatal(err)
	}
	if _, err := Dial("127.0.0.1:1", Credentials{}); !IsReason(err, ReasonInvalidArgument) {
		t.Fatal(err)
	}
	c, err := Dial("127.0.0.1:1", Credentials{Credential: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Post(ctx, &Envelope{ChannelID: "c"}); !IsReason(err, ReasonInvalidArgument) {
		t.Fatal("post without event type", err)
	}
	if _, err := c.Post(ctx, nil); !IsReason(err, ReasonInvalidArgument) {
		t.Fatal("nil envelope", err)
	}
	if _, err := c.Delegate(ctx, DelegateRequest{Timeout: -1}); !IsReason(err, ReasonInvalidArgument) {
		t.Fatal("negative timeout", err)
	}
	if _, err := c.CallTool(ctx, ToolCall{Name: "peers", Arguments: make(chan int)}); !IsReason(err, ReasonInvalidArgument) {
		t.Fatal("unencodable arguments", err)
	}
	_ = c.Close()
	_ = c.Close()
	if _, err := c.PostText(ctx, "c", "x"); !errors.Is(err, ErrClosed) {
		t.Fatal("post after close", err)
	}
	if _, err := c.Connect(ctx, ConnectOptions{}); !errors.Is(err, ErrClosed) {
		t.Fatal("connect after close", err)
	}
	dead, _ := Dial("127.0.0.1:1", Credentials{Credential: "x"})
	defer dead.Close()
	sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := dead.Connect(sctx, ConnectOptions{MinBackoff: 20 * time.Millisecond}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("connect to nothing: %v", err)
	}
}
