package agentnet

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// CursorState is what a Session persists about the envelopes it processed:
// per channel, the cursor (every seq at or below it is processed or was never
// for this agent to see) plus the processed deliveries above it that could
// not be folded into the cursor yet (acked out of order).
type CursorState struct {
	// AgentID is the agent the cursors belong to; a Session refuses a state
	// saved for another agent.
	AgentID string `json:"agent_id,omitempty"`
	// Channels maps channel id to its cursor.
	Channels map[string]ChannelCursor `json:"channels"`
}

// ChannelCursor is the processed position in one channel.
type ChannelCursor struct {
	// Seq is the highest seq with nothing unprocessed at or below it.
	Seq uint64 `json:"seq"`
	// Done lists processed deliveries above Seq as [prev_seq, seq] links of
	// the hub's delivery chain (ascending by seq).
	Done [][2]uint64 `json:"done,omitempty"`
	// EndSeq is the seq of the channel's closed/expired envelope once it was
	// processed (0 while the channel is live). An ended channel is dropped
	// from the state a while after the hub was sent the ack of its end.
	EndSeq uint64 `json:"end_seq,omitempty"`
}

// CursorStore persists a Session's CursorState so a restarted process
// resumes where the previous one stopped. Save is called after every Ack,
// before the ack is sent to the hub; implementations must be safe to call
// from several goroutines (the Session serialises Save calls itself).
type CursorStore interface {
	// Load returns the saved state, or (nil, nil) when nothing was saved yet.
	Load() (*CursorState, error)
	// Save replaces the saved state.
	Save(*CursorState) error
}

// MemoryCursorStore keeps the state in memory: it survives reconnects of one
// process but not a restart. It is the default when ConnectOptions.Cursors
// is nil.
type MemoryCursorStore struct {
	mu    sync.Mutex
	state *CursorState
}

// NewMemoryCursorStore returns an empty in-memory store.
func NewMemoryCursorStore() *MemoryCursorStore { return &MemoryCursorStore{} }

// Load implements CursorStore.
func (m *MemoryCursorStore) Load() (*CursorState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return cloneState(m.state), nil
}

// Save implements CursorStore.
func (m *MemoryCursorStore) Save(s *CursorState) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.state = cloneState(s)
	return nil
}

// FileCursorStore keeps the state in a JSON file, replaced atomically
// (write to a temporary file in the same directory, then rename) so a
// process killed at any moment leaves either the old or the new state.
type FileCursorStore struct {
	// Path is the JSON file.
	Path string
	// Sync, when true, fsyncs the file and its directory on every Save, so
	// the state also survives a power loss (slower). A killed process never
	// loses a completed Save either way.
	Sync bool

	mu sync.Mutex
}

// NewFileCursorStore returns a store backed by the file at path (created on
// the first Save; its directory must exist).
func NewFileCursorStore(path string) *FileCursorStore { return &FileCursorStore{Path: path} }

// Load implements CursorStore. A missing file is an empty state.
func (f *FileCursorStore) Load() (*CursorState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := os.ReadFile(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("agentnet: read cursor file: %w", err)
	}
	var s CursorState
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("agentnet: cursor file %s is not valid: %w", f.Path, err)
	}
	if s.Channels == nil {
		s.Channels = map[string]ChannelCursor{}
	}
	return &s, nil
}

