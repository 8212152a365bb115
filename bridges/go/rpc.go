package agentnet

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"maps"
	"slices"
	"time"

	agentnetv1 "github.com/agent-network/agent-network/gen/go/agentnet/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// ---- posting ------------------------------------------------------------------

// PostRetryServiceConfig is the gRPC service config a Client's connection
// gets by default: PostEnvelope waits for a reachable hub (waitForReady) and
// is retried by gRPC when it fails with UNAVAILABLE before an answer (its
// hub died, or was shutting down), up to 5 attempts, against whichever
// replica the connection reaches. Retrying is safe because every post
// carries an idempotency key: a post the dead hub had stored is answered
// with the stored envelope (Duplicate true). Other errors come back at once.
const PostRetryServiceConfig = `{"methodConfig": [{
	"name": [{"service": "agentnet.v1.HubService", "method": "PostEnvelope"}],
	"waitForReady": true,
	"retryPolicy": {
		"maxAttempts": 5,
		"initialBackoff": "0.1s",
		"maxBackoff": "2s",
		"backoffMultiplier": 2,
		"retryableStatusCodes": ["UNAVAILABLE"]
	}
}]}`

// DefaultPostTimeout bounds a PostEnvelope call (retries across a hub
// failover included) whose context has no deadline.
const DefaultPostTimeout = 30 * time.Second

// Post admits an envelope and returns it as written to the WAL (with
// EnvelopeID, Seq and CreatedAt), or the hub's refusal as an *Error.
//
// While a Session is connected the post travels over its Connect stream;
// otherwise (or if the stream drops before the result arrives) it is sent
// with the unary PostEnvelope RPC, which waits for a reachable hub and is
// retried when the hub goes away before answering (PostRetryServiceConfig),
// so a post survives a hub failover: the caller sees one success. An empty
// IdempotencyKey is filled with "go-" and 26 random base32 characters so that
// such a retry can never admit the envelope twice; the result's Duplicate is
// true when the hub had admitted it already. The wait for a hub is bounded by
// ctx, or by DefaultPostTimeout when ctx has no deadline. A refusal
// (NOT_YOUR_TURN, RATE_LIMITED, ...) comes back at once. env itself is not
// modified.
func (c *Client) Post(ctx context.Context, env *Envelope) (*Envelope, error) {
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	w, err := env.Proto()
	if err != nil {
		return nil, err
	}
	if w.GetChannelId() == "" {
		return nil, invalidArgument("envelope has no channel id; set ChannelID")
	}
	if w.GetEventType() == "" {
		return nil, invalidArgument("envelope has no event type; set EventType, e.g. agentnet.EventText")
	}
	if w.IdempotencyKey == nil {
		w.IdempotencyKey = proto.String("go-" + newID())
	}
	if s := c.currentSession(); s != nil {
		res, err := s.postStream(ctx, w)
		if !errors.Is(err, errStreamDown) {
			return res, err
		}
		return s.postUnary(ctx, w) // where the stream is (a replica a Redirect named)
	}
	return c.postUnary(ctx, w)
}

// postUnary posts with PostEnvelope, which gRPC retries while the hub is
// away (PostRetryServiceConfig), for at most DefaultPostTimeout unless ctx
// has a deadline.
func (c *Client) postUnary(ctx context.Context, w *agentnetv1.Envelope) (*Envelope, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultPostTimeout)
		defer cancel()
	}
	return postOnce(ctx, c, c.hub, w)
}

// postOnce is one PostEnvelope call on hub as c's agent.
func postOnce(
	ctx context.Context, c *Client, hub agentnetv1.HubServiceClient, w *agentnetv1.Envelope, opts ...grpc.CallOption,
) (*Envelope, error) {
	resp, err := hub.PostEnvelope(c.AuthContext(ctx), &agentnetv1.PostEnvelopeRequest{Envelope: w}, opts...)
	if err != nil {
		return nil, FromStatus(err)
	}
	out := EnvelopeFromProto(resp.GetEnvelope())
	out.Duplicate = resp.GetDuplicate()
	return out, nil
}

// PostText posts an EventText envelope with {"text": text}.
func (c *Client) PostText(ctx context.Context, channelID, text string, opts ...PostOption) (*Envelope, error) {
	return c.Post(ctx, NewText(channelID, text, opts...))
}

// PostPacket posts a workflow EventPacket envelope.
func (c *Client) PostPacket(ctx context.Context, channelID string, p Packet, opts ...PostOption) (*Envelope, error) {
	return c.Post(ctx, NewPacket(channelID, p, opts...))
}

