package agentnet_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	agentnet "github.com/agent-network/agent-network/bridges/go"
	"github.com/agent-network/agent-network/bridges/go/internal/testhub"
)

// waitUntil polls cond until it holds or ctx ends.
func waitUntil(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// storedTexts are a channel's text envelopes as the hub stored them, by seq.
func storedTexts(t *testing.T, ctx context.Context, c *agentnet.Client, ch string) map[uint64]string {
	t.Helper()
	envs, err := c.ReadWalAll(ctx, agentnet.ReadWalRequest{ChannelID: ch})
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64]string{}
	for _, e := range envs {
		if e.EventType == agentnet.EventText {
			out[e.Seq] = e.Text()
		}
	}
	return out
}

// Posts queued while the stream is busy writing leave together: in one
// PostBatch frame (or frames of at most MaxPostBatch; single Posts with
// NoBatch), are admitted in the order they were queued, and each gets its own
// result — a refused one its own error, while the posts around it succeed.
func TestQueuedPostsLeaveInBatches(t *testing.T) {
	t.Parallel()
	h := testhub.Start(t)
	for _, tc := range []struct {
		name         string
		maxPostBatch int
		batchFrames  uint64
	}{
		{"hub-limit", 0, 1},
		{"max-3", 3, 3}, // 10 posts: 3+3+3 in PostBatch frames, the last as a Post
		{"no-batch", agentnet.NoBatch, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t, 60*time.Second)
			a := newParticipant(t, ctx, h.Addr, "alice-"+tc.name, agentnet.ConnectOptions{AutoAck: true, MaxPostBatch: tc.maxPostBatch})
			b := newParticipant(t, ctx, h.Addr, "bob-"+tc.name, agentnet.ConnectOptions{AutoAck: true})
			c := newParticipant(t, ctx, h.Addr, "carol-"+tc.name, agentnet.ConnectOptions{AutoAck: true})
			chans := []string{openConversation(t, ctx, a, b.id()), openConversation(t, ctx, a, c.id())}

			const n, refused = 10, 4
			type result struct {
				env *agentnet.Envelope
				err error
			}
			results := make([]result, n)
			target := func(i int) string {
				if i == refused {
					return "no-such-channel"
				}
				return chans[i%2]
			}
			before := agentnet.PostBatchFrames(a.s)
			release := agentnet.HoldWrites(a.s)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					env, err := a.c.PostText(ctx, target(i), fmt.Sprintf("p%d", i))
					results[i] = result{env, err}
				}()
				// One at a time, so the queue order is i's order.
				waitUntil(t, ctx, fmt.Sprintf("post %d to queue", i), func() bool { return agentnet.QueuedPosts(a.s) == i+1 })
			}
			release()
			wg.Wait()

			if got := agentnet.PostBatchFrames(a.s) - before; got != tc.batchFrames {
				t.Errorf("%d PostBatch frames, want %d", got, tc.batchFrames)
			}
			last := map[string]uint64{}
			for i, r := range results {
				if i == refused {
					if agentnet.ReasonFor(r.err) != agentnet.ReasonNotFound {
						t.Fatalf("post %d to a missing channel: %v, want a NOT_FOUND refusal", i, r.err)
					}
					continue
				}
				if r.err != nil {
					t.Fatalf("post %d: %v", i, r.err)
				}
				if r.env.ChannelID != target(i) || r.env.Text() != fmt.Sprintf("p%d", i) {
					t.Fatalf("post %d got the result of another post: %+v", i, r.env)
				}
				if r.env.Seq <= last[r.env.ChannelID] {
					t.Fatalf("post %d admitted at seq %d, after a later-queued post's %d", i, r.env.Seq, last[r.env.ChannelID])
				}
				last[r.env.ChannelID] = r.env.Seq
			}
			for _, ch := range chans {
				stored := storedTexts(t, ctx, a.c, ch)
				for i, r := range results {
					if i != refused && r.env.ChannelID == ch && stored[r.env.Seq] != fmt.Sprintf("p%d", i) {
						t.Fatalf("seq %d of %s holds %q, want p%d", r.env.Seq, ch, stored[r.env.Seq], i)
					}
				}
			}
		})
	}
}

// Many goroutines posting over one Session at once all get their own
// results; each goroutine's posts are admitted in the order it made them, and
// the hub stored every post at the seq its result names.
func TestConcurrentPostsOverOneSession(t *testing.T) {
	t.Parallel()
	h := testhub.Start(t)
	for _, tc := range []struct {
		name         string
		maxPostBatch int
	}{
		{"batched", 0},
		{"no-batch", agentnet.NoBatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t, 120*time.Second)
			a := newParticipant(t, ctx, h.Addr, "alice-"+tc.name, agentnet.ConnectOptions{AutoAck: true, MaxPostBatch: tc.maxPostBatch})
			var chans []string
			for _, peer := range []string{"bob", "carol", "dave"} {
				p := newParticipant(t, ctx, h.Addr, peer+"-"+tc.name, agentnet.ConnectOptions{AutoAck: true})
				chans = append(chans, openConversation(t, ctx, a, p.id()))
			}
			const writers, each = 8, 25 // per channel
			type posted struct {
				ch   string
				seq  uint64
				text string
			}
			var mu sync.Mutex
			var all []posted
			errs := make(chan error, len(chans)*writers)
			var wg sync.WaitGroup
			for _, ch := range chans {
				for w := range writers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						var prev uint64
						for i := range each {
							text := fmt.Sprintf("w%d-%d", w, i)
							env, err := a.c.PostText(ctx, ch, text)
							if err != nil {
								errs <- fmt.Errorf("%s %s: %w", ch, text, err)
								return
							}
							if env.ChannelID != ch || env.Text() != text {
								errs <- fmt.Errorf("%s %s got the result of another post: %+v", ch, text, env)
								return
							}
							if env.Seq <= prev {
								errs <- fmt.Errorf("%s %s admitted at seq %d, before its predecessor's %d", ch, text, env.Seq, prev)
								return
							}
							prev = env.Seq
							mu.Lock()
							all = append(all, posted{ch, env.Seq, text})
							mu.Unlock()
						}
					}()
				}
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if len(all) != len(chans)*writers*each {
				t.Fatalf("%d results, want %d", len(all), len(chans)*writers*each)
			}
			stored := map[string]map[uint64]string{}
			for _, ch := range chans {
				stored[ch] = storedTexts(t, ctx, a.c, ch)
				if len(stored[ch]) != writers*each {
					t.Fatalf("%s stores %d texts, want %d", ch, len(stored[ch]), writers*each)
				}
			}
			for _, p := range all {
				if got := stored[p.ch][p.seq]; got != p.text {
					t.Fatalf("seq %d of %s holds %q, its result said %q", p.seq, p.ch, got, p.text)
				}
			}
			if tc.maxPostBatch == agentnet.NoBatch && agentnet.PostBatchFrames(a.s) != 0 {
				t.Fatalf("%d PostBatch frames with NoBatch", agentnet.PostBatchFrames(a.s))
			}
			t.Logf("%d PostBatch frames for %d posts", agentnet.PostBatchFrames(a.s), len(all))
		})
	}
}
