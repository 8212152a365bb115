package agentnet_test

import (
	"testing"
	"time"

	agentnet "github.com/agent-network/agent-network/bridges/go"
	"github.com/agent-network/agent-network/bridges/go/internal/testhub"
)

// Unregister retires the identity (its channels close, its name is free); a
// second Unregister on the same Client is a no-op, as the Python SDK's.
func TestUnregisterTwiceIsANoOp(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 60*time.Second)
	h := testhub.Start(t)
	alice := register(t, ctx, h.Addr, "unreg-alice")
	bob := register(t, ctx, h.Addr, "unreg-bob")
	ch, err := alice.OpenChannel(ctx, agentnet.OpenChannelRequest{Type: "conversation", Targets: []string{"unreg-bob"}})
	if err != nil {
		t.Fatal(err)
	}
	closed, err := bob.Unregister(ctx)
	if err != nil || len(closed) != 1 || closed[0] != ch.Channel.GetChannelId() {
		t.Fatalf("first Unregister = %v, %v; want the channel %s closed", closed, err, ch.Channel.GetChannelId())
	}
	again, err := bob.Unregister(ctx)
	if err != nil || len(again) != 0 {
		t.Fatalf("second Unregister = %v, %v; want a no-op", again, err)
	}
	if _, err := alice.DescribeAgent(ctx, "unreg-bob"); !agentnet.IsReason(err, agentnet.ReasonNotFound) {
		t.Fatalf("DescribeAgent of the unregistered name = %v, want NOT_FOUND", err)
	}
}
