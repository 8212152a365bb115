package agentnet

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	agentnetv1 "github.com/agent-network/agent-network/gen/go/agentnet/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// A dispatch as the hub writes it (MessageToDict with proto field names).
const dispatchJSON = `{"text": "Charge it", "a2a": {"execution_id": "e1", "root_session_id": "r1",
	"message": "Charge it", "skill": "payments", "custom_headers": {"x-tenant": "acme"}}}`

func TestA2ADispatchOf(t *testing.T) {
	env := EnvelopeFromProto(&agentnetv1.Envelope{
		ChannelId: "ch1", SenderId: "caller", EventType: EventText, EnvelopeId: "q1", Seq: 2,
		EventDataJson: dispatchJSON,
	})
	d, ok := A2ADispatchOf(env)
	if !ok {
		t.Fatal("no dispatch")
	}
	token, exp := d.CallToken()
	if d.ChannelID != "ch1" || d.CallerID != "caller" || d.ExecutionID != "e1" || d.RootSessionID != "r1" ||
		d.Message != "Charge it" || d.Skill != "payments" || !reflect.DeepEqual(d.CustomHeaders, map[string]string{"x-tenant": "acme"}) ||
		d.Envelope != env || token != "" || !exp.IsZero() {
		t.Fatalf("%+v token %q exp %v", d, token, exp)
	}
	// Without headers (omitted by the hub when empty); a token written into an
	// old hub's dispatch is ignored (tokens are obtained from the hub).
	d, ok = A2ADispatchOf(NewText("ch", "hi", func(e *Envelope) {
		e.EventData["a2a"] = map[string]any{"execution_id": "e2", "message": "hi", "call_token": "e2.x"}
	}))
	if tok, _ := d.CallToken(); !ok || d.CustomHeaders == nil || len(d.CustomHeaders) != 0 || tok != "" {
		t.Fatalf("minimal dispatch %+v %v", d, ok)
	}
	notDispatches := map[string]*Envelope{
		"plain text":      NewText("ch", "hi"),
		"reply":           NewA2AInputRequired("ch", "who?"),
		"failed reply":    NewA2AFailed("ch", "no"),
		"not text":        {ChannelID: "ch", EventType: EventPacket, EventData: map[string]any{"a2a": map[string]any{"execution_id": "e"}}},
		"a2a not object":  NewText("ch", "x", func(e *Envelope) { e.EventData["a2a"] = "e1" }),
		"bad field types": NewText("ch", "x", func(e *Envelope) { e.EventData["a2a"] = map[string]any{"execution_id": 5} }),
		"nil":             nil,
	}
	for name, env := range notDispatches {
		if d, ok := A2ADispatchOf(env); ok || d != nil {
			t.Errorf("%s: dispatch %+v", name, d)
		}
	}
}

func TestA2AReplyBuilders(t *testing.T) {
	for _, tc := range []struct {
		env  *Envelope
		want string
	}{
		{NewA2AReply("ch", "done", WithCausation("q1")), `{"a2a":{"status":"completed"},"text":"done"}`},
		{NewA2AInputRequired("ch", "who approves?"), `{"a2a":{"status":"input-required"},"text":"who approves?"}`},
		{NewA2AFailed("ch", "ledger down"), `{"a2a":{"error":"ledger down","status":"failed"},"text":"ledger down"}`},
	} {
		w, err := tc.env.Proto()
		if err != nil {
			t.Fatal(err)
		}
		if w.GetChannelId() != "ch" || w.GetEventType() != EventText || w.GetEventDataJson() != tc.want {
			t.Errorf("%v, want %s", w, tc.want)
		}
	}
	if NewA2AReply("ch", "x", WithCausation("q1")).CausationID != "q1" {
		t.Error("options not applied")
	}
}

// fakeA2AHub answers InvokeAgent and RefreshCallToken; every other RPC panics.
type fakeA2AHub struct {
	agentnetv1.HubServiceClient
	mu        sync.Mutex
	valid     map[string]bool // tokens InvokeAgent accepts
	issue     []string        // tokens RefreshCallToken hands out, in order (none left = refuse)
	invoked   []string
	refreshed []string // execution ids RefreshCallToken was asked for
}

var freshExpiry = time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)

func refusal(code codes.Code, reason string) error {
	st, _ := status.New(code, reason).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain})
	return st.Err()
}

func (f *fakeA2AHub) InvokeAgent(_ context.Context, in *agentnetv1.InvokeAgentRequest, _ ...grpc.CallOption) (*agentnetv1.InvokeAgentResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.invoked = append(f.invoked, in.GetCallToken())
	switch {
	case in.GetAgentId() == "forbidden":
		return nil, refusal(codes.PermissionDenied, ReasonPermissionDenied)
	case !f.valid[in.GetCallToken()]:
		return nil, refusal(codes.Unauthenticated, ReasonTokenExpired)
	}
	return &agentnetv1.InvokeAgentResponse{Status: InvocationCompleted, Result: "ok " + in.GetMessage()}, nil
}

