package agentnet

import (
	"sync"
	"time"

	agentnetv1 "github.com/agent-network/agent-network/gen/go/agentnet/v1"
)

// ---- acks and cursors ----------------------------------------------------------

// ackFunc is an Envelope's ack: the first call marks it processed and queues
// its ack, sent at once when wake (else with the next woken ack).
func (s *Session) ackFunc(channelID string, seq uint64, ended bool) func(wake bool) error {
	var once sync.Once
	var err error
	return func(wake bool) error {
		once.Do(func() {
			err = s.saveProcessed(channelID, seq, ended)
			s.queueAcks(wake, &agentnetv1.AckEntry{ChannelId: channelID, Seq: seq})
		})
		return err
	}
}

// saveProcessed records seq as processed and saves the cursors; the caller
// queues the ack for the hub afterwards (so a crash between the two repeats
// nothing).
func (s *Session) saveProcessed(channelID string, seq uint64, ended bool) error {
	s.persistMu.Lock()
	s.mu.Lock()
	changed := s.trk.markDone(channelID, seq, ended)
	if s.trk.forget(time.Now(), forgetEndedAfter) {
		changed = true
	}
	var snap *CursorState
	if changed {
		snap = s.trk.snapshot(s.agentID)
	}
	s.mu.Unlock()
	var err error
	if snap != nil {
		err = s.store.Save(snap)
	}
	s.persistMu.Unlock()
	return err
}

// forgetEndedAfter is how long an ended channel stays in the cursor state
// after the ack of its end went to the hub (which stores acked cursors within
// a fraction of a second).
const forgetEndedAfter = time.Minute

// queueAcks queues entries together and, when wake, has them sent: at once
// in an Ack frame, or, while the stream's hub reads acks riding in a
// PostBatch, with the next post written within ackWait (else in an Ack frame
// then, or at once when flushAt acks are pending).
func (s *Session) queueAcks(wake bool, entries ...*agentnetv1.AckEntry) {
	s.amu.Lock()
	s.acks = append(s.acks, entries...)
	now := false
	if wake && len(s.acks) > 0 {
		wait := time.Duration(s.ackWait.Load())
		switch {
		case wait <= 0 || len(s.acks) >= s.flushAt:
			now = true
		case s.atimer == nil:
			s.atimer = time.AfterFunc(wait, s.wakeAcks)
		}
	}
	s.amu.Unlock()
	if now {
		s.wakeAcks()
	}
}

// wakeAcks has the ack loop send what is pending.
func (s *Session) wakeAcks() {
	select {
	case s.awake <- struct{}{}:
	default:
	}
}

// takeAcks empties the pending acks (for an Ack frame or a post to carry)
// and disarms the timer that would have sent them.
func (s *Session) takeAcks() []*agentnetv1.AckEntry {
	s.amu.Lock()
	defer s.amu.Unlock()
	entries := s.acks
	s.acks = nil
	if s.atimer != nil {
		s.atimer.Stop()
		s.atimer = nil
	}
	return entries
}

func (s *Session) ackLoop() {
	defer s.wg.Done()
	for {
		select {
		case <-s.awake:
			s.sendAcks()
		case <-s.ctx.Done():
			return
		}
	}
}

// sendAcks sends every queued ack in one frame. Acks that cannot be sent are
// dropped: the hub redelivers those envelopes after a reconnect, and the
// Session then recognises them as processed and acks them again.
func (s *Session) sendAcks() {
	entries := s.takeAcks()
	if len(entries) == 0 {
		return
	}
	st := s.current()
	if st == nil {
		return
	}
	err := st.send(&agentnetv1.ConnectRequest{Frame: &agentnetv1.ConnectRequest_Ack{
		Ack: &agentnetv1.Ack{Entries: entries},
	}})
	if err != nil {
		s.log.Info("agentnet: sending acks failed; they are repeated after the reconnect", "err", err)
		return
	}
	s.ackFrames.Add(1)
	s.acksSent(entries)
}

// acksSent notes that entries reached the stream (in an Ack frame or riding
// in a post's), so ended channels can be forgotten once their end was acked.
func (s *Session) acksSent(entries []*agentnetv1.AckEntry) {
	sent := make(map[string]uint64, len(entries))
	for _, e := range entries {
		sent[e.GetChannelId()] = max(sent[e.GetChannelId()], e.GetSeq())
	}
	now := time.Now()
	s.mu.Lock()
	s.trk.ackSent(sent, now)
	s.mu.Unlock()
}
