package agentnet_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	agentnet "github.com/agent-network/agent-network/bridges/go"
	"github.com/agent-network/agent-network/bridges/go/internal/testhub"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// fastRedial shortens the connection's reconnect backoff so a test does not
// wait out gRPC's growing delay while no replica is up.
var fastRedial = agentnet.WithDialOptions(grpc.WithConnectParams(grpc.ConnectParams{
	Backoff: backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, MaxDelay: 500 * time.Millisecond},
}))

// seenText is one text envelope as bob's handler saw it.
type seenText struct {
	id  string
	seq uint64
}

// A client given two replicas on one Redis store moves to the standby when
// its hub is SIGKILLed mid-load: the handler gets every acknowledged post
// once, in seq order, and posting works again, with no help from the test.
func TestFailoverToStandbyReplica(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 60*time.Second)
	store := testhub.StartRedis(t, 3)
	a := testhub.StartWith(t, "--store", store)
	standby := testhub.Forward(t, "") // replica B's address: nothing answers until B starts
	hubs := agentnet.WithTargets(standby.Addr)
	fast := agentnet.ConnectOptions{MinBackoff: 50 * time.Millisecond, MaxBackoff: 300 * time.Millisecond}

	alice, err := agentnet.Register(ctx, a.Addr, &agentnet.Passport{Name: "alice", Kind: agentnet.KindRemoteAgent}, nil, hubs, fastRedial)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = alice.Close() })
	bob, err := agentnet.Register(ctx, a.Addr, &agentnet.Passport{Name: "bob", Kind: agentnet.KindRemoteAgent}, nil, hubs, fastRedial)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bob.Close() })
	bs, err := bob.Connect(ctx, fast)
	if err != nil {
		t.Fatal(err)
	}
	conv, err := alice.OpenChannel(ctx, agentnet.OpenChannelRequest{Type: "conversation", Targets: []string{"bob"}, WaitUntilOpened: true})
	if err != nil {
		t.Fatal(err)
	}
	ch := conv.Channel.GetChannelId()

	// bob's handler records each text it is handed and acks it, except that
	// once armed it keeps the next three unacked across the failover: the
	// standby replays them (bob's cursor stops below them), and the Session
	// must not hand them out again.
	var mu sync.Mutex
	var seen []seenText
	var held []*agentnet.Envelope
	arm := false
	go func() {
		for env := range bs.Envelopes() {
			mu.Lock()
			text := env.ChannelID == ch && env.EventType == agentnet.EventText && env.SenderID == alice.AgentID()
			if text {
				seen = append(seen, seenText{env.EnvelopeID, env.Seq})
			}
			if text && arm && len(held) < 3 {
				held = append(held, env)
				mu.Unlock()
				continue
			}
			mu.Unlock()
			_ = env.Ack()
		}
	}()
	heldCount := func() int { mu.Lock(); defer mu.Unlock(); return len(held) }

	// Three of alice's goroutines post with PostEnvelope (she has no Session)
	// and bob posts over his Connect stream, each without pause and without
	// retrying: the bridge must carry every post across the failover itself,
	// so a post it fails ends the test. Every text is unique, and no poster
	// gives an idempotency key: the bridge makes one.
	posts := newPostLog()
	stop := make(chan struct{})
	var posters sync.WaitGroup
	poster := func(name string, c *agentnet.Client) {
		posters.Add(1)
		go func() {
			defer posters.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				text := fmt.Sprintf("%s %d", name, i)
				posts.start(name, text)
				e, err := c.PostText(ctx, ch, text)
				if !posts.end(name, text, e, err) {
					return
				}
			}
		}()
	}
	for _, name := range []string{"alice-1", "alice-2", "alice-3"} {
		poster(name, alice)
	}
	poster("bob", bob)
	names := []string{"alice-1", "alice-2", "alice-3", "bob"}
	eventually(t, ctx, "the first posts acknowledged", func() bool { return posts.okCount("") >= 10 })
	mu.Lock()
	arm = true
	mu.Unlock()
	eventually(t, ctx, "bob to hold three envelopes unacked", func() bool { return heldCount() == 3 })
	a.Kill()
	eventually(t, ctx, "bob to notice his hub died", func() bool { return !bs.Connected() })
	// No hub is up: every poster is waiting on a post (in flight at the kill,
	// or sent since) that only the standby can answer.
	var stranded []string
	eventually(t, ctx, "every poster to wait on a post while no hub is up", func() bool {
		stranded = posts.strandedTexts(names)
		return len(stranded) == len(names) || posts.firstErr() != nil
	})
	if err := posts.firstErr(); err != nil {
		t.Fatalf("a post failed while the hub was down (the bridge must retry it): %v", err)
	}
	before := map[string]int{}
	for _, n := range names {
		before[n] = posts.okCount(n)
	}
	b := testhub.StartWith(t, "--store", store)
	standby.PointTo(b.Addr)
	if err := bs.WaitConnected(ctx); err != nil {
		t.Fatalf("bob did not reconnect to the standby: %v", err)
	}
	eventually(t, ctx, "every poster's posts acknowledged by the standby", func() bool {
		if posts.firstErr() != nil {
			return true // reported below
		}
		for _, n := range names {
			if posts.okCount(n) < before[n]+3 {
				return false
			}
		}
		return true
	})
	close(stop)
	posters.Wait()
	if err := posts.firstErr(); err != nil {
		t.Fatalf("a post failed across the failover (the bridge must retry it): %v", err)
	}
	for _, text := range stranded {
		if posts.envelope(text) == nil {
			t.Fatalf("post %q, waiting while no hub was up, was not acknowledged", text)
		}
	}
	if _, err := bob.PostText(ctx, ch, "bob after failover"); err != nil {
		t.Fatalf("bob's post after failover: %v", err)
	}
	posts.checkWAL(t, ctx, alice, ch)

	want := posts.ids("alice-")
	eventually(t, ctx, fmt.Sprintf("bob's handler to see all %d acknowledged posts", len(want)), func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) >= len(want)
	})
	mu.Lock()
	got := append([]seenText(nil), seen...)
	for _, env := range held { // processed at last: bob's cursor moves past them
		if err := env.Ack(); err != nil {
			t.Errorf("ack after failover: %v", err)
		}
	}
	mu.Unlock()
	eventually(t, ctx, "bob's cursor to pass every text", func() bool { return bs.Cursors()[ch] >= got[len(got)-1].seq })
	count := map[string]int{}
	for i, s := range got {
		count[s.id]++
		if i > 0 && s.seq <= got[i-1].seq {
			t.Fatalf("bob's handler saw seq %d after %d", s.seq, got[i-1].seq)
		}
	}
	for id, n := range count {
		if n != 1 {
			t.Fatalf("envelope %s handed to bob %d times", id, n)
		}
	}
	for _, id := range want {
		if count[id] != 1 {
			t.Fatalf("acknowledged envelope %s reached bob's handler %d times", id, count[id])
		}
	}
	if len(got) != len(want) {
		t.Fatalf("bob's handler saw %d texts from alice, %d were acknowledged", len(got), len(want))
	}
	_ = bs.Close()
}

