package agentnet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	agentnetv1 "github.com/agent-network/agent-network/gen/go/agentnet/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// ConnectOptions configure a Session. The zero value is usable.
type ConnectOptions struct {
	// Cursors persists what was processed so a restarted process resumes
	// where it stopped (nil = in memory only; see NewFileCursorStore).
	Cursors CursorStore
	// MaxInFlight is the most deliveries the hub may have sent but not had
	// acked (0 = 256). It bounds the Session's memory.
	MaxInFlight uint32
	// MaxBatch is the most post results and deliveries the hub may pack into
	// one Batch frame (sent as Hello.max_batch; the hub caps it at its
	// --max-batch). 0 = 256; NoBatch asks for a frame per post result and
	// delivery, as before batches existed. Batched or not, every delivery
	// goes through the same dedup, cursors and invite handling, in the
	// hub's order.
	MaxBatch int
	// MaxPostBatch is the most posts the Session packs into one PostBatch
	// frame. Posts made while the stream is busy writing queue up, and the
	// next write sends all of them (never waiting for more) in one frame; a
	// lone post goes as a plain Post. 0 = as many as the hub accepts
	// (Welcome.max_post_batch); NoBatch sends a frame per post. A hub that
	// predates PostBatch (max_post_batch 0) always gets single Posts. Each
	// post still gets its own result or error.
	MaxPostBatch int
	// AutoAck acks every envelope as soon as it is handed out on
	// Envelopes(), instead of waiting for Envelope.Ack. The deliveries of one
	// Batch frame are acked together.
	AutoAck bool
	// AckDelay is how long an ack may wait for a post to carry it, when the
	// hub reads acks riding in a PostBatch (Welcome.post_batch_ack): the acks
	// pending when the Session writes a post go in that post's frame (a lone
	// post then goes as a PostBatch of one), so a reply and the ack of the
	// envelope it answers cost the hub one frame. An ack is sent in an Ack
	// frame of its own once it waited AckDelay without a post, or at once when
	// a quarter of MaxInFlight acks (at least 2) are pending, so the hub's flow
	// control and stored cursors stay close behind. 0 = DefaultAckDelay; a
	// negative value (or a hub that does not read them, or answers
	// max_post_batch 0) sends every ack in an Ack frame at once.
	AckDelay time.Duration
	// OnInvite decides invites addressed to this agent: return true to
	// accept (post ag2.channel.invite_ack), false to reject. nil accepts
	// every invite. It runs on its own goroutine; ctx ends with the Session.
	// Invites are answered by the Session and not sent on Envelopes(); an
	// answer refused with RATE_LIMITED is posted again after its RetryAfter.
	OnInvite func(ctx context.Context, inv *Invite) bool
	// Buffer is the capacity of the Envelopes() channel (0 = 64).
	Buffer int
	// MinBackoff and MaxBackoff bound the reconnect delay, which doubles
	// after each failed attempt and is jittered (0 = 200 ms and 10 s).
	MinBackoff, MaxBackoff time.Duration
	// HandshakeTimeout bounds the wait for Welcome on each attempt (0 = 10 s).
	HandshakeTimeout time.Duration
	// ClientName is sent in Hello for the hub's logs (default ClientName).
	ClientName string
	// Logger receives reconnects and background errors (nil = discard).
	Logger *slog.Logger
	// IgnoreRedirects stops the Session from following the hub's Redirect
	// frames (session steering, docs/scale-out.md): Hello then leaves
	// follows_redirects unset and the hub never sends one, so the stream
	// stays on the configured target. By default (false) a Session follows
	// them: it moves its stream to the replica holding most of the agent's
	// channels, on a connection of its own with the client's settings (see
	// RedirectedTo, RedirectPause). A client made WithConn never follows them.
	IgnoreRedirects bool
}

// NoBatch as ConnectOptions.MaxBatch asks the hub for single frames only;
// as ConnectOptions.MaxPostBatch it sends a frame per post.
const NoBatch = -1

// defaultMaxBatch is ConnectOptions.MaxBatch when it is 0.
const defaultMaxBatch = 256

// DefaultAckDelay is ConnectOptions.AckDelay when it is 0: the longest an ack
// waits for a post to ride in.
const DefaultAckDelay = 5 * time.Millisecond

// errStreamDown means a stream post could not complete on the stream; the
// caller falls back to the unary RPC.
var errStreamDown = errors.New("agentnet: connect stream is down")

