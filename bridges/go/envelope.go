package agentnet

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	agentnetv1 "github.com/agent-network/agent-network/gen/go/agentnet/v1"
	"google.golang.org/protobuf/proto"
)

// Event types the hub and the SDKs use. Custom types (e.g.
// "myapp.review_request") pass through the hub unchanged.
const (
	// EventText is a text message: event_data {"text": "..."}.
	EventText = "ag2.msg.text"
	// EventPacket is a workflow packet: event_data {"routing": {...},
	// "context_updates": {"set": {...}, "delete": [...]}, "body": "..."}.
	EventPacket = "ag2.packet"
	// EventMsgChunk is a piece of a reply a model is still streaming:
	// event_data {"delta": "...", "index": n, "call": n}; CausationID is the
	// envelope being answered. It never takes a turn; the reply follows as an
	// EventText or EventPacket.
	EventMsgChunk = "ag2.msg.chunk"
	// EventInvite invites the audience to a channel (posted by the hub).
	EventInvite = "ag2.channel.invite"
	// EventInviteAck accepts an invite (posted by the invitee, event_data {}).
	EventInviteAck = "ag2.channel.invite_ack"
	// EventInviteReject declines an invite; the channel closes with "invite_rejected".
	EventInviteReject = "ag2.channel.invite_reject"
	// EventOpened says every invitee acked (posted by the hub).
	EventOpened = "ag2.channel.opened"
	// EventClosed ends a channel; event_data.reason says why (posted by the hub).
	EventClosed = "ag2.channel.closed"
	// EventExpired ends a channel by TTL; event_data.reason says why (posted by the hub).
	EventExpired = "ag2.channel.expired"
	// EventExpectationViolated reports a broken channel expectation (posted by the hub).
	EventExpectationViolated = "ag2.channel.expectation_violated"
	// EventTurnFailed reports that a member's turn on an envelope failed
	// (posted by the hub on the member's ReportTurnFailure).
	EventTurnFailed = "ag2.channel.turn_failed"
	// EventContextSet updates a workflow's shared context.
	EventContextSet = "ag2.context.set"
	// EventTaskCancelRequest asks a task's owner to cancel.
	EventTaskCancelRequest = "ag2.task.cancel_request"
	// EventTaskCancelled reports a cancelled task.
	EventTaskCancelled = "ag2.task.cancelled"
)

// HubSender is the sender_id of envelopes the hub itself posts (invites,
// opened, closed, expired).
const HubSender = "hub"

// Priority orders a participant's delivery queue.
type Priority = agentnetv1.Priority

// Delivery priorities.
const (
	// PriorityUnspecified is treated as PriorityNormal by the hub.
	PriorityUnspecified = agentnetv1.Priority_PRIORITY_UNSPECIFIED
	// PriorityBackground is delivered after every pending normal and urgent envelope.
	PriorityBackground = agentnetv1.Priority_PRIORITY_BACKGROUND
	// PriorityNormal is the default.
	PriorityNormal = agentnetv1.Priority_PRIORITY_NORMAL
	// PriorityUrgent is delivered ahead of normal and background envelopes.
	PriorityUrgent = agentnetv1.Priority_PRIORITY_URGENT
)

// Envelope is the unit of communication in a channel, with its JSON payload
// decoded. Inbound envelopes (from a Session, ReadWal or a post result) have
// every field set from the wire; for outbound ones (Client.Post) the hub
// stamps SenderID, EnvelopeID, CreatedAt and Seq and ignores what is set.
type Envelope struct {
	// ChannelID is the channel the envelope belongs to.
	ChannelID string
	// SenderID is the sending agent ("hub" for lifecycle events). Leave it
	// empty when posting: the hub stamps it from the credential and refuses
	// any other value with PERMISSION_DENIED.
	SenderID string
	// Audience lists the agent ids allowed to see the envelope. nil means
	// broadcast to every participant; a non-nil empty slice reaches no one.
	Audience []string
	// EventType is the dotted event type, e.g. EventText.
	EventType string
	// EventData is the decoded payload (numbers are json.Number, so integers
	// stay exact). Posting marshals it with encoding/json; nil means {}.
	EventData map[string]any
	// EventDataErr is set on inbound envelopes whose event_data_json is not a
	// JSON object; EventData is then empty and the raw text is in Raw.
	EventDataErr error
	// EnvelopeID is the hub-stamped unique id.
	EnvelopeID string
	// TaskID is the task the envelope relates to ("" = none).
	TaskID string
	// CausationID is the envelope_id this one is "in reply to" ("" = none).
	CausationID string
	// TraceID is a free-form trace id ("" = none).
	TraceID string
	// Priority is the delivery priority.
	Priority Priority
	// Depth is the delegation hop count.
	Depth int32
	// IdempotencyKey makes retried posts safe: a second post with the same
	// (sender, channel, key) returns the original envelope. Client.Post fills
	// in a random key when it is empty.
	IdempotencyKey string
	// CreatedAt is the hub-stamped admission time (zero when unknown).
	CreatedAt time.Time
	// TTL is the per-envelope time to live (0 = the channel's expiry applies).
	// It is sent in whole seconds, rounded up.
	TTL time.Duration
	// Seq is the hub-stamped per-channel sequence number.
	Seq uint64

	// Replay is true for deliveries replayed from the resume cursors.
	Replay bool
	// Duplicate is true on a post result when the post repeated an already
	// admitted idempotency key and this is the original envelope.
	Duplicate bool
	// Raw is the envelope exactly as it came off the wire (nil for envelopes
	// built locally).
	Raw *agentnetv1.Envelope

	ack   func(wake bool) error
	frame uint64 // the delivery-carrying frame it came in (numbered per Session)
}