// ---- channels -----------------------------------------------------------------

// OpenChannelRequest describes a channel to open.
type OpenChannelRequest struct {
	// Type is "consulting", "conversation", "discussion" or "workflow".
	Type string
	// Targets are the invitees by agent id or name.
	Targets []string
	// Knobs are the adapter options (nil = none).
	Knobs map[string]any
	// Intent is the free-text purpose shown to invitees.
	Intent string
	// TTL is the channel lifetime (0 = the hub's default).
	TTL time.Duration
	// InviteAckTimeout bounds the wait for invite acks (0 = the hub's 30 s).
	InviteAckTimeout time.Duration
	// Message seeds the channel with an EventText from the caller once it is
	// OPENED ("" = no seed).
	Message string
	// Seed seeds the channel with an arbitrary envelope instead of Message
	// (its ChannelID is ignored).
	Seed *Envelope
	// WaitUntilOpened makes OpenChannel return only once the channel is
	// OPENED or ended.
	WaitUntilOpened bool
	// WaitTimeout bounds WaitUntilOpened (0 = the context's remaining time,
	// else the hub's default of invite timeout + 5 s).
	WaitTimeout time.Duration
}

// OpenChannelResult is a newly opened channel.
type OpenChannelResult struct {
	// Channel is the metadata (PENDING, or OPENED/ended when waited for).
	Channel *ChannelMetadata
	// SeedEnvelopeID is the seed's envelope id once admitted ("" otherwise).
	SeedEnvelopeID string
}

// OpenChannel creates a channel from the caller to req.Targets.
func (c *Client) OpenChannel(ctx context.Context, req OpenChannelRequest) (*OpenChannelResult, error) {
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	in := &agentnetv1.OpenChannelRequest{
		Type:            req.Type,
		Targets:         slices.Clone(req.Targets),
		Intent:          req.Intent,
		WaitUntilOpened: req.WaitUntilOpened,
	}
	if req.Knobs != nil {
		b, err := json.Marshal(req.Knobs)
		if err != nil {
			return nil, invalidArgument("knobs cannot be encoded as JSON: %v", err)
		}
		in.KnobsJson = string(b)
	}
	if req.TTL > 0 {
		in.TtlSeconds = proto.Float64(req.TTL.Seconds())
	}
	if req.InviteAckTimeout > 0 {
		in.InviteAckTimeoutSeconds = proto.Float64(req.InviteAckTimeout.Seconds())
	}
	switch {
	case req.Seed != nil:
		w, err := req.Seed.Proto()
		if err != nil {
			return nil, err
		}
		in.Seed = &agentnetv1.OpenChannelRequest_SeedEnvelope{SeedEnvelope: w}
	case req.Message != "":
		in.Seed = &agentnetv1.OpenChannelRequest_Message{Message: req.Message}
	}
	if req.WaitUntilOpened {
		secs, err := waitSeconds(ctx, req.WaitTimeout)
		if err != nil {
			return nil, err
		}
		in.WaitTimeoutSeconds = secs
	}
	resp, err := c.RPC().OpenChannel(ctx, in)
	if err != nil {
		return nil, err
	}
	return &OpenChannelResult{Channel: resp.GetChannel(), SeedEnvelopeID: resp.GetSeedEnvelopeId()}, nil
}

// CloseChannel closes a channel the caller participates in ("" reason =
// "closed_by_agent"). Closing an ended channel returns it unchanged.
func (c *Client) CloseChannel(ctx context.Context, channelID, reason string) (*ChannelMetadata, error) {
	resp, err := c.RPC().CloseChannel(ctx, &agentnetv1.CloseChannelRequest{ChannelId: channelID, Reason: reason})
	if err != nil {
		return nil, err
	}
	return resp.GetChannel(), nil
}

// ChannelInfo is a channel's metadata and adapter state.
type ChannelInfo struct {
	// Channel is the metadata.
	Channel *ChannelMetadata
	// AdapterState is the adapter's folded state (empty once the channel ended).
	AdapterState map[string]any
	// ExpectedNext lists the agent ids expected to speak next (empty = anyone / no one).
	ExpectedNext []string
}

// DescribeChannel returns a channel's metadata and adapter state.
func (c *Client) DescribeChannel(ctx context.Context, channelID string) (*ChannelInfo, error) {
	resp, err := c.RPC().DescribeChannel(ctx, &agentnetv1.DescribeChannelRequest{ChannelId: channelID})
	if err != nil {
		return nil, err
	}
	state, _ := DecodeEventData(resp.GetAdapterStateJson())
	return &ChannelInfo{Channel: resp.GetChannel(), AdapterState: state, ExpectedNext: resp.GetExpectedNext()}, nil
}

