// Command delegator asks one question to a named agent through the hub's
// Delegate RPC (a one-shot consulting channel) and prints the answer.
//
//	go run ./examples/delegator --hub 127.0.0.1:50051 --target go-consultant "what is up?"
package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	agentnet "github.com/agent-network/agent-network/bridges/go"
)

func main() {
	hub := flag.String("hub", "127.0.0.1:50051", "hub address host:port")
	name := flag.String("name", "", "passport name to register (default: go-delegator-<random>)")
	target := flag.String("target", "", "agent to ask, by name or id (required)")
	prompt := flag.String("prompt", "", "the question (default: the remaining arguments)")
	timeout := flag.Duration("timeout", 60*time.Second, "how long to wait for the answer")
	flag.Parse()
	q := *prompt
	if q == "" {
		q = strings.Join(flag.Args(), " ")
	}
	if *target == "" || q == "" {
		fmt.Fprintln(os.Stderr, "usage: delegator --target NAME [--hub HOST:PORT] QUESTION...")
		os.Exit(2)
	}
	if *name == "" {
		*name = "go-delegator-" + strings.ToLower(rand.Text()[:8])
	}
	answer, err := run(*hub, *name, *target, q, *timeout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "delegator:", err)
		os.Exit(1)
	}
	fmt.Println(answer)
}

func run(hub, name, target, question string, timeout time.Duration) (string, error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := agentnet.Register(ctx, hub, &agentnet.Passport{
		Name: name, Kind: agentnet.KindRemoteAgent, Description: "Go delegator example",
	}, nil)
	if err != nil {
		return "", err
	}
	defer c.Close()
	defer func() {
		// A one-shot identity: remove it again (best effort).
		uctx, ucancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer ucancel()
		_, _ = c.Unregister(uctx)
	}()
	res, err := c.Delegate(ctx, agentnet.DelegateRequest{Target: target, Prompt: question})
	if err != nil {
		return "", err
	}
	return res.Text, nil
}