// Session is an agent's live Connect stream, kept alive in the background:
// it reconnects with jittered exponential backoff and resumes from its own
// per-channel cursors, answers invites, hands inbound envelopes out on
// Envelopes() (dropping duplicates) and acknowledges them once they were
// processed. Posts made through the Client travel over it while it is up.
type Session struct {
	c     *Client
	opts  ConnectOptions
	store CursorStore
	log   *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex // guards the fields below
	trk       *tracker
	cur       *stream
	agentID   string
	sessionID string
	turns     []PendingTurn
	up        chan struct{} // closed while connected
	err       error
	stopped   bool
	closing   bool
	// storeAgent is the agent the loaded cursor state belongs to ("" = any).
	storeAgent string
	// redirectedTo is the replica a Redirect moved the stream to ("" = the
	// configured target); no Redirect is followed before redirectPausedUntil.
	redirectedTo        string
	redirectPausedUntil time.Time

	persistMu sync.Mutex // serialises cursor saves

	qmu   sync.Mutex
	queue []*Envelope
	qwake chan struct{}

	amu     sync.Mutex
	acks    []*agentnetv1.AckEntry
	awake   chan struct{}
	atimer  *time.Timer  // sends the pending acks once they waited ackWait (nil = not armed)
	ackWait atomic.Int64 // how long an ack may wait for a post on the current stream (ns; 0 = none)
	flushAt int          // pending acks sent at once, without waiting for a post

	out  chan *Envelope
	done chan struct{}
	wg   sync.WaitGroup

	frames          atomic.Uint64 // delivery-carrying frames received (numbers them)
	batchFrames     atomic.Uint64 // Batch frames received (for tests)
	postBatchFrames atomic.Uint64 // PostBatch frames of several posts sent (for tests)
	ackFrames       atomic.Uint64 // Ack frames sent (for tests)
	ackRides        atomic.Uint64 // post frames sent carrying acks (for tests)
	redirects       atomic.Uint64 // Redirects followed (for tests)
}

// stream is one Connect attempt.
type stream struct {
	s         *Session
	bidi      grpc.BidiStreamingClient[agentnetv1.ConnectRequest, agentnetv1.ConnectResponse]
	cancel    context.CancelFunc
	keepalive time.Duration
	started   time.Time
	addr      string // the replica a Redirect named it was opened to ("" = the configured target)
	moving    bool   // ended to follow a Redirect (set before done is closed)
	lastRecv  atomic.Int64
	nonce     atomic.Uint64

	sendMu sync.Mutex

	omu       sync.Mutex    // guards outq
	outq      []*outPost    // posts waiting for the writer (see sendPost)
	postLimit int           // most posts per frame (1 = single Posts)
	ackWait   time.Duration // how long an ack may wait for a post to carry it (0: acks only in Ack frames)

	pmu      sync.Mutex
	pending  map[string]chan *agentnetv1.PostResult
	finished bool

	done chan struct{}
	err  error // set before done is closed
}