// Save implements CursorStore.
func (f *FileCursorStore) Save(s *CursorState) error {
	if s == nil {
		s = &CursorState{}
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("agentnet: encode cursors: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	dir := filepath.Dir(f.Path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(f.Path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("agentnet: write cursor file: %w", err)
	}
	name := tmp.Name()
	_, werr := tmp.Write(append(b, '\n'))
	if werr == nil && f.Sync {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(name, f.Path)
	}
	if werr != nil {
		_ = os.Remove(name)
		return fmt.Errorf("agentnet: write cursor file: %w", werr)
	}
	if f.Sync {
		if d, err := os.Open(dir); err == nil {
			_ = d.Sync()
			_ = d.Close()
		}
	}
	return nil
}

func cloneState(s *CursorState) *CursorState {
	if s == nil {
		return nil
	}
	out := &CursorState{AgentID: s.AgentID, Channels: make(map[string]ChannelCursor, len(s.Channels))}
	for k, v := range s.Channels {
		v.Done = slices.Clone(v.Done)
		out.Channels[k] = v
	}
	return out
}

// channelTrack is the in-memory processing state of one channel. The hub
// gives every delivery a prev_seq: the previous seq of this agent's chain in
// the channel (envelopes for others and the agent's own posts are not in the
// chain). The cursor moves from prev to seq once a delivery and every one
// before it in the chain are processed, which is exact whatever the arrival
// order (urgent envelopes overtake older ones).
type channelTrack struct {
	cursor   uint64
	next     map[uint64]uint64 // processed links above the cursor: prev -> seq
	done     map[uint64]uint64 // the same links by seq: seq -> prev
	held     map[uint64]uint64 // delivered, not processed yet: seq -> prev
	endSeq   uint64
	endAcked time.Time // when the ack of the end was sent to a live stream
}

// delivery classifies an incoming delivery.
type delivery int

const (
	deliverNew       delivery = iota // hand it out
	deliverProcessed                 // already processed: drop, ack again
	deliverHeld                      // already handed out and not processed yet: drop
)

// tracker holds the per-channel cursors of a Session (guarded by its owner).
type tracker struct {
	chans map[string]*channelTrack
	// base holds the resume cursors from the last Welcome: the starting
	// cursor of channels this process has no state for yet.
	base map[string]uint64
}

func newTracker(s *CursorState) *tracker {
	t := &tracker{chans: map[string]*channelTrack{}, base: map[string]uint64{}}
	if s == nil {
		return t
	}
	for id, c := range s.Channels {
		ct := t.ch(id)
		ct.cursor = c.Seq
		ct.endSeq = c.EndSeq
		for _, l := range c.Done {
			ct.link(l[0], l[1])
		}
		ct.advance()
	}
	return t
}

func (t *tracker) ch(id string) *channelTrack {
	c := t.chans[id]
	if c == nil {
		c = &channelTrack{
			cursor: t.base[id],
			next:   map[uint64]uint64{}, done: map[uint64]uint64{}, held: map[uint64]uint64{},
		}
		t.chans[id] = c
	}
	return c
}

// link records a processed delivery (prev -> seq) above the cursor.
func (c *channelTrack) link(prev, seq uint64) {
	if seq <= c.cursor || prev >= seq {
		return
	}
	prev = max(prev, c.cursor) // a link reaching below the cursor starts at it
	if old, ok := c.next[prev]; ok && old >= seq {
		return
	}
	if old, ok := c.next[prev]; ok {
		delete(c.done, old)
	}
	c.next[prev] = seq
	c.done[seq] = prev
}

// advance follows processed links from the cursor.
func (c *channelTrack) advance() {
	for {
		seq, ok := c.next[c.cursor]
		if !ok {
			return
		}
		delete(c.next, c.cursor)
		delete(c.done, seq)
		c.cursor = seq
	}
}

// jump moves the cursor forward to at least seq (everything at or below it
// is known to be processed), keeping the links above it.
func (c *channelTrack) jump(seq uint64) {
	if seq <= c.cursor {
		return
	}
	c.cursor = seq
	links := c.done
	c.next, c.done = map[uint64]uint64{}, map[uint64]uint64{}
	for s, prev := range links {
		c.link(prev, s)
	}
	for h := range c.held {
		if h <= seq {
			delete(c.held, h)
		}
	}
	c.advance()
}

// classify records a delivery and says what to do with it.
func (t *tracker) classify(channelID string, seq, prev uint64) delivery {
	c := t.ch(channelID)
	if seq <= c.cursor {
		return deliverProcessed
	}
	if _, ok := c.done[seq]; ok {
		return deliverProcessed
	}
	if _, ok := c.held[seq]; ok {
		return deliverHeld
	}
	c.held[seq] = prev
	return deliverNew
}

// release forgets a held delivery without processing it (so a redelivery is
// handed out again).
func (t *tracker) release(channelID string, seq uint64) {
	if c := t.chans[channelID]; c != nil {
		delete(c.held, seq)
	}
}

// markDone records a held delivery as processed; it reports whether the
// state changed.
func (t *tracker) markDone(channelID string, seq uint64, ended bool) bool {
	c := t.chans[channelID]
	if c == nil {
		return false
	}
	prev, ok := c.held[seq]
	if !ok {
		return false // already processed, or covered by a later resume cursor
	}
	delete(c.held, seq)
	changed := false
	if ended && seq > c.endSeq {
		c.endSeq = seq
		changed = true
	}
	if seq > c.cursor {
		c.link(prev, seq)
		c.advance()
		changed = true
	}
	return changed
}

// ackSent notes that acks went out on a live stream (for forgetting ended
// channels later).
func (t *tracker) ackSent(entries map[string]uint64, now time.Time) {
	for id, seq := range entries {
		if c := t.chans[id]; c != nil && c.endSeq > 0 && seq >= c.endSeq && c.endAcked.IsZero() {
			c.endAcked = now
		}
	}
}

// forget drops ended channels whose end was acked to a live stream more
// than grace ago and that have nothing left in flight: the hub stores acked
// cursors within a fraction of a second, so it resumes them correctly
// without our state. It reports whether anything was dropped.
func (t *tracker) forget(now time.Time, grace time.Duration) bool {
	dropped := false
	for id, c := range t.chans {
		if c.endSeq > 0 && c.cursor >= c.endSeq && len(c.held) == 0 && !c.endAcked.IsZero() &&
			now.Sub(c.endAcked) >= grace {
			delete(t.chans, id)
			delete(t.base, id)
			dropped = true
		}
	}
	return dropped
}

// resume folds in Welcome's cursors: per channel, the cursor the hub resumes
// from (ours when we sent one, else its stored one, which only ever covers
// acked or invisible seqs). It reports whether the state changed.
func (t *tracker) resume(cursors map[string]uint64) bool {
	changed := false
	t.base = maps.Clone(cursors)
	if t.base == nil {
		t.base = map[string]uint64{}
	}
	for id, seq := range cursors {
		if c := t.chans[id]; c != nil && seq > c.cursor {
			c.jump(seq)
			changed = true
		}
	}
	return changed
}

// hello returns the resume cursors to send in Hello.
func (t *tracker) hello() map[string]uint64 {
	out := make(map[string]uint64, len(t.chans))
	for id, c := range t.chans {
		if c.cursor > 0 {
			out[id] = c.cursor
		}
	}
	return out
}

// snapshot returns the persistable state.
func (t *tracker) snapshot(agentID string) *CursorState {
	s := &CursorState{AgentID: agentID, Channels: make(map[string]ChannelCursor, len(t.chans))}
	for id, c := range t.chans {
		if c.cursor == 0 && len(c.done) == 0 && c.endSeq == 0 {
			continue
		}
		var done [][2]uint64
		for _, seq := range slices.Sorted(maps.Keys(c.done)) {
			done = append(done, [2]uint64{c.done[seq], seq})
		}
		s.Channels[id] = ChannelCursor{Seq: c.cursor, Done: done, EndSeq: c.endSeq}
	}
	return s
}

// cursors returns every channel's cursor.
func (t *tracker) cursors() map[string]uint64 {
	out := make(map[string]uint64, len(t.chans))
	for id, c := range t.chans {
		out[id] = c.cursor
	}
	return out
}
