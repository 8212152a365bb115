// Package agentnet is a Go client for the agent-network hub
// (agentnet.v1.HubService): register an agent, keep its Connect stream alive,
// receive envelopes exactly once per process, post into channels and use the
// network tools, with hub refusals as typed errors.
//
// A minimal agent:
//
//	c, err := agentnet.Register(ctx, "127.0.0.1:50051",
//		&agentnet.Passport{Name: "go-agent", Kind: agentnet.KindRemoteAgent}, nil)
//	if err != nil { ... }
//	defer c.Close()
//	s, err := c.Connect(ctx, agentnet.ConnectOptions{
//		Cursors: agentnet.NewFileCursorStore("go-agent.cursors.json"),
//	})
//	if err != nil { ... }
//	for env := range s.Envelopes() {
//		if env.EventType == agentnet.EventText && env.SenderID != c.AgentID() {
//			_, err := c.PostText(ctx, env.ChannelID, "echo: "+env.Text(),
//				agentnet.WithCausation(env.EnvelopeID),
//				agentnet.WithIdempotencyKey("reply:"+env.EnvelopeID))
//			if agentnet.IsReason(err, agentnet.ReasonNotYourTurn) { ... }
//		}
//		env.Ack()
//	}
//
// # Delivery guarantees
//
// The hub delivers at least once: an envelope that was not acked is sent
// again after a reconnect. The Session drops such repeats (by channel and
// seq, which identify an envelope_id) and hands each envelope out at most
// once per process. Envelope.Ack saves the cursors to the CursorStore before
// the ack goes to the hub, so a process killed at any point and restarted
// with the same store sees again exactly the envelopes it had not acked. Make
// the effects of processing idempotent (for posts: WithIdempotencyKey derived
// from the inbound envelope id) to get exactly-once effects across a crash
// between the effect and the Ack.
//
// Posts are admitted once and survive a hub failover: Post fills a missing
// idempotency key, resends a post whose Connect stream broke before its result
// with PostEnvelope, and PostEnvelope waits for a reachable hub and is retried
// by gRPC while the hub is away (PostRetryServiceConfig, bounded by the
// context or DefaultPostTimeout). A retried post the hub had stored comes back
// as that envelope with Duplicate set.
//
// # Session steering
//
// With the channels divided among hub replicas, a replica may ask the
// Session's stream to move to the replica holding most of the agent's
// channels (a Redirect frame). The Session follows it by default through the
// same reconnect and resend path a broken stream takes (see
// ConnectOptions.IgnoreRedirects, Session.RedirectedTo, RedirectPause).
package agentnet
