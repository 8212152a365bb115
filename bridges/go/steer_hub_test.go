package agentnet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	agentnet "github.com/agent-network/agent-network/bridges/go"
	"github.com/agent-network/agent-network/bridges/go/internal/testhub"
	agentnetv1 "github.com/agent-network/agent-network/gen/go/agentnet/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// partitions is the partition count of the steering tests' store.
const partitions = 8

// dividedReplica is a hub replica of a store whose channels are divided, with
// its operator API.
type dividedReplica struct {
	hub *testhub.Hub
	op  agentnetv1.OperatorServiceClient
	tok string
}

func startDivided(t *testing.T, store string) *dividedReplica {
	t.Helper()
	h := testhub.StartWith(t, "--store", store, "--partitions", strconv.Itoa(partitions),
		"--replica-ttl", "1.5", "--replica-refresh", "0.2")
	tok, err := os.ReadFile(filepath.Join(h.Dir, "hub-operator.token"))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(h.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &dividedReplica{hub: h, op: agentnetv1.NewOperatorServiceClient(conn), tok: strings.TrimSpace(string(tok))}
}

func (r *dividedReplica) status(t *testing.T, ctx context.Context) *agentnetv1.GetStatusResponse {
	t.Helper()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+r.tok)
	st, err := r.op.GetStatus(ctx, &agentnetv1.GetStatusRequest{})
	if err != nil {
		t.Fatalf("GetStatus of %s: %v", r.hub.Addr, err)
	}
	return st
}

// assignment is the partition -> replica id assignment the replicas steer
// their leases towards (hubsvc.core.partition_map.assign, the rendezvous
// hashing every replica computes).
func assignment(t *testing.T, ids ...string) map[int]string {
	t.Helper()
	cmd := exec.Command(testhub.Python(), append([]string{"-c",
		"import json, sys; from hubsvc.core.partition_map import assign; print(json.dumps(assign(int(sys.argv[1]), sys.argv[2:])))",
		strconv.Itoa(partitions)}, ids...)...)
	cmd.Dir = testhub.RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("compute the partition assignment: %v", err)
	}
	var raw map[string]string
	if err := json.Unmarshal(out, &raw); err != nil {
		t.Fatal(err)
	}
	want := map[int]string{}
	for p, id := range raw {
		n, _ := strconv.Atoi(p)
		want[n] = id
	}
	return want
}

// settle waits until each replica holds exactly its share of the partitions
// and both see every partition's holder so; it returns the one holding
// partitions (a channel opened through it is held there) and the other.
func settle(t *testing.T, ctx context.Context, a, b *dividedReplica) (holding, other *dividedReplica) {
	t.Helper()
	want := assignment(t, a.status(t, ctx).GetReplicaId(), b.status(t, ctx).GetReplicaId())
	eventually(t, ctx, "the replicas to settle their partitions", func() bool {
		for _, r := range []*dividedReplica{a, b} {
			st := r.status(t, ctx)
			var held []int32
			for p := range partitions {
				if want[p] == st.GetReplicaId() {
					held = append(held, int32(p))
				}
			}
			owners := st.GetPartitions().GetOwners()
			if !slices.Equal(st.GetPartitions().GetHeld(), held) || len(owners) != partitions {
				return false
			}
			for _, o := range owners {
				if want[int(o.GetPartition())] != o.GetReplicaId() || o.GetAddress() == "" {
					return false
				}
			}
		}
		return true
	})
	if len(a.status(t, ctx).GetPartitions().GetHeld()) > 0 {
		return a, b
	}
	return b, a
}

// holderAddr is the address of the replica holding channelID, as r sees it.
func holderAddr(t *testing.T, ctx context.Context, r *dividedReplica, channelID string) string {
	t.Helper()
	p := int32(crc32.ChecksumIEEE([]byte(channelID)) % partitions)
	for _, o := range r.status(t, ctx).GetPartitions().GetOwners() {
		if o.GetPartition() == p {
			return o.GetAddress()
		}
	}
	t.Fatalf("no replica holds partition %d", p)
	return ""
}