// Connect opens the agent's Connect stream and keeps it alive in the
// background until Close. It returns once the hub answered the first Hello
// (retrying transient failures until ctx ends), so a bad credential or a
// cursor store of another agent is reported here. ctx bounds only this first
// handshake. A Client has at most one Session at a time.
func (c *Client) Connect(ctx context.Context, opts ConnectOptions) (*Session, error) {
	if opts.MaxInFlight == 0 {
		opts.MaxInFlight = 256
	}
	if opts.MaxBatch == 0 {
		opts.MaxBatch = defaultMaxBatch
	}
	if opts.AckDelay == 0 {
		opts.AckDelay = DefaultAckDelay
	}
	if opts.Buffer <= 0 {
		opts.Buffer = 64
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 200 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 10 * time.Second
	}
	opts.MaxBackoff = max(opts.MaxBackoff, opts.MinBackoff)
	if opts.HandshakeTimeout <= 0 {
		opts.HandshakeTimeout = 10 * time.Second
	}
	if opts.ClientName == "" {
		opts.ClientName = ClientName
	}
	store := opts.Cursors
	if store == nil {
		store = NewMemoryCursorStore()
	}
	state, err := store.Load()
	if err != nil {
		return nil, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Session{
		c: c, opts: opts, store: store, log: logger,
		trk:   newTracker(state),
		up:    make(chan struct{}),
		qwake: make(chan struct{}, 1),
		awake: make(chan struct{}, 1),
		out:   make(chan *Envelope, opts.Buffer),
		done:  make(chan struct{}),
		// Half of max_in_flight pending means the hub may soon stall; a quarter
		// sends them well before. A lone ack may always wait for a post.
		flushAt: max(2, int(opts.MaxInFlight)/4),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())

	c.mu.Lock()
	switch {
	case c.closed:
		c.mu.Unlock()
		s.cancel()
		return nil, ErrClosed
	case c.session != nil:
		c.mu.Unlock()
		s.cancel()
		return nil, errors.New("agentnet: this client already has a Session; Close it first")
	}
	c.session = s
	c.mu.Unlock()

	fail := func(err error) (*Session, error) {
		s.cancel()
		c.mu.Lock()
		if c.session == s {
			c.session = nil
		}
		c.mu.Unlock()
		return nil, err
	}
	if state != nil && state.AgentID != "" {
		if id := c.AgentID(); id != "" && id != state.AgentID {
			return fail(storeMismatch(state.AgentID, id))
		}
		s.storeAgent = state.AgentID
	}
	s.wg.Add(2)
	go s.dispatch()
	go s.ackLoop()
	go s.reap()
	st, err := s.dialRetry(ctx)
	if err != nil {
		s.shutdown(nil)
		<-s.done
		return fail(err)
	}
	s.spawn(func() { s.run(st) })
	return s, nil
}

// Envelopes is where inbound envelopes arrive, in the order the hub sent
// them, each once per process. Ack each one after processing it (unless
// AutoAck). The channel is closed when the Session ends.
func (s *Session) Envelopes() <-chan *Envelope { return s.out }

// Done is closed when the Session has ended (Close, or a permanent error).
func (s *Session) Done() <-chan struct{} { return s.done }

// Err is why the Session ended on its own (nil while running and after a
// plain Close): e.g. an UNAUTHENTICATED *Error, or ErrSessionReplaced.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// AgentID is the authenticated agent (from Welcome).
func (s *Session) AgentID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.agentID
}

// SessionID is the hub's id of the current stream ("" while disconnected
// before the first Welcome).
func (s *Session) SessionID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessionID
}

// PendingTurn is a turn a channel awaited from this agent when its current
// stream began (Welcome.pending_turns): the channel's adapter expects the
// agent to speak next and it has not answered the envelope EnvelopeID (seq
// Seq). Read it with ReadWal (FromSeq = UntilSeq = Seq) when it is not also
// replayed (Seq at or below the channel's resume cursor), answer it once.
type PendingTurn struct {
	ChannelID  string
	Seq        uint64
	EnvelopeID string
}

// PendingTurns lists the turns the hub's Welcome of the current stream named
// (at most 1000; see docs/hub.md "Pending turns"). Deliveries of those whose
// Seq lies above the resume cursor arrive as replays too: drop the second
// sighting by envelope id.
func (s *Session) PendingTurns() []PendingTurn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]PendingTurn(nil), s.turns...)
}

// Connected reports whether a stream is up right now.
func (s *Session) Connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur != nil
}

// WaitConnected blocks until a stream is up, the Session ends or ctx ends.
func (s *Session) WaitConnected(ctx context.Context) error {
	s.mu.Lock()
	up := s.up
	s.mu.Unlock()
	select {
	case <-up:
		return nil
	case <-s.done:
		if err := s.Err(); err != nil {
			return err
		}
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Cursors returns the current per-channel cursors: every seq at or below a
// channel's cursor was processed (or was not for this agent to see).
func (s *Session) Cursors() map[string]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.trk.cursors()
}

// Close flushes pending acks, ends the stream gracefully and stops every
// goroutine of the Session. Envelopes handed out but not yet acked are
// redelivered to the next Session. It is safe to call more than once.
func (s *Session) Close() error {
	s.mu.Lock()
	already := s.closing
	s.closing = true
	st := s.cur
	s.mu.Unlock()
	if !already && st != nil {
		s.sendAcks()
		st.sendMu.Lock()
		_ = st.bidi.CloseSend()
		st.sendMu.Unlock()
		select { // let the hub read the acks and end the stream
		case <-st.done:
		case <-time.After(2 * time.Second):
		}
	}
	s.shutdown(nil)
	<-s.done
	return nil
}

// ---- lifecycle -----------------------------------------------------------------

// spawn runs fn on a tracked goroutine unless the Session is stopping.
func (s *Session) spawn(fn func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn()
	}()
	return true
}

