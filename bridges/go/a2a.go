package agentnet

import (
	"context"
	"encoding/json"
	"maps"
	"sync"
	"time"

	agentnetv1 "github.com/agent-network/agent-network/gen/go/agentnet/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// Invocation statuses (InvokeResult.Status, Execution.Status).
const (
	// InvocationUnspecified is the zero value.
	InvocationUnspecified = agentnetv1.InvocationStatus_INVOCATION_STATUS_UNSPECIFIED
	// InvocationCompleted: the target replied; Result holds its answer.
	InvocationCompleted = agentnetv1.InvocationStatus_INVOCATION_STATUS_COMPLETED
	// InvocationInputRequired: the target needs more input; Result holds its question.
	InvocationInputRequired = agentnetv1.InvocationStatus_INVOCATION_STATUS_INPUT_REQUIRED
	// InvocationFailed: the target failed, refused or did not answer in time; Error says why.
	InvocationFailed = agentnetv1.InvocationStatus_INVOCATION_STATUS_FAILED
	// InvocationRunning: the call is still running (only in execution listings).
	InvocationRunning = agentnetv1.InvocationStatus_INVOCATION_STATUS_RUNNING
	// InvocationCanceled: the caller cancelled the call (CancelExecution).
	InvocationCanceled = agentnetv1.InvocationStatus_INVOCATION_STATUS_CANCELED
)

// A2A reply statuses (A2AReply.status in a callee's reply).
const (
	a2aCompleted     = "completed"
	a2aInputRequired = "input-required"
	a2aFailed        = "failed"
)

// Dispatch is an A2A call as its callee sees it. InvokeAgent makes the hub
// open a consulting channel from the caller to the callee whose question is an
// EventText envelope with event_data {"text": <message>, "a2a": <dispatch>};
// A2ADispatchOf reads it. Answer with one EventText reply in ChannelID:
// NewA2AReply completes the call, NewA2AInputRequired asks the caller a
// question back, NewA2AFailed fails it. (A plain NewText reply completes it
// too, so an agent that answers consulting questions answers A2A calls.)
//
// Calls the callee makes while answering should go through Invoke, which
// links them to this execution with a call token. The hub never puts a token
// in the dispatch (the channel's log is readable by all its members): Invoke
// asks the hub for one (RefreshCallToken by execution id, granted only to the
// callee while the call runs) on the first nested call, keeps it, and gets a
// fresh one when it has expired. A Dispatch is safe for concurrent use.
type Dispatch struct {
	// ChannelID is the consulting channel carrying the call: reply there.
	ChannelID string
	// CallerID is the calling agent (the question's sender).
	CallerID string
	// ExecutionID is the execution the callee runs as.
	ExecutionID string
	// RootSessionID is the root session shared by the whole call tree.
	RootSessionID string
	// Message is the request text.
	Message string
	// Skill is the skill the caller asked for ("" = the callee decides).
	Skill string
	// CustomHeaders are the caller's headers (never nil; never an "a2a-" key).
	CustomHeaders map[string]string
	// Envelope is the question envelope (reply WithCausation(Envelope.EnvelopeID),
	// then Ack it).
	Envelope *Envelope

	mu        sync.Mutex
	token     string
	expiresAt time.Time
}

// A2ADispatchOf returns the A2A dispatch an envelope carries: ok is true for
// an EventText envelope whose event_data.a2a is a dispatch (with an
// execution id). A callee's reply, whose event_data.a2a holds only a status,
// is not a dispatch.
func A2ADispatchOf(env *Envelope) (d *Dispatch, ok bool) {
	if env == nil || env.EventType != EventText {
		return nil, false
	}
	raw, isObject := env.EventData["a2a"].(map[string]any)
	if !isObject {
		return nil, false
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, false
	}
	var w agentnetv1.A2ADispatch
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, &w); err != nil || w.GetExecutionId() == "" {
		return nil, false
	}
	d = &Dispatch{
		ChannelID:     env.ChannelID,
		CallerID:      env.SenderID,
		ExecutionID:   w.GetExecutionId(),
		RootSessionID: w.GetRootSessionId(),
		Message:       w.GetMessage(),
		Skill:         w.GetSkill(),
		CustomHeaders: maps.Clone(w.GetCustomHeaders()),
		Envelope:      env,
	}
	if d.CustomHeaders == nil {
		d.CustomHeaders = map[string]string{}
	}
	return d, true
}