// ListChannelsRequest filters ListChannels.
type ListChannelsRequest struct {
	// IncludeEnded includes CLOSED and EXPIRED channels.
	IncludeEnded bool
	// Type keeps only this adapter type ("" = any).
	Type string
	// Limit caps the result (0 = 100).
	Limit int
}

// ListChannels lists the caller's channels, newest first.
func (c *Client) ListChannels(ctx context.Context, req ListChannelsRequest) ([]*ChannelMetadata, error) {
	resp, err := c.RPC().ListChannels(ctx, &agentnetv1.ListChannelsRequest{
		IncludeEnded: req.IncludeEnded, Type: req.Type, Limit: clampInt32(req.Limit),
	})
	if err != nil {
		return nil, err
	}
	return resp.GetChannels(), nil
}

// ReadWalRequest selects a range of a channel's WAL.
type ReadWalRequest struct {
	// ChannelID is the channel (the caller must be a participant).
	ChannelID string
	// FromSeq is the first seq (inclusive; 0 = from the start).
	FromSeq uint64
	// UntilSeq is the last seq (inclusive; 0 = up to the latest).
	UntilSeq uint64
	// Limit caps the number of envelopes (0 = no limit).
	Limit int
	// Follow keeps streaming newly admitted envelopes until the channel ends
	// or ctx is cancelled.
	Follow bool
}

// ReadWal streams the caller-visible part of a channel's WAL in seq order.
// Iteration stops at the end of the range (or, with Follow, when the channel
// ends); an error is yielded once, as the last element. Breaking out of the
// loop cancels the stream.
func (c *Client) ReadWal(ctx context.Context, req ReadWalRequest) iter.Seq2[*Envelope, error] {
	return func(yield func(*Envelope, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stream, err := c.hub.ReadWal(c.AuthContext(ctx), &agentnetv1.ReadWalRequest{
			ChannelId: req.ChannelID, FromSeq: req.FromSeq, UntilSeq: req.UntilSeq,
			Limit: clampInt32(req.Limit), Follow: req.Follow,
		})
		if err != nil {
			yield(nil, FromStatus(err))
			return
		}
		for {
			msg, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				yield(nil, FromStatus(err))
				return
			}
			if !yield(EnvelopeFromProto(msg.GetEnvelope()), nil) {
				return
			}
		}
	}
}

// ReadWalAll collects a (non-following) ReadWal range into a slice.
func (c *Client) ReadWalAll(ctx context.Context, req ReadWalRequest) ([]*Envelope, error) {
	req.Follow = false
	var out []*Envelope
	for env, err := range c.ReadWal(ctx, req) {
		if err != nil {
			return out, err
		}
		out = append(out, env)
	}
	return out, nil
}

// CanSendResult answers CanSend.
type CanSendResult struct {
	// Allowed is true when a post of that type would be admitted now.
	Allowed bool
	// Refusal says why not (nil when allowed).
	Refusal *Error
	// ExpectedNext lists the agent ids expected to speak next.
	ExpectedNext []string
}

// CanSend says whether the caller may post eventType ("" = EventText) to the
// channel now.
func (c *Client) CanSend(ctx context.Context, channelID, eventType string) (*CanSendResult, error) {
	resp, err := c.RPC().CanSend(ctx, &agentnetv1.CanSendRequest{ChannelId: channelID, EventType: eventType})
	if err != nil {
		return nil, err
	}
	out := &CanSendResult{Allowed: resp.GetAllowed(), ExpectedNext: resp.GetExpectedNext()}
	if !out.Allowed && resp.GetRefusal() != nil {
		out.Refusal = FromDetail(resp.GetRefusal())
	}
	return out, nil
}

// FindReply returns the first envelope sender (an agent name or id; "" = the
// caller) posted to the channel whose CausationID is causationID: whether that
// envelope was answered already. A handler calls it before answering an
// envelope delivered again (a crash between its reply and its ack), so it posts
// no second reply. One indexed lookup on the hub. It returns nil, nil when
// there is no such envelope (or the caller may not read it).
func (c *Client) FindReply(ctx context.Context, channelID, causationID, sender string) (*Envelope, error) {
	resp, err := c.RPC().FindReply(ctx, &agentnetv1.FindReplyRequest{
		ChannelId: channelID, CausationId: causationID, Sender: sender,
	})
	if err != nil {
		return nil, err
	}
	if resp.GetEnvelope() == nil {
		return nil, nil
	}
	return EnvelopeFromProto(resp.GetEnvelope()), nil
}

