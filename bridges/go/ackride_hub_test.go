package agentnet_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	agentnet "github.com/agent-network/agent-network/bridges/go"
	"github.com/agent-network/agent-network/bridges/go/internal/testhub"
)

// askBob opens a conversation from alice to bob, lets bob's first Session see
// it open, closes that Session and posts n questions while bob is away. Bob's
// cursors live in the returned store, so his next Session resumes right
// after the opening (nothing is replayed twice).
func askBob(t *testing.T, ctx context.Context, h *testhub.Hub, tag string, n int) (alice, bob *participant, ch string, store agentnet.CursorStore) {
	t.Helper()
	store = agentnet.NewMemoryCursorStore()
	alice = newParticipant(t, ctx, h.Addr, "alice-"+tag, agentnet.ConnectOptions{AutoAck: true})
	bob = newParticipant(t, ctx, h.Addr, "bob-"+tag, agentnet.ConnectOptions{Cursors: store})
	conv, err := alice.c.OpenChannel(ctx, agentnet.OpenChannelRequest{Type: "conversation", Targets: []string{bob.id()}, WaitUntilOpened: true})
	if err != nil {
		t.Fatal(err)
	}
	ch = conv.Channel.GetChannelId()
	bob.next(t, ctx, "opened", func(e *agentnet.Envelope) bool { return e.ChannelID == ch && e.EventType == agentnet.EventOpened })
	if err := bob.s.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := alice.c.PostText(ctx, ch, fmt.Sprintf("q%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	return alice, bob, ch, store
}

// question is the next text envelope of ch bob's Session hands out (not acked).
func question(t *testing.T, ctx context.Context, s *agentnet.Session, ch string) *agentnet.Envelope {
	t.Helper()
	for {
		select {
		case env, ok := <-s.Envelopes():
			if !ok {
				t.Fatalf("session ended while waiting for a question: %v", s.Err())
			}
			if env.ChannelID == ch && env.EventType == agentnet.EventText {
				return env
			}
			t.Fatalf("unexpected envelope %s (seq %d) before the questions", env.EventType, env.Seq)
		case <-ctx.Done():
			t.Fatal("timed out waiting for a question: its predecessor's ack never reached the hub")
		}
	}
}

// A request/answer exchange whose acks ride in the answers' frames: bob's
// stream has max_in_flight 1, so the hub sends him the next question only
// once the last one is acked, and his AckDelay is far longer than the test,
// so no Ack frame could have carried them: every question arrives because
// the answer to its predecessor carried that ack (in a PostBatch of one).
func TestAcksRideInTheAnswersFrames(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 60*time.Second)
	h := testhub.Start(t)
	const n = 4
	alice, bob, ch, store := askBob(t, ctx, h, "ride", n)

	s, err := bob.c.Connect(ctx, agentnet.ConnectOptions{Cursors: store, MaxInFlight: 1, AckDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	bob.s = s
	for i := range n {
		q := question(t, ctx, s, ch)
		if q.Text() != fmt.Sprintf("q%d", i) {
			t.Fatalf("question %d is %q", i, q.Text())
		}
		if err := q.Ack(); err != nil {
			t.Fatal(err)
		}
		if _, err := bob.c.PostText(ctx, ch, "re "+q.Text(), agentnet.WithCausation(q.EnvelopeID)); err != nil {
			t.Fatal(err)
		}
	}
	if got := agentnet.AckFrames(s); got != 0 {
		t.Fatalf("bob sent %d Ack frames; every ack should have ridden in an answer's frame", got)
	}
	if got := agentnet.AckRides(s); got != n {
		t.Fatalf("%d of bob's %d answers carried acks, want all", got, n)
	}
	if got := agentnet.PostBatchFrames(s); got != 0 {
		t.Fatalf("%d PostBatch frames of several posts; each answer went alone", got)
	}
	alice.next(t, ctx, "the last answer", func(e *agentnet.Envelope) bool {
		return e.ChannelID == ch && e.Text() == fmt.Sprintf("re q%d", n-1)
	})
}

// With no post to ride in, an ack still reaches the hub within AckDelay, in
// an Ack frame of its own: bob (max_in_flight 1, the default AckDelay) acks
// the questions without answering and still receives every one.
func TestAcksWithoutPostsStillArrive(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 60*time.Second)
	h := testhub.Start(t)
	const n = 4
	_, bob, ch, store := askBob(t, ctx, h, "timer", n)

	s, err := bob.c.Connect(ctx, agentnet.ConnectOptions{Cursors: store, MaxInFlight: 1})
	if err != nil {
		t.Fatal(err)
	}
	bob.s = s
	for i := range n {
		q := question(t, ctx, s, ch)
		if q.Text() != fmt.Sprintf("q%d", i) {
			t.Fatalf("question %d is %q", i, q.Text())
		}
		if err := q.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	if got := agentnet.AckRides(s); got != 0 {
		t.Fatalf("%d post frames carried acks, but bob posted nothing", got)
	}
	// The last ack goes out on its own too: wait for it, no Close to flush it.
	waitUntil(t, ctx, "the last ack's frame", func() bool { return agentnet.AckFrames(s) == n })
}
