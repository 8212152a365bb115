package agentnet_test

import (
	"errors"
	"iter"
	"strconv"
	"strings"
	"testing"
	"time"

	agentnet "github.com/agent-network/agent-network/bridges/go"
	"github.com/agent-network/agent-network/bridges/go/internal/testhub"
	"google.golang.org/grpc"
)

// A ReadWal follower that stops reading is cut by a real hub with
// INBOX_FULL (cause slow_consumer): the bridge surfaces it as an
// *InboxFullError whose metadata says where to resume.
func TestStalledWalFollowerGetsInboxFullError(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 90*time.Second)
	h := testhub.StartWith(t, "--max-stream-buffer-bytes", "262144")
	alice := register(t, ctx, h.Addr, "stall-alice")
	// Fixed flow-control windows (no BDP growth), so the hub's buffer, not the
	// client's, is what fills while the follower does not read.
	bob, err := agentnet.Register(ctx, h.Addr, remote("stall-bob"), nil, agentnet.WithDialOptions(
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10)))
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	s, err := bob.Connect(ctx, agentnet.ConnectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ch, err := alice.OpenChannel(ctx, agentnet.OpenChannelRequest{Type: "conversation", Targets: []string{bob.AgentID()}, WaitUntilOpened: true})
	if err != nil {
		t.Fatal(err)
	}
	cid := ch.Channel.GetChannelId()
	next, stop := iter.Pull2(bob.ReadWal(ctx, agentnet.ReadWalRequest{ChannelID: cid, Follow: true}))
	defer stop()
	if _, err, ok := next(); !ok || err != nil { // the stream is open; nothing is read after this
		t.Fatalf("first WAL item: %v %v", ok, err)
	}
	pad := strings.Repeat("x", 48<<10)
	var last string
	for i := range 400 { // ~19 MB: far beyond the flow-control windows and the hub's 256 KiB budget
		env, err := alice.Post(ctx, &agentnet.Envelope{ChannelID: cid, EventType: "myapp.note",
			EventData: map[string]any{"i": i, "pad": pad}})
		if err != nil {
			t.Fatalf("post %d: %v", i, err)
		}
		last = env.EnvelopeID
	}
	for {
		env, err, ok := next()
		if !ok {
			t.Fatal("the follow stream ended without an error")
		}
		if err != nil {
			var full *agentnet.InboxFullError
			if !errors.As(err, &full) || !errors.Is(err, agentnet.ErrInboxFull) || full.Recipient != "" {
				t.Fatalf("not an InboxFullError: %v", err)
			}
			if _, perr := strconv.ParseUint(full.Err.Metadata["resume_from_seq"], 10, 64); perr != nil {
				t.Fatalf("resume_from_seq %q", full.Err.Metadata["resume_from_seq"])
			}
			return
		}
		if env.EnvelopeID == last {
			t.Fatal("the hub kept queueing for a WAL follower that did not read")
		}
	}
}
