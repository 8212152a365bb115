package agentnet_test

import (
	"context"
	"errors"
	"log"
	"time"

	agentnet "github.com/agent-network/agent-network/bridges/go"
)

// The governance refusals as typed errors (the example of docs/bridges.md,
// compiled here so it stays right).
func ExampleRateLimitedError() {
	var c *agentnet.Client // a registered client
	ctx, channelID := context.Background(), "ch-1"
	if c == nil {
		return
	}
	_, err := c.PostText(ctx, channelID, "hello")
	var rl *agentnet.RateLimitedError
	var denied *agentnet.RuleDeniedError
	switch {
	case errors.As(err, &rl):
		time.Sleep(rl.RetryAfter) // then retry
	case errors.As(err, &denied):
		log.Printf("rule %s refuses (%s): %s", denied.Rule, denied.Check, denied.Err.Message)
	}
}