// CallToken returns the call token the dispatch holds and when it expires:
// "" and the zero time until Invoke or RefreshCallToken obtained one from the
// hub (a dispatch never arrives with a token).
func (d *Dispatch) CallToken() (token string, expiresAt time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.token, d.expiresAt
}

// RefreshCallToken asks the hub for a fresh call token of the dispatch's
// execution (RefreshCallToken with its execution id) and keeps it. Only the
// callee gets one, and only while the call runs: otherwise the hub refuses with
// PERMISSION_DENIED or FAILED_PRECONDITION. Invoke calls it by itself before
// the first nested call and when a nested call is refused with TOKEN_EXPIRED.
func (d *Dispatch) RefreshCallToken(ctx context.Context, c *Client) error {
	old, _ := d.CallToken()
	return d.refresh(ctx, c, old)
}

func (d *Dispatch) refresh(ctx context.Context, c *Client, old string) error {
	if d.ExecutionID == "" {
		return invalidArgument("the dispatch has no execution id")
	}
	token, exp, err := c.CallTokenFor(ctx, d.ExecutionID)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	// A concurrent refresh may have stored a token already: keep the newest.
	if d.token == old || !exp.Before(d.expiresAt) {
		d.token, d.expiresAt = token, exp
	}
	return nil
}

// Invoke makes a nested A2A call while answering d: it sends req with a call
// token of d's execution (replacing req.CallToken), so the hub records the call
// as a child execution of d's. The first call obtains the token from the hub;
// when the hub refuses it as expired (TOKEN_EXPIRED), Invoke obtains a fresh one
// once, keeps it in d, and retries. If obtaining a token fails, its error is
// returned.
func (d *Dispatch) Invoke(ctx context.Context, c *Client, req InvokeRequest) (*InvokeResult, error) {
	if d == nil {
		return nil, invalidArgument("dispatch is nil")
	}
	used, _ := d.CallToken()
	if used == "" {
		if err := d.refresh(ctx, c, ""); err != nil {
			return nil, err
		}
		used, _ = d.CallToken()
	}
	req.CallToken = used
	res, err := c.InvokeAgent(ctx, req)
	if !IsReason(err, ReasonTokenExpired) {
		return res, err
	}
	if current, _ := d.CallToken(); current == used { // nobody refreshed it meanwhile
		if err := d.refresh(ctx, c, used); err != nil {
			return nil, err
		}
	}
	req.CallToken, _ = d.CallToken()
	return c.InvokeAgent(ctx, req)
}

// NewA2AReply builds a callee's reply that completes an A2A call with text
// as the result: {"text": text, "a2a": {"status": "completed"}}.
func NewA2AReply(channelID, text string, opts ...PostOption) *Envelope {
	e := NewText(channelID, text, opts...)
	e.EventData["a2a"] = map[string]any{"status": a2aCompleted}
	return e
}

// NewA2AInputRequired builds a callee's reply that ends an A2A call with
// status InvocationInputRequired and question as the result: {"text":
// question, "a2a": {"status": "input-required"}}.
func NewA2AInputRequired(channelID, question string, opts ...PostOption) *Envelope {
	e := NewText(channelID, question, opts...)
	e.EventData["a2a"] = map[string]any{"status": a2aInputRequired}
	return e
}

// NewA2AFailed builds a callee's reply that fails an A2A call with errText as
// the error: {"text": errText, "a2a": {"status": "failed", "error": errText}}.
func NewA2AFailed(channelID, errText string, opts ...PostOption) *Envelope {
	e := NewText(channelID, errText, opts...)
	e.EventData["a2a"] = map[string]any{"status": a2aFailed, "error": errText}
	return e
}
