package agentnet_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	agentnet "github.com/agent-network/agent-network/bridges/go"
	"github.com/agent-network/agent-network/bridges/go/internal/testhub"
	"google.golang.org/grpc/codes"
)

// registerA2A registers an agent of project with A2A settings (nil = disabled).
func registerA2A(t *testing.T, ctx context.Context, addr, name, project string, s *agentnet.A2ASettings) *agentnet.Client {
	t.Helper()
	c, err := agentnet.Register(ctx, addr, &agentnet.Passport{Name: name, Kind: agentnet.KindRemoteAgent, Project: project},
		nil, agentnet.WithA2A(s))
	if err != nil {
		t.Fatalf("register %s: %v", name, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// a2aParticipant registers an A2A-enabled agent and connects it (invites accepted).
func a2aParticipant(t *testing.T, ctx context.Context, addr, name string, s *agentnet.A2ASettings) *participant {
	t.Helper()
	if s == nil {
		s = &agentnet.A2ASettings{}
	}
	s.Enabled = true
	c := registerA2A(t, ctx, addr, name, "p1", s)
	sess, err := c.Connect(ctx, agentnet.ConnectOptions{})
	if err != nil {
		t.Fatalf("connect %s: %v", name, err)
	}
	t.Cleanup(func() { _ = sess.Close() })
	return &participant{c: c, s: sess}
}

// answered is one dispatch an answering agent handled.
type answered struct {
	d   *agentnet.Dispatch
	err error // posting the reply failed
}

// answerA2A runs p's agent loop on a goroutine: every A2A dispatch it receives
// is answered with the envelope reply builds (in the dispatch's channel, as a
// reply to the question) and reported on the returned channel. The loop ends
// with the Session or ctx.
func answerA2A(ctx context.Context, p *participant, reply func(ctx context.Context, d *agentnet.Dispatch) *agentnet.Envelope) <-chan answered {
	out := make(chan answered, 16)
	go func() {
		for env := range p.s.Envelopes() {
			d, ok := agentnet.A2ADispatchOf(env)
			if ok {
				r := reply(ctx, d)
				r.CausationID = env.EnvelopeID
				_, err := p.c.Post(ctx, r)
				select {
				case out <- answered{d, err}:
				case <-ctx.Done():
					return
				}
			}
			_ = env.Ack()
		}
	}()
	return out
}

// next returns the next handled dispatch.
func nextAnswered(t *testing.T, ctx context.Context, ch <-chan answered) *agentnet.Dispatch {
	t.Helper()
	select {
	case a := <-ch:
		if a.err != nil {
			t.Fatalf("posting the A2A reply: %v", a.err)
		}
		return a.d
	case <-ctx.Done():
		t.Fatal("timed out waiting for a dispatch")
	}
	return nil
}

func discoveredNames(t *testing.T, ctx context.Context, c *agentnet.Client, req agentnet.DiscoverRequest) []string {
	t.Helper()
	agents, err := c.DiscoverAgents(ctx, req)
	if err != nil {
		t.Fatalf("discover %+v: %v", req, err)
	}
	names := []string{}
	for _, a := range agents {
		names = append(names, a.GetName())
	}
	return names
}

// Discovery filters (OR within one, AND across) and visibility (enabled, project,
// allowed_callers globs), and SetA2ASettings.
func TestA2ADiscovery(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 40*time.Second)
	h := testhub.Start(t)
	on := func(s *agentnet.A2ASettings) *agentnet.A2ASettings { s.Enabled = true; return s }
	caller := registerA2A(t, ctx, h.Addr, "billing-bot", "p1", on(&agentnet.A2ASettings{}))
	payments := registerA2A(t, ctx, h.Addr, "payments", "p1", on(&agentnet.A2ASettings{
		Description: "Charges and refunds", Skills: []string{"payments", "refunds"},
		Capabilities: []string{"stream"}, InputModes: []string{"text"},
	}))
	registerA2A(t, ctx, h.Addr, "policy", "p1", on(&agentnet.A2ASettings{
		Skills: []string{"Policy-Lookup"}, Capabilities: []string{"batch"}, InputModes: []string{"text"},
	}))
	registerA2A(t, ctx, h.Addr, "vision", "p1", on(&agentnet.A2ASettings{
		Skills: []string{"ocr"}, Capabilities: []string{"stream"}, InputModes: []string{"image"},
	}))
	off := registerA2A(t, ctx, h.Addr, "off", "p1", &agentnet.A2ASettings{Skills: []string{"payments"}})
	picky := registerA2A(t, ctx, h.Addr, "picky", "p1", on(&agentnet.A2ASettings{
		Skills: []string{"payments"}, AllowedCallers: []string{"support-*"},
	}))
	registerA2A(t, ctx, h.Addr, "friendly", "p1", on(&agentnet.A2ASettings{
		Skills: []string{"payments"}, AllowedCallers: []string{"billing-*", "ops"},
	}))
	elsewhere := registerA2A(t, ctx, h.Addr, "elsewhere", "p2", on(&agentnet.A2ASettings{Skills: []string{"payments"}}))
	support := registerA2A(t, ctx, h.Addr, "support-1", "p1", on(&agentnet.A2ASettings{}))

	for _, tc := range []struct {
		who  *agentnet.Client
		req  agentnet.DiscoverRequest
		want []string
	}{
		// Several values in one filter: any of them (case-insensitive).
		{caller, agentnet.DiscoverRequest{Skills: []string{"refunds", "policy-lookup"}}, []string{"payments", "policy"}},
		{caller, agentnet.DiscoverRequest{Capabilities: []string{"stream"}}, []string{"payments", "vision"}},
		// Several filters: all of them.
		{caller, agentnet.DiscoverRequest{
			Skills: []string{"refunds", "ocr"}, Capabilities: []string{"stream"}, InputModes: []string{"image"},
		}, []string{"vision"}},
		{caller, agentnet.DiscoverRequest{Skills: []string{"payments"}, Capabilities: []string{"batch"}}, []string{}},
		// Visibility: "off" is disabled, "elsewhere" in another project, "picky" admits support-* only.
		{caller, agentnet.DiscoverRequest{Skills: []string{"payments"}}, []string{"friendly", "payments"}},
		{support, agentnet.DiscoverRequest{Skills: []string{"payments"}}, []string{"payments", "picky"}},
		{caller, agentnet.DiscoverRequest{}, []string{"billing-bot", "friendly", "payments", "policy", "support-1", "vision"}},
		{caller, agentnet.DiscoverRequest{ProjectID: "p1", Limit: 2}, []string{"billing-bot", "friendly"}},
		{elsewhere, agentnet.DiscoverRequest{}, []string{"elsewhere"}},
	} {
		if got := discoveredNames(t, ctx, tc.who, tc.req); !slices.Equal(got, tc.want) {
			t.Errorf("%s discovers %+v: %v, want %v", tc.who.Name(), tc.req, got, tc.want)
		}
	}
	found, err := caller.DiscoverAgents(ctx, agentnet.DiscoverRequest{Skills: []string{"refunds"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0].GetAgentId() != payments.AgentID() || found[0].GetDescription() != "Charges and refunds" ||
		!slices.Equal(found[0].GetSkills(), []string{"payments", "refunds"}) ||
		!slices.Equal(found[0].GetCapabilities(), []string{"stream"}) || !slices.Equal(found[0].GetInputModes(), []string{"text"}) {
		t.Fatalf("discovered %v", found)
	}

	// Invisible agents refuse calls; other projects cannot be searched.
	for _, target := range []*agentnet.Client{off, picky, elsewhere} {
		_, err := caller.InvokeAgent(ctx, agentnet.InvokeRequest{AgentID: target.AgentID(), Message: "hello"})
		e, ok := agentnet.AsError(err)
		if !ok || e.Reason != agentnet.ReasonPermissionDenied || e.Metadata["agent_id"] != target.AgentID() {
			t.Errorf("invoke %s: %v, want PERMISSION_DENIED naming it", target.Name(), err)
		}
	}
	_, err = caller.DiscoverAgents(ctx, agentnet.DiscoverRequest{ProjectID: "p2"})
	if !agentnet.IsReason(err, agentnet.ReasonPermissionDenied) {
		t.Fatalf("discover another project: %v", err)
	}

	// SetA2ASettings replaces the settings: disabled, payments disappears.
	rec, err := payments.SetA2ASettings(ctx, &agentnet.A2ASettings{Skills: []string{"payments"}})
	if err != nil {
		t.Fatal(err)
	}
	if rec.GetA2A().GetEnabled() {
		t.Fatalf("settings after disabling: %v", rec.GetA2A())
	}
	if got := discoveredNames(t, ctx, caller, agentnet.DiscoverRequest{Skills: []string{"payments"}}); !slices.Equal(got, []string{"friendly"}) {
		t.Fatalf("after disabling payments: %v", got)
	}
	if _, err := off.SetA2ASettings(ctx, &agentnet.A2ASettings{Enabled: true, Skills: []string{"payments"}}); err != nil {
		t.Fatal(err)
	}
	if got := discoveredNames(t, ctx, caller, agentnet.DiscoverRequest{Skills: []string{"payments"}}); !slices.Equal(got, []string{"friendly", "off"}) {
		t.Fatalf("after enabling off: %v", got)
	}
}

// A Go agent answers A2A dispatches invoked by another Go client: a plain
// answer completes the call, a question back is input-required, a failure fails.
func TestA2AInvokeGoAgent(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 40*time.Second)
	h := testhub.Start(t)
	caller := registerA2A(t, ctx, h.Addr, "caller", "p1", &agentnet.A2ASettings{Enabled: true})
	billing := a2aParticipant(t, ctx, h.Addr, "billing", &agentnet.A2ASettings{Skills: []string{"payments"}})
	handled := answerA2A(ctx, billing, func(_ context.Context, d *agentnet.Dispatch) *agentnet.Envelope {
		switch d.Message {
		case "Charge the customer":
			return agentnet.NewA2AReply(d.ChannelID, "charged ("+d.CustomHeaders["x-tenant"]+")")
		case "Refund the customer":
			return agentnet.NewA2AInputRequired(d.ChannelID, "Who approves this refund?")
		default:
			return agentnet.NewA2AFailed(d.ChannelID, "ledger unavailable")
		}
	})

	res, err := caller.InvokeAgent(ctx, agentnet.InvokeRequest{
		AgentID: billing.id(), Message: "Charge the customer", Skill: "payments",
		CustomHeaders: map[string]string{"x-tenant": "acme"}, RootSessionID: "user-session-1",
	})
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	if res.Status != agentnet.InvocationCompleted || res.Result != "charged (acme)" || res.Error != "" ||
		res.RootSessionID != "user-session-1" || res.ExecutionID == "" {
		t.Fatalf("invoke result %+v", res)
	}
	d := nextAnswered(t, ctx, handled)
	token, expires := d.CallToken()
	if d.ExecutionID != res.ExecutionID || d.RootSessionID != "user-session-1" || d.CallerID != caller.AgentID() ||
		d.Skill != "payments" || d.Message != "Charge the customer" || d.CustomHeaders["x-tenant"] != "acme" ||
		len(d.CustomHeaders) != 1 || d.Envelope == nil || d.ChannelID != d.Envelope.ChannelID {
		t.Fatalf("dispatch %+v", d)
	}
	if token != "" || !expires.IsZero() { // the hub never writes a token into the channel
		t.Fatalf("call token %q expiring %v", token, expires)
	}

	res, err = caller.InvokeAgent(ctx, agentnet.InvokeRequest{AgentID: "billing", Message: "Refund the customer"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agentnet.InvocationInputRequired || res.Result != "Who approves this refund?" {
		t.Fatalf("input-required result %+v", res)
	}
	if d := nextAnswered(t, ctx, handled); d.Skill != "" || len(d.CustomHeaders) != 0 {
		t.Fatalf("second dispatch %+v", d)
	}
	res, err = caller.InvokeAgent(ctx, agentnet.InvokeRequest{AgentID: billing.id(), Message: "Close the books"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agentnet.InvocationFailed || res.Error != "ledger unavailable" || res.Result != "" {
		t.Fatalf("failed result %+v", res)
	}
	nextAnswered(t, ctx, handled)

	execs, err := caller.ListExecutions(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var statuses []agentnet.InvocationStatus
	for _, e := range execs {
		statuses = append(statuses, e.GetStatus())
		if e.GetCallerId() != caller.AgentID() || e.GetTargetId() != billing.id() || e.GetParentExecutionId() != "" {
			t.Errorf("execution %v", e)
		}
	}
	want := []agentnet.InvocationStatus{agentnet.InvocationCompleted, agentnet.InvocationInputRequired, agentnet.InvocationFailed}
	if !slices.Equal(statuses, want) {
		t.Fatalf("execution statuses %v, want %v", statuses, want)
	}
	if execs[0].GetRootSessionId() != "user-session-1" || execs[2].GetError() != "ledger unavailable" {
		t.Fatalf("executions %v", execs)
	}
	// The call ran in a consulting channel the reply completed.
	info, err := caller.DescribeChannel(ctx, execs[0].GetChannelId())
	if err != nil {
		t.Fatal(err)
	}
	if info.Channel.GetType() != "consulting" || info.Channel.GetCloseReason() != "consulting_complete" {
		t.Fatalf("channel of the call: %v", info.Channel)
	}
}

// The consulting_agent example process answers A2A calls (they are consulting questions).
func TestA2AConsultingAgentProcess(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 40*time.Second)
	h := testhub.Start(t)
	agent := startAgent(t, "--hub", h.Addr, "--name", "go-consultant")
	caller := register(t, ctx, h.Addr, "caller")
	found := discoveredNames(t, ctx, caller, agentnet.DiscoverRequest{Skills: []string{"reversal"}})
	if !slices.Equal(found, []string{"go-consultant"}) {
		t.Fatalf("discovered %v", found)
	}
	res, err := caller.InvokeAgent(ctx, agentnet.InvokeRequest{AgentID: "go-consultant", Message: "hello a2a", Skill: "reversal"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agentnet.InvocationCompleted || res.Result != answer("hello a2a") {
		t.Fatalf("result %+v", res)
	}
	agent.waitFor(20*time.Second, "the dispatch", func(evs []map[string]any) bool {
		for _, e := range filter(evs, "done") {
			if e["a2a_execution"] == res.ExecutionID {
				return true
			}
		}
		return false
	})
}

// Custom headers in the reserved "a2a-" namespace (any case) are refused naming
// the key, and nothing is started.
func TestA2AReservedHeaderRefused(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 30*time.Second)
	h := testhub.Start(t)
	caller := registerA2A(t, ctx, h.Addr, "caller", "p1", &agentnet.A2ASettings{Enabled: true})
	target := registerA2A(t, ctx, h.Addr, "billing", "p1", &agentnet.A2ASettings{Enabled: true})
	for _, key := range []string{"a2a-token", "A2A-Caller-Workspace"} {
		_, err := caller.InvokeAgent(ctx, agentnet.InvokeRequest{
			AgentID: target.AgentID(), Message: "hello", CustomHeaders: map[string]string{"x-ok": "1", key: "v"},
		})
		e, ok := agentnet.AsError(err)
		if !ok || e.Code != codes.InvalidArgument || e.Reason != agentnet.ReasonInvalidArgument || e.Metadata["key"] != key ||
			!strings.Contains(e.Message, key) {
			t.Fatalf("header %q: %v (%+v), want INVALID_ARGUMENT with metadata key", key, err, e)
		}
	}
	execs, err := caller.ListExecutions(ctx, "", 0)
	if err != nil || len(execs) != 0 {
		t.Fatalf("executions after refused calls: %v %v", execs, err)
	}
}

// A callee's nested call is a child execution in the same call tree: the
// callee obtains its call token from the hub (the caller cannot), a refreshed
// token still links it, and an ended call yields no token and its tokens are
// worthless.
func TestA2ANestedCall(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 40*time.Second)
	h := testhub.Start(t)
	a := registerA2A(t, ctx, h.Addr, "a", "p1", &agentnet.A2ASettings{Enabled: true})
	b := a2aParticipant(t, ctx, h.Addr, "b", nil)
	c := a2aParticipant(t, ctx, h.Addr, "c", nil)
	answerA2A(ctx, c, func(_ context.Context, d *agentnet.Dispatch) *agentnet.Envelope {
		return agentnet.NewA2AReply(d.ChannelID, "leaf")
	})
	type nested struct {
		first, refreshed string
		refreshErr       error
		callerErr        error
		res              *agentnet.InvokeResult
		err              error
	}
	nestedCh := make(chan nested, 1)
	handled := answerA2A(ctx, b, func(ctx context.Context, d *agentnet.Dispatch) *agentnet.Envelope {
		var n nested
		_, _, n.callerErr = a.CallTokenFor(ctx, d.ExecutionID)
		n.res, n.err = d.Invoke(ctx, b.c, agentnet.InvokeRequest{AgentID: c.id(), Message: "what does C say?"})
		n.first, _ = d.CallToken()
		n.refreshErr = d.RefreshCallToken(ctx, b.c)
		n.refreshed, _ = d.CallToken()
		nestedCh <- n
		if n.err != nil {
			return agentnet.NewA2AFailed(d.ChannelID, n.err.Error())
		}
		return agentnet.NewA2AReply(d.ChannelID, "C said: "+n.res.Result)
	})

	top, err := a.InvokeAgent(ctx, agentnet.InvokeRequest{AgentID: b.id(), Message: "ask C", RootSessionID: "user-session-1"})
	if err != nil {
		t.Fatal(err)
	}
	nextAnswered(t, ctx, handled)
	n := <-nestedCh // sent before b replied
	if n.err != nil || !strings.HasPrefix(n.first, top.ExecutionID+".") || n.refreshErr != nil ||
		n.refreshed == "" || n.refreshed == n.first {
		t.Fatalf("in b: nested call %v with %q, refresh %v (-> %q)", n.err, n.first, n.refreshErr, n.refreshed)
	}
	if !agentnet.IsReason(n.callerErr, agentnet.ReasonPermissionDenied) {
		t.Fatalf("the caller asked for the callee's token: %v", n.callerErr)
	}
	if top.Status != agentnet.InvocationCompleted || top.Result != "C said: leaf" || top.RootSessionID != "user-session-1" {
		t.Fatalf("top result %+v", top)
	}
	if n.res.Status != agentnet.InvocationCompleted || n.res.RootSessionID != "user-session-1" {
		t.Fatalf("nested result %+v", n.res)
	}

	for _, who := range []*agentnet.Client{a, c.c} {
		tree, err := who.ListExecutions(ctx, "user-session-1", 0)
		if err != nil {
			t.Fatalf("%s lists the tree: %v", who.Name(), err)
		}
		if len(tree) != 2 {
			t.Fatalf("tree %v", tree)
		}
		if tree[0].GetExecutionId() != top.ExecutionID || tree[0].GetParentExecutionId() != "" ||
			tree[0].GetCallerId() != a.AgentID() || tree[0].GetTargetId() != b.id() {
			t.Errorf("root execution %v", tree[0])
		}
		if tree[1].GetExecutionId() != n.res.ExecutionID || tree[1].GetParentExecutionId() != top.ExecutionID ||
			tree[1].GetCallerId() != b.id() || tree[1].GetTargetId() != c.id() {
			t.Errorf("child execution %v", tree[1])
		}
		for _, e := range tree {
			if e.GetRootSessionId() != "user-session-1" || e.GetStatus() != agentnet.InvocationCompleted {
				t.Errorf("execution %v", e)
			}
		}
	}
	// Once the call has ended it yields no token, and its tokens are worthless.
	if _, _, err = b.c.CallTokenFor(ctx, top.ExecutionID); !agentnet.IsReason(err, agentnet.ReasonFailedPrecondition) {
		t.Fatalf("a token of an ended call: %v", err)
	}
	_, _, err = b.c.RefreshCallToken(ctx, n.refreshed)
	if !agentnet.IsReason(err, agentnet.ReasonUnauthenticated) {
		t.Fatalf("refreshing an ended call's token: %v", err)
	}
	_, err = b.c.InvokeAgent(ctx, agentnet.InvokeRequest{AgentID: c.id(), Message: "again", CallToken: n.first})
	if !agentnet.IsReason(err, agentnet.ReasonUnauthenticated) {
		t.Fatalf("invoking with an ended call's token: %v", err)
	}
}
