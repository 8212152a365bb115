package agentnet

import (
	"context"
	"errors"
	"slices"
	"time"

	agentnetv1 "github.com/agent-network/agent-network/gen/go/agentnet/v1"
)

// ---- deliveries ----------------------------------------------------------------

// onFrame handles the deliveries of one frame (a Delivery, or a Batch's) in
// order; the acks the Session owes for them at once leave together.
func (s *Session) onFrame(ds []*agentnetv1.Delivery) {
	if len(ds) == 0 {
		return
	}
	frame := s.frames.Add(1)
	var acks []*agentnetv1.AckEntry
	var out []*Envelope
	for _, d := range ds {
		env, a := s.onDelivery(d, frame)
		if a != nil {
			acks = append(acks, a)
		}
		if env != nil {
			out = append(out, env)
		}
	}
	s.queueAcks(true, acks...)
	if len(out) == 0 {
		return
	}
	// Queued together, so dispatch knows which envelope ends the frame.
	s.qmu.Lock()
	s.queue = append(s.queue, out...)
	s.qmu.Unlock()
	select {
	case s.qwake <- struct{}{}:
	default:
	}
}

// onDelivery dedups one delivery and answers it (an invite) or settles it;
// it returns the envelope to hand out and the ack owed right away, if any.
func (s *Session) onDelivery(d *agentnetv1.Delivery, frame uint64) (*Envelope, *agentnetv1.AckEntry) {
	w := d.GetEnvelope()
	if w == nil || w.GetChannelId() == "" || w.GetSeq() == 0 {
		return nil, nil
	}
	now := &agentnetv1.AckEntry{ChannelId: w.GetChannelId(), Seq: w.GetSeq()}
	s.mu.Lock()
	kind := s.trk.classify(w.GetChannelId(), w.GetSeq(), d.GetPrevSeq())
	me := s.agentID
	s.mu.Unlock()
	switch kind {
	case deliverProcessed:
		return nil, now // the hub lost our ack; repeat it
	case deliverHeld:
		return nil, nil // handed out already; its Ack will reach the hub
	}
	ended := w.GetEventType() == EventClosed || w.GetEventType() == EventExpired
	if d.GetExpired() {
		// A stale envelope's slot, without content: not to be handled, only acked.
		if err := s.saveProcessed(w.GetChannelId(), w.GetSeq(), ended); err != nil {
			s.log.Error("agentnet: saving cursors failed", "err", err)
		}
		return nil, now
	}
	env := EnvelopeFromProto(w)
	env.Replay = d.GetReplay()
	env.ack = s.ackFunc(env.ChannelID, env.Seq, ended)
	env.frame = frame
	if env.EventType == EventInvite && env.SenderID == HubSender && slices.Contains(env.Audience, me) {
		if !s.spawn(func() { s.answerInvite(env) }) {
			s.releaseHeld(env)
		}
		return nil, nil
	}
	return env, nil
}

// dispatch hands queued envelopes to the consumer without ever blocking the
// stream's receive loop (which must keep reading post results).
func (s *Session) dispatch() {
	defer s.wg.Done()
	for {
		s.qmu.Lock()
		if len(s.queue) == 0 {
			s.qmu.Unlock()
			select {
			case <-s.qwake:
				continue
			case <-s.ctx.Done():
				return
			}
		}
		env := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		s.qmu.Unlock()
		select {
		case s.out <- env:
			if s.opts.AutoAck {
				// Send the acks once the last queued envelope of env's frame is
				// out, so a Batch frame is acked in one go.
				s.qmu.Lock()
				last := len(s.queue) == 0 || s.queue[0].frame != env.frame
				s.qmu.Unlock()
				if err := env.ack(last); err != nil {
					s.log.Error("agentnet: saving cursors failed", "err", err)
				}
			}
		case <-s.ctx.Done():
			return
		}
	}
}

func (s *Session) releaseHeld(env *Envelope) {
	s.mu.Lock()
	s.trk.release(env.ChannelID, env.Seq)
	s.mu.Unlock()
}

// answerInvite accepts or rejects an invite, retrying transport failures
// (with backoff) and RATE_LIMITED refusals (after their retry-after); any
// other refusal by the hub (e.g. the invite was answered already, or the
// channel ended) also settles it.
func (s *Session) answerInvite(env *Envelope) {
	inv := inviteFrom(env)
	accept := true
	if s.opts.OnInvite != nil {
		accept = s.opts.OnInvite(s.ctx, inv)
		if s.ctx.Err() != nil { // stopped while deciding: leave it to the next Session
			s.releaseHeld(env)
			return
		}
	}
	etype := EventInviteAck
	if !accept {
		etype = EventInviteReject
	}
	backoff := s.opts.MinBackoff
answer:
	for {
		ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
		_, err := s.c.Post(ctx, &Envelope{
			ChannelID: inv.ChannelID, EventType: etype, EventData: map[string]any{},
			IdempotencyKey: etype + ":" + env.EnvelopeID,
		})
		cancel()
		if err == nil {
			break
		}
		wait := s.jitter(backoff)
		var rl *RateLimitedError
		switch {
		case errors.As(err, &rl):
			// An answer takes a token of the identity's rate limit like any post.
			// The refusal changed nothing; wait as the hub asks and answer again
			// (the hub's invite timeout ends the channel, and this, if it takes too long).
			s.log.Info("agentnet: invite answer rate limited; retrying", "channel", inv.ChannelID, "in", rl.RetryAfter)
			if rl.RetryAfter > 0 {
				wait = rl.RetryAfter
			}
		case ReasonFor(err) != "":
			s.log.Info("agentnet: invite answer refused", "channel", inv.ChannelID, "err", err)
			break answer
		default:
			s.log.Warn("agentnet: answering invite failed; retrying", "channel", inv.ChannelID, "err", err)
			backoff = min(backoff*2, s.opts.MaxBackoff)
		}
		if s.ctx.Err() != nil || !s.sleep(wait) {
			s.releaseHeld(env)
			return
		}
	}
	if err := env.Ack(); err != nil {
		s.log.Error("agentnet: saving cursors failed", "err", err)
	}
}