// shutdown records why the Session ends (first error wins) and stops it.
func (s *Session) shutdown(err error) {
	s.mu.Lock()
	if err != nil && s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	s.cancel()
}

// reap waits for every goroutine, then closes Envelopes() and Done().
func (s *Session) reap() {
	<-s.ctx.Done()
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.wg.Wait()
	close(s.out)
	s.c.mu.Lock()
	if s.c.session == s {
		s.c.session = nil
	}
	s.c.mu.Unlock()
	close(s.done)
}

func (s *Session) current() *stream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// run waits for the current stream to end and reconnects.
func (s *Session) run(st *stream) {
	for {
		select {
		case <-st.done:
		case <-s.ctx.Done():
			return
		}
		err := st.err
		s.mu.Lock()
		if s.cur == st {
			s.cur = nil
			s.up = make(chan struct{})
		}
		closing := s.closing
		s.mu.Unlock()
		if closing || s.ctx.Err() != nil {
			return
		}
		if isReplaced(err) {
			s.log.Warn("agentnet: stream replaced by a newer one; stopping", "err", err)
			s.shutdown(fmt.Errorf("%w: %w", ErrSessionReplaced, err))
			return
		}
		if permanent(err) {
			s.log.Error("agentnet: stream ended permanently", "err", err)
			s.shutdown(err)
			return
		}
		if st.moving { // to the replica the Redirect named, at once
			s.log.Info("agentnet: moving the stream", "to", s.RedirectedTo())
		} else {
			s.log.Info("agentnet: stream lost; reconnecting", "err", err)
			if time.Since(st.started) < time.Second && !s.sleep(s.jitter(s.opts.MinBackoff)) {
				return
			}
		}
		next, err := s.dialRetry(s.ctx)
		if err != nil {
			if s.ctx.Err() == nil {
				s.shutdown(err)
			}
			return
		}
		st = next
	}
}

func (s *Session) jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d/2 + rand.N(d/2+1)
}

// sleep waits d or until the Session stops (false then).
func (s *Session) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.ctx.Done():
		return false
	}
}

// dialRetry connects, retrying transient failures with backoff until ctx or
// the Session ends.
func (s *Session) dialRetry(ctx context.Context) (*stream, error) {
	backoff := s.opts.MinBackoff
	for {
		st, err := s.dial(ctx)
		if err == nil {
			return st, nil
		}
		if ctx.Err() == nil && s.ctx.Err() == nil && s.abandonRedirect(err) {
			continue // to the configured target, at once
		}
		if permanent(err) {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, FromStatus(ctx.Err())
		}
		if s.ctx.Err() != nil {
			return nil, ErrClosed
		}
		s.log.Info("agentnet: connect failed; retrying", "err", err, "in", backoff)
		t := time.NewTimer(s.jitter(backoff))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, FromStatus(ctx.Err())
		case <-s.ctx.Done():
			t.Stop()
			return nil, ErrClosed
		}
		backoff = min(backoff*2, s.opts.MaxBackoff)
	}
}