// postLog records the posts of several posters: which is waiting, and what
// the bridge answered.
type postLog struct {
	mu      sync.Mutex
	waiting map[string]string // poster -> text of its post in progress
	ok      map[string]*agentnet.Envelope
	order   []string // texts acknowledged, in order
	poster  map[string]string
	err     error
}

func newPostLog() *postLog {
	return &postLog{waiting: map[string]string{},
		ok: map[string]*agentnet.Envelope{}, poster: map[string]string{}}
}

func (l *postLog) start(poster, text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waiting[poster] = text
	l.poster[text] = poster
}

// end records a post's outcome; false when it failed.
func (l *postLog) end(poster, text string, e *agentnet.Envelope, err error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.waiting, poster)
	if err != nil {
		if l.err == nil {
			l.err = fmt.Errorf("post %q: %w", text, err)
		}
		return false
	}
	l.ok[text] = e
	l.order = append(l.order, text)
	return true
}

// strandedTexts are the posts in progress, one per poster that has one.
func (l *postLog) strandedTexts(posters []string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, p := range posters {
		if text, ok := l.waiting[p]; ok {
			out = append(out, text)
		}
	}
	return out
}

func (l *postLog) firstErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// okCount is how many posts of poster ("": of all) were acknowledged.
func (l *postLog) okCount(poster string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, text := range l.order {
		if poster == "" || l.poster[text] == poster {
			n++
		}
	}
	return n
}

