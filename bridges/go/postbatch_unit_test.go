package agentnet

import (
	"fmt"
	"testing"

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
				f, n := packPosts(q, tc.limit)
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
	if f, n := packPosts(nil, 8); f != nil || n != 0 {
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
