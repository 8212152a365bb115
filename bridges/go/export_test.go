package agentnet

import "maps"

// BatchFrames is how many Batch frames s received (for tests).
func BatchFrames(s *Session) uint64 { return s.batchFrames.Load() }

// ResumeCursors are the cursors of s's last Welcome (for tests).
func ResumeCursors(s *Session) map[string]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.trk.base)
}

// AckFrames is how many Ack frames s sent (for tests).
func AckFrames(s *Session) uint64 { return s.ackFrames.Load() }

// AckRides is how many post frames s sent with acks riding in them (for tests).
func AckRides(s *Session) uint64 { return s.ackRides.Load() }

// PostBatchFrames is how many PostBatch frames of several posts s sent (for tests).
func PostBatchFrames(s *Session) uint64 { return s.postBatchFrames.Load() }

// HoldWrites keeps s's current stream from writing until release is called,
// so the posts made meanwhile queue up (for tests of the packing).
func HoldWrites(s *Session) (release func()) {
	st := s.current()
	st.sendMu.Lock()
	return st.sendMu.Unlock
}

// QueuedPosts is how many posts wait for s's current stream's writer.
func QueuedPosts(s *Session) int {
	st := s.current()
	st.omu.Lock()
	defer st.omu.Unlock()
	return len(st.outq)
}

// Redirects is how many Redirect frames s followed (for tests).
func Redirects(s *Session) uint64 { return s.redirects.Load() }
