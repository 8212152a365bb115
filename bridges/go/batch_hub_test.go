package agentnet_test

import (
	"fmt"
	"testing"
	"time"

	agentnet "github.com/agent-network/agent-network/bridges/go"
	"github.com/agent-network/agent-network/bridges/go/internal/testhub"
)

// A backlog posted while bob is away reaches his next Session complete and in
// order (in Batch frames unless MaxBatch is NoBatch), and his acks move the
// cursor the hub stores for him past all of it.
func TestBacklogInBatches(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		maxBatch int
		autoAck  bool
	}{
		{"batched-autoack", 0, true},
		{"batched-manual-ack", 0, false},
		{"single-frames", agentnet.NoBatch, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t, 60*time.Second)
			h := testhub.Start(t)
			a := newParticipant(t, ctx, h.Addr, "alice", agentnet.ConnectOptions{AutoAck: true})
			b := newParticipant(t, ctx, h.Addr, "bob", agentnet.ConnectOptions{})
			conv, err := a.c.OpenChannel(ctx, agentnet.OpenChannelRequest{Type: "conversation", Targets: []string{"bob"}, WaitUntilOpened: true})
			if err != nil {
				t.Fatal(err)
			}
			ch := conv.Channel.GetChannelId()
			b.next(t, ctx, "opened", func(e *agentnet.Envelope) bool {
				return e.ChannelID == ch && e.EventType == agentnet.EventOpened
			})
			if err := b.s.Close(); err != nil {
				t.Fatal(err)
			}

			const n = 40
			var last uint64
			for i := range n {
				env, err := a.c.PostText(ctx, ch, fmt.Sprintf("m%d", i))
				if err != nil {
					t.Fatal(err)
				}
				last = env.Seq
			}

			s, err := b.c.Connect(ctx, agentnet.ConnectOptions{MaxBatch: tc.maxBatch, AutoAck: tc.autoAck})
			if err != nil {
				t.Fatal(err)
			}
			b.s = s
			var texts []string
			var prev uint64
			b.next(t, ctx, "the backlog", func(e *agentnet.Envelope) bool {
				if e.ChannelID != ch || e.EventType != agentnet.EventText {
					return false
				}
				if e.Seq <= prev {
					t.Fatalf("seq %d after %d", e.Seq, prev)
				}
				prev = e.Seq
				texts = append(texts, e.Text())
				return e.Seq == last
			})
			for i, text := range texts {
				if want := fmt.Sprintf("m%d", i); text != want {
					t.Fatalf("text %d is %q, want %q (got %v)", i, text, want, texts)
				}
			}
			if len(texts) != n {
				t.Fatalf("got %d texts, want %d", len(texts), n)
			}
			frames := agentnet.BatchFrames(s)
			if tc.maxBatch == agentnet.NoBatch && frames != 0 {
				t.Fatalf("%d Batch frames with MaxBatch NoBatch", frames)
			}
			if tc.maxBatch != agentnet.NoBatch && frames == 0 {
				t.Fatal("the backlog came without a single Batch frame")
			}
			// (A lifecycle envelope the first Session had not acked yet may come
			// again; its answer can settle after the texts.)
			deadline := time.Now().Add(20 * time.Second)
			for got := s.Cursors()[ch]; got != last; got = s.Cursors()[ch] {
				if time.Now().After(deadline) {
					t.Fatalf("bob's cursor %d, want %d", got, last)
				}
				time.Sleep(20 * time.Millisecond)
			}

			// The hub stored the acked cursor: a Session that sends no cursors
			// of its own resumes from it.
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			deadline = time.Now().Add(20 * time.Second)
			for {
				probe, err := b.c.Connect(ctx, agentnet.ConnectOptions{})
				if err != nil {
					t.Fatal(err)
				}
				stored := agentnet.ResumeCursors(probe)[ch]
				_ = probe.Close()
				if stored == last {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the hub's stored cursor for bob is %d, want %d", stored, last)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}
