// Command outside-agent is a Go module of its own, outside the agent-network
// repository, built against bridges/go (and the generated gen/go stubs) by the
// one-step recipe of bridges/go/README.md:
//
//	go work init . /path/to/agent-network/bridges/go
//
// It registers, prints {"event":"ready",...}, answers the first text a peer
// sends with "outside-go: <text>" and exits.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	agentnet "github.com/agent-network/agent-network/bridges/go"
	agentnetv1 "github.com/agent-network/agent-network/gen/go/agentnet/v1"
)

func main() {
	hub := flag.String("hub", "127.0.0.1:50051", "hub address host:port")
	name := flag.String("name", "outside-go", "passport name to register")
	flag.Parse()
	if err := run(*hub, *name); err != nil {
		fmt.Fprintln(os.Stderr, "outside-agent:", err)
		os.Exit(1)
	}
}

func run(hub, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := agentnet.Register(ctx, hub, &agentnet.Passport{Name: name, Kind: agentnet.KindRemoteAgent}, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	s, err := c.Connect(ctx, agentnet.ConnectOptions{})
	if err != nil {
		return err
	}
	defer s.Close()
	ready, _ := json.Marshal(map[string]string{
		"event": "ready", "agent_id": s.AgentID(), "service": agentnetv1.HubService_ServiceDesc.ServiceName,
	})
	fmt.Println(string(ready))
	for env := range s.Envelopes() {
		if env.EventType == agentnet.EventText && env.SenderID != s.AgentID() && env.SenderID != agentnet.HubSender {
			if _, err := c.PostText(ctx, env.ChannelID, "outside-go: "+env.Text(), agentnet.WithCausation(env.EnvelopeID)); err != nil {
				return err
			}
			return env.Ack()
		}
		if err := env.Ack(); err != nil {
			return err
		}
	}
	return s.Err()
}