// dial makes one Connect attempt: Hello, Welcome, then the stream runs.
func (s *Session) dial(ctx context.Context) (*stream, error) {
	hub, addr, err := s.streamHub()
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(s.ctx)
	bidi, err := hub.Connect(s.c.AuthContext(sctx))
	if err != nil {
		cancel()
		return nil, FromStatus(err)
	}
	s.mu.Lock()
	cursors := s.trk.hello()
	s.mu.Unlock()
	hello := &agentnetv1.ConnectRequest{Frame: &agentnetv1.ConnectRequest_Hello{Hello: &agentnetv1.Hello{
		Credential:  s.c.Credentials().Credential,
		Cursors:     cursors,
		MaxInFlight: s.opts.MaxInFlight,
		MaxBatch:    uint32(max(s.opts.MaxBatch, 0)),
		ClientName:  s.opts.ClientName,
		// Steering (docs/scale-out.md "Session steering"); see follow.
		FollowsRedirects: s.followsRedirects(),
	}}}
	stopAfter := context.AfterFunc(ctx, cancel)
	timer := time.AfterFunc(s.opts.HandshakeTimeout, cancel)
	var first *agentnetv1.ConnectResponse
	if err = bidi.Send(hello); err == nil || errors.Is(err, io.EOF) {
		first, err = bidi.Recv() // on io.EOF from Send, Recv has the real status
	}
	timer.Stop()
	stopAfter()
	if err != nil {
		cancel()
		if errors.Is(err, io.EOF) {
			return nil, &Error{Code: codes.Unavailable, Message: "the hub ended the stream before Welcome"}
		}
		return nil, FromStatus(err)
	}
	welcome := first.GetWelcome()
	if welcome == nil {
		cancel()
		return nil, &Error{Code: codes.Internal, Message: "the hub's first Connect frame was not Welcome"}
	}
	s.c.setAgentID(welcome.GetAgentId())
	if s.storeAgent != "" && welcome.GetAgentId() != s.storeAgent {
		cancel()
		return nil, storeMismatch(s.storeAgent, welcome.GetAgentId())
	}

	st := &stream{
		s: s, bidi: bidi, cancel: cancel, started: time.Now(), addr: addr,
		keepalive: time.Duration(welcome.GetKeepaliveSeconds()) * time.Second,
		postLimit: postLimit(welcome.GetMaxPostBatch(), s.opts.MaxPostBatch),
		ackWait:   ackWait(welcome, s.opts.AckDelay),
		pending:   map[string]chan *agentnetv1.PostResult{},
		done:      make(chan struct{}),
	}
	st.lastRecv.Store(time.Now().UnixNano())

	s.persistMu.Lock()
	s.mu.Lock()
	s.agentID = welcome.GetAgentId()
	s.sessionID = welcome.GetSessionId()
	s.turns = s.turns[:0:0]
	for _, t := range welcome.GetPendingTurns() {
		s.turns = append(s.turns, PendingTurn{ChannelID: t.GetChannelId(), Seq: t.GetSeq(), EnvelopeID: t.GetEnvelopeId()})
	}
	var snap *CursorState
	if s.trk.resume(welcome.GetCursors()) {
		snap = s.trk.snapshot(s.agentID)
	}
	s.cur = st
	s.ackWait.Store(int64(st.ackWait))
	close(s.up)
	s.mu.Unlock()
	if snap != nil {
		if err := s.store.Save(snap); err != nil {
			s.log.Error("agentnet: saving cursors failed", "err", err)
		}
	}
	s.persistMu.Unlock()

	if !s.spawn(st.recvLoop) {
		cancel()
		return nil, ErrClosed
	}
	s.spawn(st.keepaliveLoop)
	return st, nil
}

// ackWait is how long an ack may wait for a post to ride in on a stream
// whose hub said welcome: delay when the hub reads acks in a PostBatch, 0
// (acks only in Ack frames) for an older hub, one that takes no PostBatch, or
// a negative delay.
func ackWait(welcome *agentnetv1.Welcome, delay time.Duration) time.Duration {
	if !welcome.GetPostBatchAck() || welcome.GetMaxPostBatch() == 0 || delay < 0 {
		return 0
	}
	return delay
}

// storeMismatch is the error for a cursor store saved by another agent.
func storeMismatch(storeAgent, agent string) error {
	return &Error{Code: codes.FailedPrecondition, Reason: ReasonFailedPrecondition, Message: fmt.Sprintf(
		"the cursor store belongs to agent %s, not %s; use one store per agent", storeAgent, agent)}
}

// permanent reports errors a reconnect cannot fix.
func permanent(err error) bool {
	if errors.Is(err, ErrClosed) {
		return true
	}
	e, ok := AsError(err)
	if !ok {
		return false
	}
	switch e.Code {
	case codes.Unauthenticated, codes.PermissionDenied, codes.InvalidArgument, codes.FailedPrecondition,
		codes.Unimplemented, codes.NotFound:
		return true
	}
	return false
}

// isReplaced recognises the hub ending a stream because a newer Connect of
// the same agent took over: reason SUPERSEDED (hubs before that reason sent
// UNAVAILABLE with the same message, still recognised by its text).
func isReplaced(err error) bool {
	e, ok := AsError(err)
	if !ok {
		return false
	}
	return e.Reason == ReasonSuperseded ||
		(e.Code == codes.Unavailable && strings.Contains(e.Message, "replaced by a newer Connect stream"))
}