// ReportTurnFailure tells the hub that the caller's turn on envelopeID failed
// (its model call, a tool or its handler failed): the channel's members get an
// "ag2.channel.turn_failed" event and the channel's on_turn_failed policy
// applies (a consulting channel closes with "turn_failed"; docs/hub.md "Failed
// turns"). Send the error's class and message only, never the prompt (the hub
// redacts what looks like a credential and keeps 300 characters); attempts is
// how many times the failing call was tried (0 = not said). It returns whether
// the event was posted and the action the policy took ("close" / "notify").
func (c *Client) ReportTurnFailure(
	ctx context.Context, channelID, envelopeID, errorClass, message string, attempts int32,
) (posted bool, action string, err error) {
	resp, err := c.RPC().ReportTurnFailure(ctx, &agentnetv1.ReportTurnFailureRequest{
		ChannelId: channelID, EnvelopeId: envelopeID, ErrorClass: errorClass, Message: message, Attempts: attempts,
	})
	if err != nil {
		return false, "", err
	}
	return resp.GetPosted(), resp.GetAction(), nil
}

// ListPendingTurns lists, one page at a time, the turns the caller's channels
// await from it now: the adapter expects it to speak next and it has not
// answered the latest message (docs/hub.md "Pending turns"). limit 0 = 100, at
// most 1000; pageToken "" = the first page. It returns the turns and the next
// page's token ("" = that was the last page).
func (c *Client) ListPendingTurns(ctx context.Context, limit int32, pageToken string) ([]PendingTurn, string, error) {
	resp, err := c.RPC().ListPendingTurns(ctx, &agentnetv1.ListPendingTurnsRequest{
		Limit: limit, PageToken: pageToken,
	})
	if err != nil {
		return nil, "", err
	}
	turns := make([]PendingTurn, 0, len(resp.GetTurns()))
	for _, t := range resp.GetTurns() {
		turns = append(turns, PendingTurn{ChannelID: t.GetChannelId(), Seq: t.GetSeq(), EnvelopeID: t.GetEnvelopeId()})
	}
	return turns, resp.GetNextPageToken(), nil
}

// ---- identity -----------------------------------------------------------------

// Unregister removes the caller's identity; its live channels close. The
// ids of the closed channels are returned. A second call on the same Client
// is a no-op that returns no ids (as the Python SDK's unregister).
func (c *Client) Unregister(ctx context.Context) ([]string, error) {
	c.mu.Lock()
	done := c.unregistered
	c.mu.Unlock()
	if done {
		return nil, nil
	}
	resp, err := c.RPC().Unregister(ctx, &agentnetv1.UnregisterRequest{})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.unregistered = true
	c.mu.Unlock()
	return resp.GetClosedChannelIds(), nil
}

// ListAgentsRequest filters ListAgents (all filters ANDed).
type ListAgentsRequest struct {
	// Kind keeps only this kind (0 = every kind).
	Kind PassportKind
	// Capability keeps agents claiming it.
	Capability string
	// Query is a case-insensitive substring over name, description, summary and domains.
	Query string
	// SortBy is "name" (default), "registered_at" or "last_seen".
	SortBy string
	// Limit caps the result (0 = 20).
	Limit int
	// ExcludeSelf leaves the caller out.
	ExcludeSelf bool
}

// ListAgents searches the registry.
func (c *Client) ListAgents(ctx context.Context, req ListAgentsRequest) ([]*AgentSummary, error) {
	resp, err := c.RPC().ListAgents(ctx, &agentnetv1.ListAgentsRequest{
		Kind: req.Kind, Capability: req.Capability, Query: req.Query, SortBy: req.SortBy,
		Limit: clampInt32(req.Limit), ExcludeSelf: req.ExcludeSelf,
	})
	if err != nil {
		return nil, err
	}
	return resp.GetAgents(), nil
}

// DescribeAgent returns one identity's full profile, by name or agent id.
func (c *Client) DescribeAgent(ctx context.Context, nameOrID string) (*AgentRecord, error) {
	resp, err := c.RPC().DescribeAgent(ctx, &agentnetv1.DescribeAgentRequest{
		Agent: &agentnetv1.DescribeAgentRequest_Name{Name: nameOrID},
	})
	if err != nil {
		return nil, err
	}
	return resp.GetAgent(), nil
}

