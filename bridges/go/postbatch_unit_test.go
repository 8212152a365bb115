package agentnet

import (
	"fmt"
	"testing"
	"time"

	agentnetv1 "github.com/agent-network/agent-network/gen/go/agentnet/v1"
)

func queuedPosts(n int) []*agentnetv1.Post {
	q := make([]*agentnetv1.Post, n)
	for i := range q {
		q[i] = &agentnetv1.Post{RequestId: fmt.Sprintf("r%d", i)}
	}
	return q
}

// ids are the request ids a frame carries, in order, and whether it is a PostBatch.
func ids(t *testing.T, f *agentnetv1.ConnectRequest) ([]string, bool) {
	t.Helper()
	switch fr := f.GetFrame().(type) {
	case *agentnetv1.ConnectRequest_Post:
		return []string{fr.Post.GetRequestId()}, false
	case *agentnetv1.ConnectRequest_PostBatch:
		var out []string
		for _, p := range fr.PostBatch.GetPosts() {
			out = append(out, p.GetRequestId())
		}
		return out, true
	}
	t.Fatalf("not a post frame: %v", f)
	return nil, false
}

// Queued posts are packed front first, at most limit per frame, a lone post
// (or limit 1) as a plain Post; draining the queue frame by frame sends every
// post once, in queue order.
func TestPackPosts(t *testing.T) {
	for _, tc := range []struct {
		queued, limit int
		frames        []int // posts per frame; negative = a plain Post
	}{
		{1, 256, []int{-1}},
		{2, 256, []int{2}},
		{5, 256, []int{5}},
		{5, 2, []int{2, 2, -1}},
		{6, 3, []int{3, 3}},
		{3, 1, []int{-1, -1, -1}},
		{3, 0, []int{-1, -1, -1}},
	} {
		t.Run(fmt.Sprintf("%d-by-%d", tc.queued, tc.limit), func(t *testing.T) {
			q := queuedPosts(tc.queued)
			var sent []string
			var got []int
			for len(q) > 0 {
				f, n := packPosts(q, tc.limit, nil)
				carried, batch := ids(t, f)
				if len(carried) != n {
					t.Fatalf("frame carries %d posts, packPosts says %d", len(carried), n)
				}
				if batch {
					got = append(got, n)
				} else {
					got = append(got, -n)
				}
				sent = append(sent, carried...)
				q = q[n:]
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.frames) {
				t.Fatalf("frames %v, want %v", got, tc.frames)
			}
			for i, id := range sent {
				if id != fmt.Sprintf("r%d", i) {
					t.Fatalf("sent %v: not in queue order", sent)
				}
			}
		})
	}
	if f, n := packPosts(nil, 8, nil); f != nil || n != 0 {
		t.Fatalf("empty queue packed into %v (%d)", f, n)
	}
}

// The limit is the hub's max_post_batch, lowered by MaxPostBatch; a hub
// without PostBatch (0) or NoBatch means a frame per post.
func TestPostLimit(t *testing.T) {
	for _, tc := range []struct {
		hub  uint32
		opt  int
		want int
	}{
		{256, 0, 256},
		{256, 16, 16},
		{16, 256, 16},
		{0, 0, 1},
		{0, 16, 1},
		{256, NoBatch, 1},
		{1, 0, 1},
	} {
		if got := postLimit(tc.hub, tc.opt); got != tc.want {
			t.Errorf("postLimit(%d, %d) = %d, want %d", tc.hub, tc.opt, got, tc.want)
		}
	}
}

// Acks riding along make even a lone post a PostBatch, and go in the first
// frame only; without acks nothing changes.
func TestPackPostsWithAcks(t *testing.T) {
	ack := &agentnetv1.Ack{Entries: []*agentnetv1.AckEntry{{ChannelId: "c", Seq: 7}}}
	for _, tc := range []struct {
		queued, limit, n int
	}{{1, 256, 1}, {1, 1, 1}, {3, 256, 3}, {3, 2, 2}} {
		f, n := packPosts(queuedPosts(tc.queued), tc.limit, ack)
		if n != tc.n {
			t.Fatalf("%d queued by %d: %d posts packed, want %d", tc.queued, tc.limit, n, tc.n)
		}
		batch := f.GetPostBatch()
		if batch == nil || len(batch.GetPosts()) != n || batch.GetAck() != ack {
			t.Fatalf("%d queued by %d: frame %v, want a PostBatch of %d carrying the ack", tc.queued, tc.limit, f, n)
		}
	}
}

// Acks ride only with a hub that reads them in a PostBatch and takes
// PostBatch frames at all, and only when AckDelay is not negative.
func TestAckWait(t *testing.T) {
	const d = 5 * time.Millisecond
	for _, tc := range []struct {
		ack   bool
		max   uint32
		delay time.Duration
		want  time.Duration
	}{
		{true, 256, d, d},
		{true, 1, d, d},
		{false, 256, d, 0}, // a hub older than post_batch_ack
		{true, 0, d, 0},    // a hub without PostBatch
		{true, 256, -1, 0}, // the client opted out
	} {
		w := &agentnetv1.Welcome{PostBatchAck: tc.ack, MaxPostBatch: tc.max}
		if got := ackWait(w, tc.delay); got != tc.want {
			t.Errorf("ackWait(post_batch_ack %v, max_post_batch %d, %v) = %v, want %v", tc.ack, tc.max, tc.delay, got, tc.want)
		}
	}
}