func (l *postLog) envelope(text string) *agentnet.Envelope {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ok[text]
}

// ids are the envelope ids of the acknowledged posts of posters whose name
// starts with prefix.
func (l *postLog) ids(prefix string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, text := range l.order {
		if strings.HasPrefix(l.poster[text], prefix) {
			out = append(out, l.ok[text].EnvelopeID)
		}
	}
	return out
}

// checkWAL reads the channel's WAL and checks that every acknowledged post is
// in it exactly once, by idempotency key and by text, as the envelope the
// bridge returned, and that no post is in it twice.
func (l *postLog) checkWAL(t *testing.T, ctx context.Context, c *agentnet.Client, ch string) {
	t.Helper()
	wal, err := c.ReadWalAll(ctx, agentnet.ReadWalRequest{ChannelID: ch})
	if err != nil {
		t.Fatalf("read the WAL: %v", err)
	}
	byKey := map[string][]*agentnet.Envelope{}
	byText := map[string]int{}
	for _, e := range wal {
		if e.EventType != agentnet.EventText {
			continue
		}
		byKey[e.IdempotencyKey] = append(byKey[e.IdempotencyKey], e)
		byText[e.Text()]++
	}
	for text, n := range byText {
		if n != 1 {
			t.Errorf("post %q is in the WAL %d times", text, n)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for text, e := range l.ok {
		if !strings.HasPrefix(e.IdempotencyKey, "go-") {
			t.Errorf("post %q: the bridge gave it idempotency key %q, want go-<random>", text, e.IdempotencyKey)
		}
		stored := byKey[e.IdempotencyKey]
		if len(stored) != 1 {
			t.Errorf("acknowledged post %q (key %s) is in the WAL %d times", text, e.IdempotencyKey, len(stored))
			continue
		}
		if stored[0].EnvelopeID != e.EnvelopeID || stored[0].Seq != e.Seq || stored[0].Text() != text {
			t.Errorf("post %q: the bridge answered envelope %s seq %d, the WAL holds %s seq %d (%q)",
				text, e.EnvelopeID, e.Seq, stored[0].EnvelopeID, stored[0].Seq, stored[0].Text())
		}
	}
}

// A client whose first address has nothing listening connects to the next.
func TestTargetsSkipDeadAddress(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 30*time.Second)
	h := testhub.Start(t)
	dead := testhub.Forward(t, "")
	c, err := agentnet.Register(ctx, dead.Addr, &agentnet.Passport{Name: "carol", Kind: agentnet.KindRemoteAgent}, nil, agentnet.WithTargets(h.Addr))
	if err != nil {
		t.Fatalf("register through [dead, live]: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	s, err := c.Connect(ctx, agentnet.ConnectOptions{})
	if err != nil {
		t.Fatalf("connect through [dead, live]: %v", err)
	}
	_ = s.Close()
}

// A target list with an entry that is not host:port is refused up front.
func TestTargetsMustBeHostPort(t *testing.T) {
	_, err := agentnet.Dial("127.0.0.1:1", agentnet.Credentials{Credential: "x"}, agentnet.WithTargets("not an address"))
	if !agentnet.IsReason(err, agentnet.ReasonInvalidArgument) {
		t.Fatalf("want INVALID_ARGUMENT, got %v", err)
	}
}

// eventually polls cond until it holds or ctx ends.
func eventually(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