// SetSkill replaces the caller's skill markdown ("" = the hub's fallback).
func (c *Client) SetSkill(ctx context.Context, markdown string) (*AgentRecord, error) {
	resp, err := c.RPC().SetSkill(ctx, &agentnetv1.SetSkillRequest{SkillMd: markdown})
	if err != nil {
		return nil, err
	}
	return resp.GetAgent(), nil
}

// SetResume replaces the caller's resume.
func (c *Client) SetResume(ctx context.Context, resume *Resume) (*AgentRecord, error) {
	resp, err := c.RPC().SetResume(ctx, &agentnetv1.SetResumeRequest{Resume: resume})
	if err != nil {
		return nil, err
	}
	return resp.GetAgent(), nil
}

// SetRule replaces the caller's own governance rule (AG2's set_rule): rule
// is anything that marshals to the policy file's rule object (access,
// limits, rate, inbox); nil removes it. The hub validates it
// (INVALID_ARGUMENT naming the problem), audits it as rule_set and enforces
// it from the next call on. Like the rule given at registration it only
// narrows what the hub's policy allows.
func (c *Client) SetRule(ctx context.Context, rule any) (*AgentRecord, error) {
	text := ""
	if rule != nil {
		raw, err := json.Marshal(rule)
		if err != nil {
			return nil, invalidArgument("rule is not JSON-serialisable: %v", err)
		}
		text = string(raw)
	}
	resp, err := c.RPC().SetRule(ctx, &agentnetv1.SetRuleRequest{RuleJson: text})
	if err != nil {
		return nil, err
	}
	return resp.GetAgent(), nil
}

