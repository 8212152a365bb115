package agentnet_test

// Benchmarks of the Go bridge against a real hub (python -m hubsvc, durable
// SQLite WAL), the workloads of bench/hub_bench.py with the lean Python client:
// the request/reply round trip between two agents of a conversation, one-way
// throughput in a conversation (512 posts in flight) and 8-way fan-out of a
// custom event type in a discussion of 9. Only `go test -bench` runs them
// (`make bench-bridges`); `go vet` and `go test` compile them. Each benchmark
// starts its own hub; its setup (hub, registration, channel) is not timed.
// They report their own figures (p50-ms, p99-ms, msgs/s, deliveries/s):
// ns/op is the time per round trip, or per post submitted.

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	agentnet "github.com/agent-network/agent-network/bridges/go"
	"github.com/agent-network/agent-network/bridges/go/internal/testhub"
)

// benchWindow is the most posts in flight in the throughput workloads
// (hub_bench.py --window).
const benchWindow = 512

// benchWarmup is how many round trips run before the timed ones
// (hub_bench.py warms up with min(200, --iterations)).
const benchWarmup = 200

// benchTick is the fan-out workload's custom event type.
const benchTick = "bench.tick"

// benchPeer is one benchmark agent: a registered client and its Session.
type benchPeer struct {
	c *agentnet.Client
	s *agentnet.Session
}

// benchChannel registers n agents on h (each on its own connection, acking
// every envelope it hands out), has the first open a channel of typ with the
// others and waits until it is open. It returns the channel and the agents.
func benchChannel(b *testing.B, ctx context.Context, h *testhub.Hub, n int, typ, tag string) (string, []*benchPeer) {
	b.Helper()
	peers := make([]*benchPeer, n)
	for i := range peers {
		c, err := agentnet.Register(ctx, h.Addr, &agentnet.Passport{Name: tag + "-" + strconv.Itoa(i), Kind: agentnet.KindRemoteAgent}, nil)
		if err != nil {
			b.Fatalf("register %s-%d: %v", tag, i, err)
		}
		b.Cleanup(func() { _ = c.Close() })
		s, err := c.Connect(ctx, agentnet.ConnectOptions{AutoAck: true})
		if err != nil {
			b.Fatalf("connect %s-%d: %v", tag, i, err)
		}
		b.Cleanup(func() { _ = s.Close() })
		peers[i] = &benchPeer{c: c, s: s}
	}
	targets := make([]string, 0, n-1)
	for _, p := range peers[1:] {
		targets = append(targets, p.c.AgentID())
	}
	res, err := peers[0].c.OpenChannel(ctx, agentnet.OpenChannelRequest{Type: typ, Targets: targets, WaitUntilOpened: true})
	if err != nil {
		b.Fatalf("open a %s of %d: %v", typ, n, err)
	}
	return res.Channel.GetChannelId(), peers
}

// benchFailure keeps the first error of the background goroutines.
type benchFailure struct {
	once sync.Once
	err  chan error
}

func newBenchFailure() *benchFailure { return &benchFailure{err: make(chan error, 1)} }

func (f *benchFailure) report(err error) {
	f.once.Do(func() { f.err <- err })
}

// BenchmarkRoundTrip: A posts a text, B answers each text of A's with one of
// its own; one op is A's post until A receives the answer.
func BenchmarkRoundTrip(b *testing.B) {
	h := testhub.Start(b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ch, p := benchChannel(b, ctx, h, 2, "conversation", "go-rtt")
	a, o := p[0], p[1]
	fail := newBenchFailure()
	go func() {
		for env := range o.s.Envelopes() {
			if env.EventType == agentnet.EventText && env.SenderID == a.c.AgentID() {
				go func() {
					if _, err := o.c.PostText(ctx, ch, "pong"); err != nil {
						fail.report(err)
					}
				}()
			}
		}
	}()
	answered := make(chan struct{}, 1)
	go func() {
		for env := range a.s.Envelopes() {
			if env.EventType == agentnet.EventText && env.SenderID == o.c.AgentID() {
				answered <- struct{}{}
			}
		}
	}()
	one := func() time.Duration {
		t0 := time.Now()
		go func() {
			if _, err := a.c.PostText(ctx, ch, "ping"); err != nil {
				fail.report(err)
			}
		}()
		select {
		case <-answered:
		case err := <-fail.err:
			b.Fatal(err)
		case <-ctx.Done():
			b.Fatal("timed out waiting for the answer")
		}
		return time.Since(t0)
	}
	for range benchWarmup {
		one()
	}
	var samples []time.Duration
	for b.Loop() {
		samples = append(samples, one())
	}
	slices.Sort(samples)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(samples[len(samples)/2]), "p50-ms")
	b.ReportMetric(ms(samples[max(0, len(samples)*99/100-1)]), "p99-ms")
}

// oneWay has peers[0] post eventType envelopes with benchWindow of them in
// flight, one per op, while every other peer counts those it receives; once
// the loop ends it waits for the last delivery and returns deliveries per
// second from the first post.
func oneWay(b *testing.B, ctx context.Context, ch string, peers []*benchPeer, eventType string) float64 {
	sender, receivers := peers[0], peers[1:]
	var received atomic.Int64
	wake := make(chan struct{}, 1)
	for _, r := range receivers {
		go func() {
			for env := range r.s.Envelopes() {
				if env.EventType == eventType {
					received.Add(1)
					select {
					case wake <- struct{}{}:
					default:
					}
				}
			}
		}()
	}
	fail := newBenchFailure()
	window := make(chan struct{}, benchWindow)
	posted := 0
	t0 := time.Now()
	for b.Loop() {
		select {
		case window <- struct{}{}:
		case err := <-fail.err:
			b.Fatal(err)
		}
		body := "m" + strconv.Itoa(posted)
		posted++
		go func() {
			defer func() { <-window }()
			env := &agentnet.Envelope{ChannelID: ch, EventType: eventType, EventData: map[string]any{"text": body}}
			if _, err := sender.c.Post(ctx, env); err != nil {
				fail.report(err)
			}
		}()
	}
	b.Logf("posts %d, PostBatch frames %d", posted, agentnet.PostBatchFrames(sender.s))
	want := int64(posted * len(receivers))
	for received.Load() < want {
		select {
		case <-wake:
		case err := <-fail.err:
			b.Fatal(err)
		case <-ctx.Done():
			b.Fatalf("timed out: %d of %d deliveries", received.Load(), want)
		}
	}
	return float64(want) / time.Since(t0).Seconds()
}

// BenchmarkOneWay: one agent posts texts to the other of a conversation.
func BenchmarkOneWay(b *testing.B) {
	h := testhub.Start(b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ch, p := benchChannel(b, ctx, h, 2, "conversation", "go-tput")
	b.ReportMetric(oneWay(b, ctx, ch, p, agentnet.EventText), "msgs/s")
}

// BenchmarkFanOut: one agent of a 9-member discussion posts a custom event
// type, delivered to the 8 others.
func BenchmarkFanOut(b *testing.B) {
	h := testhub.Start(b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ch, p := benchChannel(b, ctx, h, 9, "discussion", "go-fan")
	b.ReportMetric(oneWay(b, ctx, ch, p, benchTick), "deliveries/s")
}