func (f *fakeA2AHub) RefreshCallToken(_ context.Context, in *agentnetv1.RefreshCallTokenRequest, _ ...grpc.CallOption) (*agentnetv1.RefreshCallTokenResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refreshed = append(f.refreshed, in.GetExecutionId())
	if in.GetCallToken() != "" || len(f.issue) == 0 {
		return nil, refusal(codes.FailedPrecondition, ReasonFailedPrecondition)
	}
	next := f.issue[0]
	f.issue = f.issue[1:]
	return &agentnetv1.RefreshCallTokenResponse{CallToken: next, ExpiresAt: timestamppb.New(freshExpiry)}, nil
}

func dispatchOf(t *testing.T) *Dispatch {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"text": "q", "a2a": map[string]any{"execution_id": "e1", "message": "q"}})
	d, ok := A2ADispatchOf(EnvelopeFromProto(&agentnetv1.Envelope{ChannelId: "ch", EventType: EventText, EventDataJson: string(b)}))
	if !ok {
		t.Fatal("no dispatch")
	}
	return d
}

// Dispatch.Invoke obtains a token of its execution before the first nested
// call, keeps it, and on TOKEN_EXPIRED obtains a fresh one once and retries.
func TestDispatchInvokeObtainsAndRefreshesItsToken(t *testing.T) {
	ctx := context.Background()
	t.Run("obtain, reuse, refresh and retry", func(t *testing.T) {
		f := &fakeA2AHub{valid: map[string]bool{"t1": true}, issue: []string{"t1", "t2"}}
		c := &Client{hub: f}
		d := dispatchOf(t)
		res, err := d.Invoke(ctx, c, InvokeRequest{AgentID: "x", Message: "m", CallToken: "ignored"})
		if err != nil || res.Status != InvocationCompleted || res.Result != "ok m" {
			t.Fatalf("%+v %v", res, err)
		}
		if !slices.Equal(f.invoked, []string{"t1"}) || !slices.Equal(f.refreshed, []string{"e1"}) {
			t.Fatalf("invoked %v refreshed %v", f.invoked, f.refreshed)
		}
		if tok, exp := d.CallToken(); tok != "t1" || !exp.Equal(freshExpiry) {
			t.Fatalf("dispatch token %q %v", tok, exp)
		}
		// The next call reuses it; once it expires, a fresh one is obtained.
		f.valid = map[string]bool{"t2": true}
		if _, err := d.Invoke(ctx, c, InvokeRequest{AgentID: "x", Message: "m"}); err != nil ||
			!slices.Equal(f.invoked, []string{"t1", "t1", "t2"}) || !slices.Equal(f.refreshed, []string{"e1", "e1"}) {
			t.Fatalf("second call: %v, invoked %v refreshed %v", err, f.invoked, f.refreshed)
		}
		if tok, _ := d.CallToken(); tok != "t2" {
			t.Fatalf("dispatch token %q", tok)
		}
	})
	t.Run("refused", func(t *testing.T) {
		f := &fakeA2AHub{}
		d := dispatchOf(t)
		_, err := d.Invoke(ctx, &Client{hub: f}, InvokeRequest{AgentID: "x", Message: "m"})
		if !IsReason(err, ReasonFailedPrecondition) || len(f.invoked) != 0 || !slices.Equal(f.refreshed, []string{"e1"}) {
			t.Fatalf("%v, invoked %v refreshed %v", err, f.invoked, f.refreshed)
		}
		if tok, _ := d.CallToken(); tok != "" {
			t.Fatalf("token %q", tok)
		}
	})
	t.Run("retried once only", func(t *testing.T) {
		f := &fakeA2AHub{issue: []string{"t1", "t2", "t3"}}
		d := dispatchOf(t)
		_, err := d.Invoke(ctx, &Client{hub: f}, InvokeRequest{AgentID: "x", Message: "m"})
		if !IsReason(err, ReasonTokenExpired) || !slices.Equal(f.invoked, []string{"t1", "t2"}) || len(f.refreshed) != 2 {
			t.Fatalf("%v, invoked %v refreshed %v", err, f.invoked, f.refreshed)
		}
	})
	t.Run("other refusals are not retried", func(t *testing.T) {
		f := &fakeA2AHub{valid: map[string]bool{"t1": true}, issue: []string{"t1"}}
		d := dispatchOf(t)
		_, err := d.Invoke(ctx, &Client{hub: f}, InvokeRequest{AgentID: "forbidden", Message: "m"})
		if !IsReason(err, ReasonPermissionDenied) || len(f.invoked) != 1 || len(f.refreshed) != 1 {
			t.Fatalf("%v, invoked %v refreshed %v", err, f.invoked, f.refreshed)
		}
	})
	t.Run("no execution id", func(t *testing.T) {
		f := &fakeA2AHub{}
		d := &Dispatch{}
		if _, err := d.Invoke(ctx, &Client{hub: f}, InvokeRequest{AgentID: "x", Message: "m"}); !IsReason(err, ReasonInvalidArgument) || len(f.invoked) != 0 {
			t.Fatalf("%v", err)
		}
		if err := d.RefreshCallToken(ctx, &Client{hub: f}); !IsReason(err, ReasonInvalidArgument) || len(f.refreshed) != 0 {
			t.Fatalf("%v", err)
		}
	})
}