// GetRule returns the rules governing the caller: its own rule (RuleJson),
// every rule that applies (Rules: the policy's default, matching entries,
// its own) and what they combine to (EffectiveJson).
func (c *Client) GetRule(ctx context.Context) (*RuleReport, error) {
	resp, err := c.RPC().GetRule(ctx, &agentnetv1.GetRuleRequest{})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// ---- tools --------------------------------------------------------------------

// ListToolsRequest selects the tools ListTools returns.
type ListToolsRequest struct {
	// ChannelID is the channel whose turn the tools are for ("" = plugin tools only).
	ChannelID string
	// ExcludePlugin leaves out the five plugin tools.
	ExcludePlugin bool
}

// ListTools returns the JSON schemas of the tools the caller may use now:
// the plugin tools (peers, channels, tasks, context, delegate) and the
// adapter tools of the channel for this turn (say).
func (c *Client) ListTools(ctx context.Context, req ListToolsRequest) ([]*ToolSchema, error) {
	resp, err := c.RPC().ListTools(ctx, &agentnetv1.ListToolsRequest{
		ChannelId: req.ChannelID, ExcludePlugin: req.ExcludePlugin,
	})
	if err != nil {
		return nil, err
	}
	return resp.GetTools(), nil
}

// ToolCall is one tool invocation, as an LLM produced it.
type ToolCall struct {
	// Name is the tool: peers, channels, tasks, context, delegate or say.
	Name string
	// Arguments is the arguments object: a string, []byte or
	// json.RawMessage is sent as JSON text unchanged; anything else is
	// marshalled with encoding/json; nil is {}.
	Arguments any
	// ChannelID is the channel the caller is taking its turn in ("" = none).
	ChannelID string
	// TaskID is the task the caller runs inside ("" = none).
	TaskID string
	// CausationID is the envelope the caller's turn answers ("" = none): a
	// delegate counts one hop more than it, so chains stop at the hub's depth limit.
	CausationID string
}

// CallTool runs one tool and returns its JSON result.
func (c *Client) CallTool(ctx context.Context, call ToolCall) (json.RawMessage, error) {
	var args string
	switch a := call.Arguments.(type) {
	case nil:
		args = "{}"
	case string:
		args = a
	case []byte:
		args = string(a)
	case json.RawMessage:
		args = string(a)
	default:
		b, err := json.Marshal(a)
		if err != nil {
			return nil, invalidArgument("tool arguments cannot be encoded as JSON: %v", err)
		}
		args = string(b)
	}
	resp, err := c.RPC().CallTool(ctx, &agentnetv1.CallToolRequest{
		Name: call.Name, ArgumentsJson: args, ChannelId: call.ChannelID, TaskId: call.TaskID,
		CausationId: call.CausationID,
	})
	if err != nil {
		return nil, err
	}
	return json.RawMessage(resp.GetResultJson()), nil
}

// DelegateRequest is a one-shot consultation.
type DelegateRequest struct {
	// Target is the peer by name or agent id.
	Target string
	// Prompt is the question.
	Prompt string
	// Capability is one the target must claim ("" = any).
	Capability string
	// Timeout bounds the wait for the reply (0 = the context's remaining
	// time, else the hub's 300 s).
	Timeout time.Duration
	// CausationID is the envelope whose handling triggered the delegation.
	CausationID string
}

// DelegateResult is the target's reply.
type DelegateResult struct {
	// Text is the reply text.
	Text string
	// ChannelID is the consulting channel used.
	ChannelID string
	// EnvelopeID is the reply envelope's id.
	EnvelopeID string
}

// Delegate opens a consulting channel with the target, sends the prompt and
// waits for the single reply.
func (c *Client) Delegate(ctx context.Context, req DelegateRequest) (*DelegateResult, error) {
	secs, err := waitSeconds(ctx, req.Timeout)
	if err != nil {
		return nil, err
	}
	resp, err := c.RPC().Delegate(ctx, &agentnetv1.DelegateRequest{
		Target: req.Target, Prompt: req.Prompt, Capability: req.Capability,
		TimeoutSeconds: secs, CausationId: req.CausationID,
	})
	if err != nil {
		return nil, err
	}
	return &DelegateResult{Text: resp.GetText(), ChannelID: resp.GetChannelId(), EnvelopeID: resp.GetEnvelopeId()}, nil
}

// Say posts an EventText to a channel the caller participates in (the say
// tool); audience are peer names or ids (none = broadcast).
func (c *Client) Say(ctx context.Context, channelID, content string, audience ...string) (*Envelope, error) {
	resp, err := c.RPC().Say(ctx, &agentnetv1.SayRequest{
		Content: content, Audience: slices.Clone(audience), ChannelId: channelID,
	})
	if err != nil {
		return nil, err
	}
	return EnvelopeFromProto(resp.GetEnvelope()), nil
}

// ---- agent-to-agent -----------------------------------------------------------

// SetA2ASettings replaces the caller's agent-to-agent settings.
func (c *Client) SetA2ASettings(ctx context.Context, s *A2ASettings) (*AgentRecord, error) {
	resp, err := c.RPC().SetA2ASettings(ctx, &agentnetv1.SetA2ASettingsRequest{A2A: s})
	if err != nil {
		return nil, err
	}
	return resp.GetAgent(), nil
}

// DiscoverRequest filters DiscoverAgents (several values in one filter
// match any of them; several filters must all match).
type DiscoverRequest struct {
	// ProjectID is the project to search ("" = the caller's).
	ProjectID string
	// Skills matches agents offering any of these skills.
	Skills []string
	// Capabilities matches agents offering any of these capabilities.
	Capabilities []string
	// InputModes matches agents accepting any of these input modes.
	InputModes []string
	// Limit caps the result (0 = 50).
	Limit int
}

// DiscoverAgents lists the A2A-enabled agents the caller may see and invoke.
func (c *Client) DiscoverAgents(ctx context.Context, req DiscoverRequest) ([]*DiscoveredAgent, error) {
	resp, err := c.RPC().DiscoverAgents(ctx, &agentnetv1.DiscoverAgentsRequest{
		ProjectId: req.ProjectID, Skills: slices.Clone(req.Skills), Capabilities: slices.Clone(req.Capabilities),
		InputModes: slices.Clone(req.InputModes), Limit: clampInt32(req.Limit),
	})
	if err != nil {
		return nil, err
	}
	return resp.GetAgents(), nil
}

// InvocationStatus is the outcome of an A2A invocation.
type InvocationStatus = agentnetv1.InvocationStatus

// InvokeRequest is one A2A call.
type InvokeRequest struct {
	// AgentID is the target.
	AgentID string
	// Message is the request text.
	Message string
	// Skill is the skill to use ("" = the target decides).
	Skill string
	// Timeout bounds the wait (0 = the context's remaining time, else the hub's 300 s).
	Timeout time.Duration
	// CustomHeaders are forwarded to the callee (no "a2a-" keys).
	CustomHeaders map[string]string
	// CallToken links the call, as a child execution, to the A2A dispatch the
	// caller is answering ("" = a top-level call). Dispatch.Invoke sets it.
	CallToken string
	// RootSessionID records a top-level call under this root session, e.g. the
	// id of the user's session ("" = a new one). A root session other agents
	// started can be joined only by agents already part of it. Ignored when
	// CallToken is set (the token's root session is used).
	RootSessionID string
}

// InvokeResult is the callee's answer.
type InvokeResult struct {
	// Status is completed, input-required or failed.
	Status InvocationStatus
	// Result is the answer (completed) or the callee's question (input-required).
	Result string
	// Error says why the call failed.
	Error string
	// ExecutionID is the child execution recording the call.
	ExecutionID string
	// RootSessionID is the root session the execution belongs to.
	RootSessionID string
}

// InvokeAgent calls another agent and waits for its answer. The hub opens a
// consulting channel from the caller to the target whose question carries the
// A2A dispatch (see A2ADispatchOf); the target's reply ends the call. A call
// that ran returns a result with its Status (a target that refused, failed or
// did not answer in time is InvocationFailed, not an error); refusals before
// the call starts are *Error values, e.g. INVALID_ARGUMENT for a custom header
// in the reserved "a2a-" namespace (Metadata["key"] names it),
// PERMISSION_DENIED for a target that does not accept calls from the caller,
// TOKEN_EXPIRED for an expired CallToken (Dispatch.Invoke refreshes it).
func (c *Client) InvokeAgent(ctx context.Context, req InvokeRequest) (*InvokeResult, error) {
	in := &agentnetv1.InvokeAgentRequest{
		AgentId: req.AgentID, Message: req.Message, Skill: req.Skill,
		CustomHeaders: maps.Clone(req.CustomHeaders), CallToken: req.CallToken, RootSessionId: req.RootSessionID,
	}
	secs, err := waitSeconds(ctx, req.Timeout)
	if err != nil {
		return nil, err
	}
	if secs > 0 {
		in.TimeoutSeconds = proto.Float64(secs)
	}
	resp, err := c.RPC().InvokeAgent(ctx, in)
	if err != nil {
		return nil, err
	}
	return &InvokeResult{
		Status: resp.GetStatus(), Result: resp.GetResult(), Error: resp.GetError(),
		ExecutionID: resp.GetExecutionId(), RootSessionID: resp.GetRootSessionId(),
	}, nil
}

// RefreshCallToken exchanges a call token that is still valid (or expired
// within the grace period) for a fresh one.
func (c *Client) RefreshCallToken(ctx context.Context, callToken string) (string, time.Time, error) {
	resp, err := c.RPC().RefreshCallToken(ctx, &agentnetv1.RefreshCallTokenRequest{CallToken: callToken})
	if err != nil {
		return "", time.Time{}, err
	}
	var exp time.Time
	if ts := resp.GetExpiresAt(); ts != nil {
		exp = ts.AsTime()
	}
	return resp.GetCallToken(), exp, nil
}

// CallTokenFor asks the hub for a call token of the running execution
// executionID, which the caller must be the target of (the A2A call it is
// answering): pass it as InvokeRequest.CallToken to link nested calls.
// Dispatch.Invoke does this for you.
func (c *Client) CallTokenFor(ctx context.Context, executionID string) (string, time.Time, error) {
	if executionID == "" {
		return "", time.Time{}, invalidArgument("executionID is empty")
	}
	resp, err := c.RPC().RefreshCallToken(ctx, &agentnetv1.RefreshCallTokenRequest{ExecutionId: executionID})
	if err != nil {
		return "", time.Time{}, err
	}
	return resp.GetCallToken(), resp.GetExpiresAt().AsTime(), nil
}

// ListExecutions lists the A2A executions of one root session ("" = every
// root session the caller took part in), in start order.
func (c *Client) ListExecutions(ctx context.Context, rootSessionID string, limit int) ([]*Execution, error) {
	resp, err := c.RPC().ListExecutions(ctx, &agentnetv1.ListExecutionsRequest{
		RootSessionId: rootSessionID, Limit: clampInt32(limit),
	})
	if err != nil {
		return nil, err
	}
	return resp.GetExecutions(), nil
}

// ---- tasks --------------------------------------------------------------------

// StartTaskRequest describes a task to start.
type StartTaskRequest struct {
	// Title is a short human-readable title.
	Title string
	// ChannelID is the channel the task belongs to ("" = none).
	ChannelID string
	// Capability tags the task ("" = none): when it ends, the hub counts its
	// outcome in the owner's Resume.Observed[Capability] (AG2's capability).
	Capability string
}

// StartTask starts a task the caller owns (ReportTask STARTED) and returns
// its mirror; end it with EndTask.
func (c *Client) StartTask(ctx context.Context, req StartTaskRequest) (*TaskMetadata, error) {
	resp, err := c.RPC().ReportTask(ctx, &agentnetv1.ReportTaskRequest{
		Kind: agentnetv1.TaskEventKind_TASK_EVENT_KIND_STARTED, Title: req.Title, ChannelId: req.ChannelID,
		Capability: req.Capability,
	})
	if err != nil {
		return nil, err
	}
	return resp.GetTask(), nil
}

// EndTask ends the caller's task: with result (any JSON value, nil = none)
// when errText is "", else as failed with errText.
func (c *Client) EndTask(ctx context.Context, taskID string, result any, errText string) (*TaskMetadata, error) {
	req := &agentnetv1.ReportTaskRequest{TaskId: taskID, Kind: agentnetv1.TaskEventKind_TASK_EVENT_KIND_COMPLETED}
	if errText != "" {
		req.Kind, req.Error = agentnetv1.TaskEventKind_TASK_EVENT_KIND_FAILED, errText
	} else if result != nil {
		raw, err := json.Marshal(result)
		if err != nil {
			return nil, invalidArgument("result is not JSON-serialisable: %v", err)
		}
		req.PayloadJson = string(raw)
	}
	resp, err := c.RPC().ReportTask(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.GetTask(), nil
}

// CancelTask asks the owner of task taskID to cancel it (the owner gets an
// urgent ag2.task.cancel_request when the task has a channel): the task must
// be the caller's or belong to a channel the caller participates in
// (PERMISSION_DENIED otherwise; FAILED_PRECONDITION once it ended). The
// `tasks` tool's action "cancel" (CallTool) is the same call.
func (c *Client) CancelTask(ctx context.Context, taskID, reason string) (*TaskMetadata, error) {
	resp, err := c.RPC().CancelTask(ctx, &agentnetv1.CancelTaskRequest{TaskId: taskID, Reason: reason})
	if err != nil {
		return nil, err
	}
	return resp.GetTask(), nil
}

// CheckpointTask saves state (a JSON object: a map, or a struct that
// marshals to one) as the checkpoint of the caller's running task taskID,
// replacing the last one (AG2's checkpoint_task). The hub keeps it durably
// and refuses one over its --max-checkpoint-bytes (PAYLOAD_TOO_LARGE).
func (c *Client) CheckpointTask(ctx context.Context, taskID string, state any) error {
	raw, err := json.Marshal(state)
	if err != nil {
		return invalidArgument("checkpoint state is not JSON-serialisable: %v", err)
	}
	_, err = c.RPC().CheckpointTask(ctx, &agentnetv1.CheckpointTaskRequest{
		TaskId: taskID, StateJson: string(raw),
	})
	return err
}

// ReadTaskCheckpoint returns the last checkpoint of the caller's task taskID
// (running or ended), or nil when none was saved (AG2's
// read_task_checkpoint): a restarted agent resumes from it.
func (c *Client) ReadTaskCheckpoint(ctx context.Context, taskID string) (json.RawMessage, error) {
	resp, err := c.RPC().ReadTaskCheckpoint(ctx, &agentnetv1.ReadTaskCheckpointRequest{TaskId: taskID})
	if err != nil {
		return nil, err
	}
	if !resp.GetFound() {
		return nil, nil
	}
	return json.RawMessage(resp.GetStateJson()), nil
}

// ---- helpers ------------------------------------------------------------------

// unary is the shared call of the generated HubRPC table (rpc_generated.go):
// call runs as c's agent (its credential in ctx) and a failure comes back as
// an *Error (FromStatus).
func unary[Req, Res any](
	ctx context.Context, c *Client, call func(context.Context, Req, ...grpc.CallOption) (Res, error), in Req,
	opts []grpc.CallOption,
) (Res, error) {
	resp, err := call(c.AuthContext(ctx), in, opts...)
	if err != nil {
		var zero Res
		return zero, FromStatus(err)
	}
	return resp, nil
}

// waitSeconds turns an explicit timeout, or else the context's remaining
// time (less a small margin), into a hub-side wait in seconds (0 = the hub's default).
func waitSeconds(ctx context.Context, d time.Duration) (float64, error) {
	if d < 0 {
		return 0, invalidArgument("timeout must not be negative")
	}
	if d > 0 {
		return d.Seconds(), nil
	}
	if deadline, ok := ctx.Deadline(); ok {
		left := time.Until(deadline)
		if left <= 0 {
			return 0, FromStatus(context.DeadlineExceeded)
		}
		// Leave the hub a little less than the client waits (a tenth, at most a
		// second), so its own timeout answer arrives before the deadline cuts the call.
		return (left - min(left/10, time.Second)).Seconds(), nil
	}
	return 0, nil
}

func clampInt32(n int) int32 {
	switch {
	case n < 0:
		return -1 // let the hub refuse it with a proper message
	case n > 1<<31-1:
		return 1<<31 - 1
	}
	return int32(n)
}