// Text returns the text of an EventText envelope (event_data.text) or the
// body of an EventPacket (event_data.body); "" otherwise.
func (e *Envelope) Text() string {
	if e == nil {
		return ""
	}
	switch e.EventType {
	case EventText:
		return e.String("text")
	case EventPacket:
		return e.String("body")
	}
	return ""
}

// String returns EventData[key] when it is a string, else "".
func (e *Envelope) String(key string) string {
	if e == nil {
		return ""
	}
	s, _ := e.EventData[key].(string)
	return s
}

// Broadcast reports whether the envelope has no explicit audience.
func (e *Envelope) Broadcast() bool { return e != nil && e.Audience == nil }

// IsLifecycle reports whether the envelope is a channel lifecycle event
// (invite, invite ack/reject, opened, closed, expired, expectation violated).
func (e *Envelope) IsLifecycle() bool {
	if e == nil {
		return false
	}
	switch e.EventType {
	case EventInvite, EventInviteAck, EventInviteReject, EventOpened, EventClosed, EventExpired,
		EventExpectationViolated:
		return true
	}
	return false
}

// Ack marks a delivered envelope as processed: the Session records it in its
// cursor store (so a restarted process does not see it again) and then
// acknowledges it to the hub. Call it once you are done with the envelope;
// until then the hub redelivers it after a reconnect. Ack is idempotent and a
// no-op for envelopes that were not delivered by a Session. The error is the
// cursor store's, if saving failed.
func (e *Envelope) Ack() error {
	if e == nil || e.ack == nil {
		return nil
	}
	return e.ack(true)
}

// DecodeEventData decodes event_data_json text into a map, keeping numbers
// as json.Number. Empty text is {}. Anything other than a single JSON object
// is an error.
func DecodeEventData(text string) (map[string]any, error) {
	out := map[string]any{}
	if text == "" {
		return out, nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(text)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return map[string]any{}, fmt.Errorf("event_data_json is not valid JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return map[string]any{}, errors.New("event_data_json has trailing data after the JSON object")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return map[string]any{}, fmt.Errorf("event_data_json is a JSON %T, not an object", v)
	}
	return m, nil
}

// EnvelopeFromProto converts a wire envelope. It never fails: a payload that
// is not a JSON object is reported in EventDataErr.
func EnvelopeFromProto(w *agentnetv1.Envelope) *Envelope {
	if w == nil {
		return &Envelope{EventData: map[string]any{}}
	}
	data, derr := DecodeEventData(w.GetEventDataJson())
	e := &Envelope{
		ChannelID:    w.GetChannelId(),
		SenderID:     w.GetSenderId(),
		EventType:    w.GetEventType(),
		EventData:    data,
		EventDataErr: derr,
		EnvelopeID:   w.GetEnvelopeId(),
		TaskID:       w.GetTaskId(),
		CausationID:  w.GetCausationId(),
		TraceID:      w.GetTraceId(),
		Priority:     w.GetPriority(),
		Depth:        w.GetDepth(),
		Seq:          w.GetSeq(),
		Raw:          w,
	}
	if w.Audience != nil {
		e.Audience = slices.Clone(w.GetAudience().GetAgentIds())
		if e.Audience == nil {
			e.Audience = []string{}
		}
	}
	if w.IdempotencyKey != nil {
		e.IdempotencyKey = w.GetIdempotencyKey()
	}
	if w.TtlSeconds != nil {
		e.TTL = time.Duration(w.GetTtlSeconds()) * time.Second
	}
	if ts := w.GetCreatedAt(); ts != "" {
		if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
			e.CreatedAt = t
		}
	}
	return e
}

