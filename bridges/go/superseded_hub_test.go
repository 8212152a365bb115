package agentnet_test

import (
	"errors"
	"testing"
	"time"

	agentnet "github.com/agent-network/agent-network/bridges/go"
	"github.com/agent-network/agent-network/bridges/go/internal/testhub"
)

// A second Connect of the same agent (another process) supersedes the first
// stream: the older Session stops with ErrSessionReplaced wrapping the hub's
// SUPERSEDED error and does not reconnect; the newer one keeps the stream.
// A Session learns the turns its channels await from it (PendingTurns).
func TestSupersededSessionStopsAndPendingTurnsAreListed(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 60*time.Second)
	h := testhub.Start(t)
	alice := newParticipant(t, ctx, h.Addr, "sup-alice", agentnet.ConnectOptions{AutoAck: true})
	bob := newParticipant(t, ctx, h.Addr, "sup-bob", agentnet.ConnectOptions{AutoAck: true})
	ch, err := alice.c.OpenChannel(ctx, agentnet.OpenChannelRequest{
		Type: "consulting", Targets: []string{bob.id()}, WaitUntilOpened: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	cid := ch.Channel.GetChannelId()
	question, err := alice.c.Post(ctx, &agentnet.Envelope{ChannelID: cid, EventType: agentnet.EventText,
		EventData: map[string]any{"text": "still there?"}})
	if err != nil {
		t.Fatal(err)
	}
	bob.next(t, ctx, "the question", func(e *agentnet.Envelope) bool { return e.EnvelopeID == question.EnvelopeID })

	twin, err := agentnet.Dial(h.Addr, bob.c.Credentials())
	if err != nil {
		t.Fatal(err)
	}
	defer twin.Close()
	newer, err := twin.Connect(ctx, agentnet.ConnectOptions{AutoAck: true})
	if err != nil {
		t.Fatal(err)
	}
	defer newer.Close()
	select {
	case <-bob.s.Done():
	case <-ctx.Done():
		t.Fatal("the superseded session did not stop")
	}
	err = bob.s.Err()
	if !errors.Is(err, agentnet.ErrSessionReplaced) || !agentnet.IsReason(err, agentnet.ReasonSuperseded) {
		t.Fatalf("superseded session ended with %v", err)
	}
	if e, ok := agentnet.AsError(err); !ok || e.Metadata["superseded_by"] != newer.SessionID() {
		t.Fatalf("superseded_by %v, want %q", err, newer.SessionID())
	}
	// The question was delivered to the first stream but not answered: the
	// newer stream's Welcome lists it.
	turns := newer.PendingTurns()
	if len(turns) != 1 || turns[0].ChannelID != cid || turns[0].EnvelopeID != question.EnvelopeID ||
		turns[0].Seq != question.Seq {
		t.Fatalf("pending turns %+v, want the question %s", turns, question.EnvelopeID)
	}
	// ListPendingTurns answers the same while it stays unanswered.
	listed, next, err := twin.ListPendingTurns(ctx, 0, "")
	if err != nil || next != "" || len(listed) != 1 || listed[0] != turns[0] {
		t.Fatalf("ListPendingTurns = %+v, %q, %v; want %+v", listed, next, err, turns)
	}
	// The newer session keeps the stream (the older never reconnects to take it back).
	if _, err := twin.Post(ctx, &agentnet.Envelope{ChannelID: cid, EventType: agentnet.EventText,
		EventData: map[string]any{"text": "yes"}, CausationID: question.EnvelopeID}); err != nil {
		t.Fatal(err)
	}
	alice.next(t, ctx, "the answer", func(e *agentnet.Envelope) bool { return e.CausationID == question.EnvelopeID })
	if !newer.Connected() || newer.Err() != nil {
		t.Fatalf("the newer session lost its stream: %v", newer.Err())
	}
}
