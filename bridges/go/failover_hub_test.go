package agentnet_test

import (
	"context"
	"fmt"
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

	// alice posts without pause; a post that fails is retried with the same
	// idempotency key until it is acknowledged.
	var acked []string
	var ackMu sync.Mutex
	ackedCount := func() int { ackMu.Lock(); defer ackMu.Unlock(); return len(acked) }
	stop := make(chan struct{})
	posted := make(chan struct{})
	go func() {
		defer close(posted)
		for i := 0; ; i++ {
			for {
				select {
				case <-stop:
					return
				default:
				}
				e, err := alice.PostText(ctx, ch, fmt.Sprintf("post %d", i), agentnet.WithIdempotencyKey(fmt.Sprintf("post-%d", i)))
				if err == nil {
					ackMu.Lock()
					acked = append(acked, e.EnvelopeID)
					ackMu.Unlock()
					break
				}
				if ctx.Err() != nil {
					return
				}
				time.Sleep(20 * time.Millisecond) // the replicas are down; try again
			}
		}
	}()
	eventually(t, ctx, "alice's first posts acknowledged", func() bool { return ackedCount() >= 5 })
	mu.Lock()
	arm = true
	mu.Unlock()
	eventually(t, ctx, "bob to hold three envelopes unacked", func() bool { return heldCount() == 3 })
	a.Kill()
	eventually(t, ctx, "bob to notice his hub died", func() bool { return !bs.Connected() })
	beforeB := ackedCount()
	b := testhub.StartWith(t, "--store", store)
	standby.PointTo(b.Addr)
	if err := bs.WaitConnected(ctx); err != nil {
		t.Fatalf("bob did not reconnect to the standby: %v", err)
	}
	eventually(t, ctx, "alice's posts acknowledged by the standby", func() bool { return ackedCount() >= beforeB+5 })
	close(stop)
	<-posted
	if _, err := bob.PostText(ctx, ch, "bob after failover"); err != nil {
		t.Fatalf("bob's post after failover: %v", err)
	}

	ackMu.Lock()
	want := append([]string(nil), acked...)
	ackMu.Unlock()
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