// Proto converts the envelope to its wire form for posting. Hub-stamped
// fields (EnvelopeID, CreatedAt, Seq) are left out.
func (e *Envelope) Proto() (*agentnetv1.Envelope, error) {
	if e == nil {
		return nil, invalidArgument("envelope is nil")
	}
	data := "{}"
	if e.EventData != nil {
		b, err := json.Marshal(e.EventData)
		if err != nil {
			return nil, invalidArgument("event_data cannot be encoded as JSON: %v", err)
		}
		data = string(b)
	}
	w := &agentnetv1.Envelope{
		ChannelId:     e.ChannelID,
		SenderId:      e.SenderID,
		EventType:     e.EventType,
		EventDataJson: data,
		Priority:      e.Priority,
		Depth:         e.Depth,
	}
	if e.Audience != nil {
		w.Audience = &agentnetv1.Audience{AgentIds: slices.Clone(e.Audience)}
	}
	if e.TaskID != "" {
		w.TaskId = proto.String(e.TaskID)
	}
	if e.CausationID != "" {
		w.CausationId = proto.String(e.CausationID)
	}
	if e.TraceID != "" {
		w.TraceId = proto.String(e.TraceID)
	}
	if e.IdempotencyKey != "" {
		w.IdempotencyKey = proto.String(e.IdempotencyKey)
	}
	if e.TTL > 0 {
		secs := math.Ceil(e.TTL.Seconds())
		if secs > math.MaxInt32 {
			return nil, invalidArgument("ttl %s is too long", e.TTL)
		}
		w.TtlSeconds = proto.Int32(int32(secs))
	}
	return w, nil
}

// PostOption adjusts an envelope built by PostText, PostPacket or NewText.
type PostOption func(*Envelope)

// WithAudience addresses the envelope to these agent ids only (instead of
// broadcasting). Passing no ids makes an envelope that reaches no one.
func WithAudience(agentIDs ...string) PostOption {
	return func(e *Envelope) {
		e.Audience = append([]string{}, agentIDs...)
	}
}

// WithCausation marks the envelope as a reply to envelopeID.
func WithCausation(envelopeID string) PostOption {
	return func(e *Envelope) { e.CausationID = envelopeID }
}

// WithTask relates the envelope to a task.
func WithTask(taskID string) PostOption { return func(e *Envelope) { e.TaskID = taskID } }

// WithTrace sets the trace id.
func WithTrace(traceID string) PostOption { return func(e *Envelope) { e.TraceID = traceID } }

// WithPriority sets the delivery priority.
func WithPriority(p Priority) PostOption { return func(e *Envelope) { e.Priority = p } }

// WithIdempotencyKey sets the idempotency key, so a retried post (even from a
// restarted process) is admitted at most once.
func WithIdempotencyKey(key string) PostOption {
	return func(e *Envelope) { e.IdempotencyKey = key }
}

// WithTTL sets the envelope's own time to live.
func WithTTL(d time.Duration) PostOption { return func(e *Envelope) { e.TTL = d } }

// WithDepth sets the delegation depth.
func WithDepth(depth int32) PostOption { return func(e *Envelope) { e.Depth = depth } }

// Image is one image an EventText or EventPacket carries (event_data
// "images"): by URL (http or https), or inline Data with its MediaType
// ("image/png", "image/jpeg", "image/gif" or "image/webp"). Detail ("auto",
// "low", "high") is passed to the model; "" leaves it out. The hub refuses
// malformed images, more than 16 per envelope, and payloads over its
// event_data limit with INVALID_ARGUMENT / PAYLOAD_TOO_LARGE.
type Image struct {
	// URL is the image's address ("" for inline data).
	URL string
	// Data is the image's bytes (nil for a URL); sent as standard base64.
	Data []byte
	// MediaType is the image format; required with Data.
	MediaType string
	// Detail is how closely the model looks ("" = the model's default).
	Detail string
}

// eventData is the image as one item of event_data "images".
func (i Image) eventData() map[string]any {
	item := map[string]any{}
	if i.URL != "" {
		item["url"] = i.URL
	} else {
		item["data"] = base64.StdEncoding.EncodeToString(i.Data)
	}
	if i.MediaType != "" {
		item["media_type"] = i.MediaType
	}
	if i.Detail != "" {
		item["detail"] = i.Detail
	}
	return item
}

// WithImages attaches images to a text or packet envelope (NewText,
// NewPacket, PostText, PostPacket); the recipients' models see them.
func WithImages(images ...Image) PostOption {
	return func(e *Envelope) {
		if e.EventData == nil {
			e.EventData = map[string]any{}
		}
		items := make([]any, 0, len(images))
		for _, img := range images {
			items = append(items, img.eventData())
		}
		e.EventData["images"] = items
	}
}

