package agentnet

import (
	"runtime"

	agentnetv1 "github.com/agent-network/agent-network/gen/go/agentnet/v1"
)

// outPost is a Post waiting for the stream's writer. Its fields after post
// are written and read only under the stream's sendMu.
type outPost struct {
	post *agentnetv1.Post
	sent bool  // a frame carrying it was written (or failed to be)
	err  error // the write's error
}

// postLimit is the most posts one frame of a stream may carry: the hub's
// Welcome.max_post_batch (0 = the hub knows no PostBatch), lowered by the
// client's ConnectOptions.MaxPostBatch (NoBatch = single Posts). 1 means a
// frame per Post.
func postLimit(hubMax uint32, opt int) int {
	limit := int(min(hubMax, 1<<20))
	if opt > 0 {
		limit = min(limit, opt)
	}
	if opt < 0 || limit < 1 {
		return 1
	}
	return limit
}

// packPosts packs the first of the queued posts into one frame: all of them
// up to limit in a PostBatch, or a plain Post when only one goes (one queued,
// or limit 1) and no acks ride along. ack (nil = none) rides in the frame, a
// PostBatch then even of one post. It returns the frame and how many posts it
// carries.
func packPosts(queue []*agentnetv1.Post, limit int, ack *agentnetv1.Ack) (*agentnetv1.ConnectRequest, int) {
	n := min(len(queue), max(limit, 1))
	switch {
	case n == 0:
		return nil, 0
	case n == 1 && ack == nil:
		return &agentnetv1.ConnectRequest{Frame: &agentnetv1.ConnectRequest_Post{Post: queue[0]}}, 1
	}
	posts := make([]*agentnetv1.Post, n)
	copy(posts, queue[:n])
	return &agentnetv1.ConnectRequest{Frame: &agentnetv1.ConnectRequest_PostBatch{
		PostBatch: &agentnetv1.PostBatch{Posts: posts, Ack: ack},
	}}, n
}

// sendPost writes p on the stream. Posts queue while another frame is being
// written; whoever gets to write next sends everything queued before it (up
// to the stream's post limit per frame) without waiting for more, so posts
// made together travel together and in the order they were queued. When the
// stream's hub reads acks in a PostBatch, the acks pending then ride in the
// frame (see ConnectOptions.AckDelay).
func (st *stream) sendPost(p *agentnetv1.Post) error {
	me := &outPost{post: p}
	st.omu.Lock()
	st.outq = append(st.outq, me)
	st.omu.Unlock()

	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	if !me.sent && st.postLimit > 1 {
		// Let the goroutines that are about to post (say, those a Batch frame of post
		// results just released) queue theirs first, so they leave in this frame: a
		// writer that never waits would find the queue almost always empty and send a
		// frame per post, which costs the hub several times more per post.
		runtime.Gosched()
	}
	for !me.sent {
		st.omu.Lock()
		posts := make([]*agentnetv1.Post, min(len(st.outq), st.postLimit))
		for i := range posts {
			posts[i] = st.outq[i].post
		}
		var ack *agentnetv1.Ack
		if st.ackWait > 0 {
			if entries := st.s.takeAcks(); len(entries) > 0 {
				ack = &agentnetv1.Ack{Entries: entries}
			}
		}
		frame, n := packPosts(posts, st.postLimit, ack)
		batch := st.outq[:n:n]
		st.outq = st.outq[n:]
		st.omu.Unlock()
		err := st.bidi.Send(frame)
		if err == nil && n > 1 {
			st.s.postBatchFrames.Add(1)
		}
		if err == nil && ack != nil {
			st.s.ackRides.Add(1)
			st.s.acksSent(ack.GetEntries())
		}
		for _, o := range batch {
			o.sent, o.err = true, err
		}
	}
	return me.err
}
