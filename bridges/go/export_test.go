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