// A member connected through the replica that does not hold its channel is
// moved to the holder by a Redirect and gets every text once, in order,
// while it and the sender keep posting across the move; one that ignores
// redirects stays and gets everything too.
func TestSessionFollowsRedirectToHolder(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 90*time.Second)
	store := testhub.StartRedis(t, 5)
	holding, other := settle(t, ctx, startDivided(t, store), startDivided(t, store))
	fast := agentnet.ConnectOptions{MinBackoff: 50 * time.Millisecond, MaxBackoff: 300 * time.Millisecond}
	alice := register(t, ctx, holding.hub.Addr, "alice")
	cursors := agentnet.NewMemoryCursorStore()
	fast.Cursors = cursors
	bob := newParticipant(t, ctx, other.hub.Addr, "bob", fast)
	stay := fast
	stay.Cursors, stay.IgnoreRedirects = nil, true
	carol := newParticipant(t, ctx, other.hub.Addr, "carol", stay)

	open := func(member string) string {
		var res *agentnet.OpenChannelResult
		eventually(t, ctx, "a conversation with "+member, func() bool { // known at the holder once its feed caught up
			var err error
			res, err = alice.OpenChannel(ctx, agentnet.OpenChannelRequest{Type: "conversation", Targets: []string{member}, WaitUntilOpened: true})
			if err != nil && !agentnet.IsReason(err, agentnet.ReasonNotFound) {
				t.Fatalf("open a conversation with %s: %v", member, err)
			}
			return err == nil
		})
		ch := res.Channel.GetChannelId()
		if got := holderAddr(t, ctx, other, ch); got != holding.hub.Addr {
			t.Fatalf("the conversation with %s is held at %s, not at %s, where it was opened", member, got, holding.hub.Addr)
		}
		return ch
	}
	withBob, withCarol := open("bob"), open("carol")
	// Bob's stream may have moved already (his invite came from the holder):
	// end it, and connect again through the other replica once texts flow,
	// so the move happens while they do.
	if err := bob.s.Close(); err != nil {
		t.Fatal(err)
	}

	// Alice posts into both conversations and bob posts into his over his
	// stream, without pause, while bob's stream moves: every post must
	// succeed (the bridge sends again what the move cut off).
	const texts = 40
	var posters sync.WaitGroup
	errs := make(chan error, 3)
	post := func(c *agentnet.Client, ch, prefix string) {
		posters.Add(1)
		go func() {
			defer posters.Done()
			for i := range texts {
				if _, err := c.PostText(ctx, ch, fmt.Sprintf("%s %d", prefix, i)); err != nil {
					errs <- fmt.Errorf("%s %d: %w", prefix, i, err)
					return
				}
			}
		}()
	}
	post(alice, withBob, "to bob")
	post(alice, withCarol, "to carol")
	post(bob.c, withBob, "from bob")
	// alice's first texts are stored while bob is away: he gets them replayed.
	eventually(t, ctx, "alice's first texts to bob", func() bool {
		envs, err := alice.ReadWalAll(ctx, agentnet.ReadWalRequest{ChannelID: withBob})
		return err == nil && len(envs) > 5
	})
	var err error
	if bob.s, err = bob.c.Connect(ctx, fast); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bob.s.Close() })

	receive := func(p *participant, ch, prefix string) {
		t.Helper()
		var last uint64
		for i := range texts {
			want := fmt.Sprintf("%s %d", prefix, i)
			env := p.next(t, ctx, want, func(e *agentnet.Envelope) bool {
				return e.ChannelID == ch && e.EventType == agentnet.EventText && e.SenderID == alice.AgentID()
			})
			if got := env.Text(); got != want || env.Seq <= last {
				t.Fatalf("%s got %q (seq %d after %d), want %q: every text once, in order", p.c.Name(), got, env.Seq, last, want)
			}
			last = env.Seq
		}
	}
	receive(bob, withBob, "to bob")
	receive(carol, withCarol, "to carol")
	posters.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a post failed: %v", err)
	}

	eventually(t, ctx, "bob's stream to move to the holder", func() bool {
		return bob.s.RedirectedTo() == holding.hub.Addr && bob.s.Connected()
	})
	if n := agentnet.Redirects(bob.s); n != 1 {
		t.Fatalf("bob followed %d redirects, want 1", n)
	}
	if got := carol.s.RedirectedTo(); got != "" || agentnet.Redirects(carol.s) != 0 {
		t.Fatalf("carol, who ignores redirects, was moved to %q", got)
	}
	// Bob's own posts landed once each, in his order.
	env, err := alice.ReadWalAll(ctx, agentnet.ReadWalRequest{ChannelID: withBob})
	if err != nil {
		t.Fatal(err)
	}
	var fromBob []string
	for _, e := range env {
		if e.SenderID == bob.id() && e.EventType == agentnet.EventText {
			fromBob = append(fromBob, e.Text())
		}
	}
	for i, got := range fromBob {
		if want := fmt.Sprintf("from bob %d", i); got != want {
			t.Fatalf("bob's text %d in the WAL is %q, want %q", i, got, want)
		}
	}
	if len(fromBob) != texts {
		t.Fatalf("the WAL holds %d of bob's %d texts", len(fromBob), texts)
	}
	// After the move, bob's stream is on the holder: new texts reach him there.
	said, err := alice.PostText(ctx, withBob, "on the holder now")
	if err != nil {
		t.Fatal(err)
	}
	bob.next(t, ctx, "the text after the move", func(e *agentnet.Envelope) bool { return e.EnvelopeID == said.EnvelopeID })
}