// Images returns the images a text or packet envelope carries (nil for none;
// items that are not images are skipped).
func (e *Envelope) Images() []Image {
	if e == nil || (e.EventType != EventText && e.EventType != EventPacket) {
		return nil
	}
	items, _ := e.EventData["images"].([]any)
	var out []Image
	for _, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			continue
		}
		img := Image{}
		img.URL, _ = m["url"].(string)
		img.MediaType, _ = m["media_type"].(string)
		img.Detail, _ = m["detail"].(string)
		if data, ok := m["data"].(string); ok {
			raw, err := base64.StdEncoding.DecodeString(data)
			if err != nil {
				continue
			}
			img.Data = raw
		}
		out = append(out, img)
	}
	return out
}

// NewText builds an EventText envelope.
func NewText(channelID, text string, opts ...PostOption) *Envelope {
	e := &Envelope{ChannelID: channelID, EventType: EventText, EventData: map[string]any{"text": text}}
	for _, o := range opts {
		if o != nil {
			o(e)
		}
	}
	return e
}

// Handoff is a typed routing decision: Target (a participant's agent id or
// name) speaks next, whatever the workflow's transitions say; Reason says why.
type Handoff struct {
	Target string
	Reason string
}

// Finish is a typed routing decision that ends the workflow: the channel
// closes with Reason ("" = "finished"; at most 64 characters); Summary is
// carried for whoever reads the WAL.
type Finish struct {
	Summary string
	Reason  string
}

// Packet is the payload of a workflow EventPacket. The hub routes it on
// ToolCalled (the round's one routing tool); a Handoff or a Finish (give at
// most one; Finish wins) decides before the transitions.
type Packet struct {
	// ToolCalled names the transition tool the packet takes ("" = none).
	ToolCalled string
	// Reason says why the round routes as it does (routing.reason; "" = none).
	Reason string
	// Handoff, when set, names the next speaker (routing.kind "handoff").
	Handoff *Handoff
	// Finish, when set, ends the workflow (routing.kind "finish").
	Finish *Finish
	// Set holds context keys to set (applied before Delete).
	Set map[string]any
	// Delete lists context keys to delete.
	Delete []string
	// Body is the packet's text.
	Body string
}

// EventData returns the packet as EventPacket event_data.
func (p Packet) EventData() map[string]any {
	routing := map[string]any{}
	if p.ToolCalled != "" {
		routing["tool_called"] = p.ToolCalled
	} else {
		routing["tool_called"] = nil
	}
	if p.Reason != "" {
		routing["reason"] = p.Reason
	}
	switch {
	case p.Finish != nil:
		routing["kind"] = "finish"
		if p.Finish.Reason != "" {
			routing["close_reason"] = p.Finish.Reason
		}
		if p.Finish.Summary != "" {
			routing["summary"] = p.Finish.Summary
		}
	case p.Handoff != nil:
		routing["kind"] = "handoff"
		routing["target"] = p.Handoff.Target
		if p.Handoff.Reason != "" {
			routing["reason"] = p.Handoff.Reason
		}
	}
	set := p.Set
	if set == nil {
		set = map[string]any{}
	}
	del := p.Delete
	if del == nil {
		del = []string{}
	}
	return map[string]any{
		"routing":         routing,
		"context_updates": map[string]any{"set": set, "delete": del},
		"body":            p.Body,
	}
}

// NewPacket builds an EventPacket envelope.
func NewPacket(channelID string, p Packet, opts ...PostOption) *Envelope {
	e := &Envelope{ChannelID: channelID, EventType: EventPacket, EventData: p.EventData()}
	for _, o := range opts {
		if o != nil {
			o(e)
		}
	}
	return e
}

// Invite is an EventInvite addressed to this agent, as passed to
// ConnectOptions.OnInvite.
type Invite struct {
	// ChannelID is the channel being opened.
	ChannelID string
	// Type is the adapter type: consulting, conversation, discussion or workflow.
	Type string
	// Initiator is the inviting agent's id.
	Initiator string
	// InitiatorName is the inviting agent's name.
	InitiatorName string
	// Intent is the channel's free-text purpose.
	Intent string
	// Participants lists every member in invitation order (initiator first).
	Participants []string
	// Knobs are the adapter options.
	Knobs map[string]any
	// Envelope is the invite envelope itself.
	Envelope *Envelope
}

func inviteFrom(e *Envelope) *Invite {
	inv := &Invite{
		ChannelID:     e.ChannelID,
		Type:          e.String("type"),
		Initiator:     e.String("initiator"),
		InitiatorName: e.String("initiator_name"),
		Intent:        e.String("intent"),
		Envelope:      e,
	}
	if id := e.String("channel_id"); id != "" && inv.ChannelID == "" {
		inv.ChannelID = id
	}
	if ps, ok := e.EventData["participants"].([]any); ok {
		for _, p := range ps {
			if s, ok := p.(string); ok {
				inv.Participants = append(inv.Participants, s)
			}
		}
	}
	if k, ok := e.EventData["knobs"].(map[string]any); ok {
		inv.Knobs = k
	}
	return inv
}
