// Command consulting_agent is a Go agent on the agent-network hub: it
// registers as a remote agent (or reuses saved credentials), accepts every
// invite and answers every text message from a peer with a deterministic
// reply: "go-agent: " followed by the message reversed and uppercased. In a
// consulting channel that is the single reply to the question. It registers
// with A2A enabled (skill "reversal"), so it also answers InvokeAgent calls:
// an A2A call is a consulting question, and a plain reply completes it.
//
// It prints one JSON object per line on stdout: {"event":"ready",...} once
// connected, then "recv" when an envelope is handed to it and "done" after
// it was processed and acked. With --cursor-file it resumes after a restart
// (even after SIGKILL) exactly where it stopped; its credentials are kept
// next to the cursor file so the restarted process is the same agent.
//
//	go run ./examples/consulting_agent --hub 127.0.0.1:50051 --name go-consultant --cursor-file /tmp/go-consultant.json
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	agentnet "github.com/agent-network/agent-network/bridges/go"
)

// Answer is the agent's deterministic reply to a question.
func Answer(question string) string {
	r := []rune(question)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return "go-agent: " + strings.ToUpper(string(r))
}

var outMu sync.Mutex

func emit(fields map[string]any) {
	b, err := json.Marshal(fields)
	if err != nil {
		return
	}
	outMu.Lock()
	defer outMu.Unlock()
	_, _ = os.Stdout.Write(append(b, '\n'))
}

func emitEnvelope(event string, env *agentnet.Envelope) {
	fields := map[string]any{
		"event": event, "channel": env.ChannelID, "seq": env.Seq, "id": env.EnvelopeID,
		"type": env.EventType, "sender": env.SenderID, "text": env.Text(), "replay": env.Replay,
	}
	if d, ok := agentnet.A2ADispatchOf(env); ok {
		fields["a2a_execution"] = d.ExecutionID
	}
	emit(fields)
}

func main() {
	hub := flag.String("hub", "127.0.0.1:50051", "hub address host:port")
	name := flag.String("name", "go-consultant", "passport name to register")
	cursorFile := flag.String("cursor-file", "", "file keeping the processed cursors (empty = in memory only)")
	credFile := flag.String("credential-file", "", "file keeping the agent's credentials (default: <cursor-file>.credential)")
	delay := flag.Duration("delay", 0, "simulated processing time per message")
	verbose := flag.Bool("v", false, "log reconnects and background errors to stderr")
	flag.Parse()
	if err := run(*hub, *name, *cursorFile, *credFile, *delay, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "consulting_agent:", err)
		os.Exit(1)
	}
}

func connectClient(ctx context.Context, hub, name, credFile string) (*agentnet.Client, error) {
	if credFile != "" {
		creds, err := agentnet.LoadCredentials(credFile)
		switch {
		case err == nil:
			return agentnet.Dial(hub, creds)
		case !errors.Is(err, fs.ErrNotExist):
			return nil, err
		}
	}
	c, err := agentnet.Register(ctx, hub, &agentnet.Passport{
		Name:        name,
		Kind:        agentnet.KindRemoteAgent,
		Description: "Go consulting agent: answers with the question reversed and uppercased",
	}, &agentnet.Resume{ClaimedCapabilities: []string{"reversal"}, Summary: "A deterministic Go bridge agent."},
		agentnet.WithA2A(&agentnet.A2ASettings{
			Enabled: true, Description: "Reverses and uppercases the message", Skills: []string{"reversal"},
			InputModes: []string{"text"},
		}))
	if err != nil {
		return nil, err
	}
	if credFile != "" {
		if err := agentnet.SaveCredentials(credFile, c.Credentials()); err != nil {
			_ = c.Close()
			return nil, err
		}
	}
	return c, nil
}

func run(hub, name, cursorFile, credFile string, delay time.Duration, verbose bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if credFile == "" && cursorFile != "" {
		credFile = cursorFile + ".credential"
	}
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := connectClient(startCtx, hub, name, credFile)
	if err != nil {
		return err
	}
	defer c.Close()

	opts := agentnet.ConnectOptions{}
	if cursorFile != "" {
		opts.Cursors = agentnet.NewFileCursorStore(cursorFile)
	}
	if verbose {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	s, err := c.Connect(startCtx, opts)
	if err != nil {
		return err
	}
	emit(map[string]any{"event": "ready", "agent_id": s.AgentID(), "name": c.Name(), "session_id": s.SessionID()})
	go func() {
		<-ctx.Done()
		_ = s.Close()
	}()

	me := s.AgentID()
	for env := range s.Envelopes() {
		emitEnvelope("recv", env)
		if env.EventType == agentnet.EventText && env.SenderID != me && env.SenderID != agentnet.HubSender {
			if delay > 0 {
				time.Sleep(delay)
			}
			if !reply(ctx, c, env) {
				continue // shutting down: leave it unacked, the next run gets it again
			}
		}
		if err := env.Ack(); err != nil {
			fmt.Fprintln(os.Stderr, "consulting_agent: ack:", err)
			continue
		}
		emitEnvelope("done", env)
	}
	if err := s.Err(); err != nil {
		return err
	}
	return nil
}

// reply answers env, retrying while the hub is unreachable. The idempotency
// key derived from the question makes a repeat (after a crash between the
// reply and the ack) return the first reply instead of posting a second one.
// It reports false when the process is stopping before the reply was made.
func reply(ctx context.Context, c *agentnet.Client, env *agentnet.Envelope) bool {
	backoff := 100 * time.Millisecond
	for {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		res, err := c.PostText(pctx, env.ChannelID, Answer(env.Text()),
			agentnet.WithCausation(env.EnvelopeID),
			agentnet.WithIdempotencyKey("reply:"+env.EnvelopeID))
		cancel()
		if err == nil {
			emit(map[string]any{"event": "replied", "channel": env.ChannelID, "to": env.EnvelopeID,
				"id": res.EnvelopeID, "seq": res.Seq, "duplicate": res.Duplicate})
			return true
		}
		if reason := agentnet.ReasonFor(err); reason != "" {
			// The hub refused (e.g. CHANNEL_CLOSED, NOT_YOUR_TURN): nothing to retry.
			emit(map[string]any{"event": "refused", "channel": env.ChannelID, "to": env.EnvelopeID,
				"reason": reason, "message": err.Error()})
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 5*time.Second)
	}
}
