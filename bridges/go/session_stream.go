package agentnet

import (
	"context"
	"errors"
	"io"
	"time"

	agentnetv1 "github.com/agent-network/agent-network/gen/go/agentnet/v1"
	"google.golang.org/grpc/codes"
)

// ---- one stream ----------------------------------------------------------------

func (st *stream) send(req *agentnetv1.ConnectRequest) error {
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	return st.bidi.Send(req)
}

func (st *stream) recvLoop() {
	var err error
	defer func() {
		if !st.moving {
			st.s.leaveRedirect(st.addr) // before the posts waiting on it are sent again
		}
		st.finish(err)
	}()
	for {
		var msg *agentnetv1.ConnectResponse
		msg, err = st.bidi.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = &Error{Code: codes.Unavailable, Message: "the hub ended the stream"}
			} else {
				err = FromStatus(err)
			}
			return
		}
		st.lastRecv.Store(time.Now().UnixNano())
		switch f := msg.GetFrame().(type) {
		case *agentnetv1.ConnectResponse_Delivery:
			st.s.onFrame([]*agentnetv1.Delivery{f.Delivery})
		case *agentnetv1.ConnectResponse_PostResult:
			st.resolve(f.PostResult)
		case *agentnetv1.ConnectResponse_Batch:
			// In the order the hub would have sent them as single frames:
			// post results first, then the deliveries.
			st.s.batchFrames.Add(1)
			for _, r := range f.Batch.GetPostResults() {
				st.resolve(r)
			}
			st.s.onFrame(f.Batch.GetDeliveries())
		case *agentnetv1.ConnectResponse_Redirect:
			if st.s.follow(f.Redirect) {
				st.moving = true
				err = &Error{Code: codes.Unavailable, Message: "the hub moved this stream to " + f.Redirect.GetAddress()}
				return
			}
		}
	}
}

func (st *stream) finish(err error) {
	st.pmu.Lock()
	st.finished = true
	st.pending = nil
	st.pmu.Unlock()
	st.err = err
	st.cancel()
	close(st.done)
}

func (st *stream) register(id string, ch chan *agentnetv1.PostResult) bool {
	st.pmu.Lock()
	defer st.pmu.Unlock()
	if st.finished {
		return false
	}
	st.pending[id] = ch
	return true
}

func (st *stream) unregister(id string) {
	st.pmu.Lock()
	defer st.pmu.Unlock()
	delete(st.pending, id)
}

func (st *stream) resolve(r *agentnetv1.PostResult) {
	st.pmu.Lock()
	ch := st.pending[r.GetRequestId()]
	delete(st.pending, r.GetRequestId())
	st.pmu.Unlock()
	if ch != nil {
		ch <- r // buffered, one result per request
	}
}

// keepaliveLoop pings when the stream is idle and drops it when the hub has
// been silent for three intervals.
func (st *stream) keepaliveLoop() {
	interval := st.keepalive
	if interval <= 0 {
		interval = 20 * time.Second
	}
	interval = max(interval, time.Second)
	tick := time.NewTicker(interval / 2)
	defer tick.Stop()
	for {
		select {
		case <-st.done:
			return
		case <-tick.C:
		}
		idle := time.Since(time.Unix(0, st.lastRecv.Load()))
		if idle > 3*interval {
			st.s.log.Warn("agentnet: hub silent; dropping stream", "idle", idle)
			st.cancel()
			return
		}
		if idle >= interval {
			ping := &agentnetv1.ConnectRequest{Frame: &agentnetv1.ConnectRequest_Ping{
				Ping: &agentnetv1.Ping{Nonce: st.nonce.Add(1)},
			}}
			if err := st.send(ping); err != nil {
				return
			}
		}
	}
}

// postStream posts over the current stream; errStreamDown means it could not
// (no stream, or the stream dropped before the result arrived).
func (s *Session) postStream(ctx context.Context, w *agentnetv1.Envelope) (*Envelope, error) {
	st := s.current()
	if st == nil {
		return nil, errStreamDown
	}
	id := newID()
	ch := make(chan *agentnetv1.PostResult, 1)
	if !st.register(id, ch) {
		return nil, errStreamDown
	}
	if err := st.sendPost(&agentnetv1.Post{RequestId: id, Envelope: w}); err != nil {
		st.unregister(id)
		return nil, errStreamDown
	}
	select {
	case r := <-ch:
		if d := r.GetError(); d != nil {
			return nil, FromDetail(d)
		}
		if r.GetEnvelope() == nil {
			return nil, &Error{Code: codes.Internal, Message: "the hub sent an empty PostResult"}
		}
		env := EnvelopeFromProto(r.GetEnvelope())
		env.Duplicate = r.GetDuplicate()
		return env, nil
	case <-st.done:
		st.unregister(id)
		return nil, errStreamDown
	case <-ctx.Done():
		st.unregister(id)
		return nil, FromStatus(ctx.Err())
	}
}
