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
	"message": "Charge it", "skill": "payments", "custom_headers": {"x-tenant": "acme"},
	"call_token": "e1.secret", "call_token_expires_at": "2030-01-02T03:04:05.500Z"}}`

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
		d.Envelope != env || token != "e1.secret" || !exp.Equal(time.Date(2030, 1, 2, 3, 4, 5, 5e8, time.UTC)) {
		t.Fatalf("%+v token %q exp %v", d, token, exp)
	}
	// Without headers and expiry (omitted by the hub when empty).
	d, ok = A2ADispatchOf(NewText("ch", "hi", func(e *Envelope) {
		e.EventData["a2a"] = map[string]any{"execution_id": "e2", "message": "hi", "call_token": "e2.x"}
	}))
	if _, exp := d.CallToken(); !ok || d.CustomHeaders == nil || len(d.CustomHeaders) != 0 || !exp.IsZero() {
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
	valid     map[string]bool   // tokens InvokeAgent accepts
	fresh     map[string]string // RefreshCallToken: old -> new ("" = refuse, too late)
	invoked   []string
	refreshed []string
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
	f.refreshed = append(f.refreshed, in.GetCallToken())
	next := f.fresh[in.GetCallToken()]
	if next == "" {
		return nil, refusal(codes.Unauthenticated, ReasonTokenExpired)
	}
	return &agentnetv1.RefreshCallTokenResponse{CallToken: next, ExpiresAt: timestamppb.New(freshExpiry)}, nil
}

func dispatchWithToken(t *testing.T, token string) *Dispatch {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"text": "q", "a2a": map[string]any{
		"execution_id": "e1", "message": "q", "call_token": token, "call_token_expires_at": "2030-01-01T00:00:00Z",
	}})
	d, ok := A2ADispatchOf(EnvelopeFromProto(&agentnetv1.Envelope{ChannelId: "ch", EventType: EventText, EventDataJson: string(b)}))
	if !ok {
		t.Fatal("no dispatch")
	}
	return d
}

// Dispatch.Invoke sends the dispatch's token and, on TOKEN_EXPIRED, refreshes
// it once, keeps the fresh one and retries.
func TestDispatchInvokeRefreshesAnExpiredTokenOnce(t *testing.T) {
	ctx := context.Background()
	t.Run("refresh and retry", func(t *testing.T) {
		f := &fakeA2AHub{valid: map[string]bool{"t2": true}, fresh: map[string]string{"t1": "t2"}}
		c := &Client{hub: f}
		d := dispatchWithToken(t, "t1")
		res, err := d.Invoke(ctx, c, InvokeRequest{AgentID: "x", Message: "m", CallToken: "ignored"})
		if err != nil || res.Status != InvocationCompleted || res.Result != "ok m" {
			t.Fatalf("%+v %v", res, err)
		}
		if !slices.Equal(f.invoked, []string{"t1", "t2"}) || !slices.Equal(f.refreshed, []string{"t1"}) {
			t.Fatalf("invoked %v refreshed %v", f.invoked, f.refreshed)
		}
		if tok, exp := d.CallToken(); tok != "t2" || !exp.Equal(freshExpiry) {
			t.Fatalf("dispatch token %q %v", tok, exp)
		}
		// The next call uses the fresh token straight away.
		if _, err := d.Invoke(ctx, c, InvokeRequest{AgentID: "x", Message: "m"}); err != nil || len(f.refreshed) != 1 ||
			f.invoked[2] != "t2" {
			t.Fatalf("second call: %v, invoked %v refreshed %v", err, f.invoked, f.refreshed)
		}
	})
	t.Run("refresh refused", func(t *testing.T) {
		f := &fakeA2AHub{}
		d := dispatchWithToken(t, "t1")
		_, err := d.Invoke(ctx, &Client{hub: f}, InvokeRequest{AgentID: "x", Message: "m"})
		if !IsReason(err, ReasonTokenExpired) || !slices.Equal(f.invoked, []string{"t1"}) || !slices.Equal(f.refreshed, []string{"t1"}) {
			t.Fatalf("%v, invoked %v refreshed %v", err, f.invoked, f.refreshed)
		}
		if tok, _ := d.CallToken(); tok != "t1" {
			t.Fatalf("token replaced by %q", tok)
		}
	})
	t.Run("retried once only", func(t *testing.T) {
		f := &fakeA2AHub{fresh: map[string]string{"t1": "t2", "t2": "t3"}}
		d := dispatchWithToken(t, "t1")
		_, err := d.Invoke(ctx, &Client{hub: f}, InvokeRequest{AgentID: "x", Message: "m"})
		if !IsReason(err, ReasonTokenExpired) || !slices.Equal(f.invoked, []string{"t1", "t2"}) || !slices.Equal(f.refreshed, []string{"t1"}) {
			t.Fatalf("%v, invoked %v refreshed %v", err, f.invoked, f.refreshed)
		}
	})
	t.Run("other refusals are not retried", func(t *testing.T) {
		f := &fakeA2AHub{valid: map[string]bool{"t1": true}}
		d := dispatchWithToken(t, "t1")
		_, err := d.Invoke(ctx, &Client{hub: f}, InvokeRequest{AgentID: "forbidden", Message: "m"})
		if !IsReason(err, ReasonPermissionDenied) || len(f.invoked) != 1 || len(f.refreshed) != 0 {
			t.Fatalf("%v, invoked %v refreshed %v", err, f.invoked, f.refreshed)
		}
	})
	t.Run("no token", func(t *testing.T) {
		f := &fakeA2AHub{}
		d := &Dispatch{ExecutionID: "e1"}
		if _, err := d.Invoke(ctx, &Client{hub: f}, InvokeRequest{AgentID: "x", Message: "m"}); !IsReason(err, ReasonInvalidArgument) || len(f.invoked) != 0 {
			t.Fatalf("%v", err)
		}
		if err := d.RefreshCallToken(ctx, &Client{hub: f}); !IsReason(err, ReasonInvalidArgument) || len(f.refreshed) != 0 {
			t.Fatalf("%v", err)
		}
	})
}
