// Command discussion_participant is a Go participant in discussion channels
// (strict round robin). The Session accepts every invite; whenever the hub
// expects this agent to speak it posts one deterministic line
//
//	go-agent round N: <name> heard "<what the previous speaker said>"
//
// After every text (and after ag2.channel.opened: an initiator without a seed
// message speaks first) it asks the hub whose turn it is
// (DescribeChannel.ExpectedNext) and answers only when it is expected and the
// envelope in hand is the channel's latest (ChannelMetadata.last_seq), so it
// never posts out of turn and each line answers the text right before it. (A
// participant never receives its own posts, so it cannot count turns from
// deliveries alone.) This mirrors bridges/ts/examples/discussion_participant.ts.
//
// With --demo-refusals it does not take turns: in every discussion it joins it
// posts once as someone else (the channel's initiator) and once out of turn,
// and prints the hub's refusals, to show what a bridge gets back.
//
// It prints one JSON object per line on stdout: "ready" once connected,
// "said" for every line posted, "refused" for every refusal, "ended" when a
// discussion closed.
//
//	go run ./examples/discussion_participant --hub 127.0.0.1:50051 --name go-panelist --channels 1
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	agentnet "github.com/agent-network/agent-network/bridges/go"
)

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

// LineFor is the deterministic line for a turn: turns is the number of turns
// already taken in the channel, participants the channel's size, heard the
// text answered ("" for the opening).
func LineFor(name string, turns, participants int, heard string) string {
	round := turns/max(participants, 1) + 1
	quote := "the opening"
	if heard != "" {
		if r := []rune(heard); len(r) > 60 {
			heard = string(r[:57]) + "..."
		}
		quote = fmt.Sprintf("%q", heard)
	}
	return fmt.Sprintf("go-agent round %d: %s heard %s", round, name, quote)
}

func main() {
	hub := flag.String("hub", "127.0.0.1:50051", "hub address host:port")
	name := flag.String("name", "go-panelist", "passport name to register")
	cursorFile := flag.String("cursor-file", "", "file keeping the processed cursors (empty = in memory only)")
	channels := flag.Int("channels", 0, "exit after this many discussions ended (0 = run until SIGINT/SIGTERM)")
	demo := flag.Bool("demo-refusals", false, "instead of taking turns, post as someone else and out of turn and print the refusals")
	flag.Parse()
	if err := run(*hub, *name, *cursorFile, *channels, *demo); err != nil {
		fmt.Fprintln(os.Stderr, "discussion_participant:", err)
		os.Exit(1)
	}
}

func run(hub, name, cursorFile string, channels int, demo bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := agentnet.Register(startCtx, hub, &agentnet.Passport{
		Name: name, Kind: agentnet.KindRemoteAgent, Description: "Go discussion participant (example)",
	}, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	opts := agentnet.ConnectOptions{}
	if cursorFile != "" {
		opts.Cursors = agentnet.NewFileCursorStore(cursorFile)
	}
	s, err := c.Connect(startCtx, opts)
	if err != nil {
		return err
	}
	emit(map[string]any{"event": "ready", "agent_id": s.AgentID(), "name": c.Name()})
	go func() {
		<-ctx.Done()
		_ = s.Close()
	}()

	p := &participant{c: c, me: s.AgentID(), name: name, demo: demo, discussions: map[string]bool{}}
	ended := 0
	for env := range s.Envelopes() {
		done, err := p.handle(ctx, env)
		if err != nil {
			if ctx.Err() != nil {
				break // shutting down: leave it unacked, a restart gets it again
			}
			fmt.Fprintln(os.Stderr, "discussion_participant:", err)
		}
		if err := env.Ack(); err != nil {
			fmt.Fprintln(os.Stderr, "discussion_participant: ack:", err)
		}
		if done {
			ended++
			if channels > 0 && ended >= channels {
				return s.Close()
			}
		}
	}
	return s.Err()
}

type participant struct {
	c           *agentnet.Client
	me, name    string
	demo        bool
	discussions map[string]bool // channels known to be discussions
}

// handle processes one envelope; done reports that a discussion ended.
func (p *participant) handle(ctx context.Context, env *agentnet.Envelope) (done bool, err error) {
	switch env.EventType {
	case agentnet.EventClosed, agentnet.EventExpired:
		if !p.discussions[env.ChannelID] {
			return false, nil
		}
		emit(map[string]any{"event": "ended", "channel": env.ChannelID, "reason": env.String("reason")})
		return true, nil
	case agentnet.EventOpened, agentnet.EventText, agentnet.EventPacket:
	default:
		return false, nil
	}
	info, err := p.c.DescribeChannel(ctx, env.ChannelID)
	if err != nil {
		return false, err
	}
	if info.Channel.GetType() != "discussion" {
		return false, nil
	}
	p.discussions[env.ChannelID] = true
	if p.demo {
		if env.EventType == agentnet.EventOpened {
			p.demoRefusals(ctx, env.ChannelID, info)
		}
		return false, nil
	}
	if !slices.Contains(info.ExpectedNext, p.me) || info.Channel.GetLastSeq() != env.Seq {
		return false, nil // not our turn, or a newer envelope is on its way and will trigger the answer
	}
	turns := 0
	if n, ok := info.AdapterState["turns"].(json.Number); ok {
		if v, err := n.Int64(); err == nil {
			turns = int(v)
		}
	}
	heard := ""
	if env.EventType != agentnet.EventOpened {
		heard = env.Text()
	}
	line := LineFor(p.name, turns, len(info.Channel.GetParticipants()), heard)
	// The idempotency key makes a repeat after a crash (posted, not yet acked)
	// return the first post instead of taking a second turn.
	res, err := p.c.PostText(ctx, env.ChannelID, line,
		agentnet.WithCausation(env.EnvelopeID), agentnet.WithIdempotencyKey("turn:"+env.EnvelopeID))
	if err != nil {
		if reason := agentnet.ReasonFor(err); reason != "" {
			emitRefusal("turn", env.ChannelID, err)
			return false, nil
		}
		return false, err
	}
	emit(map[string]any{"event": "said", "channel": env.ChannelID, "seq": res.Seq, "id": res.EnvelopeID, "text": line})
	return false, nil
}

// demoRefusals posts twice in a way the hub refuses and prints both errors.
func (p *participant) demoRefusals(ctx context.Context, channelID string, info *agentnet.ChannelInfo) {
	initiator := info.Channel.GetParticipants()[0].GetAgentId()
	spoof := agentnet.NewText(channelID, "posted in someone else's name")
	spoof.SenderID = initiator
	if _, err := p.c.Post(ctx, spoof); err != nil {
		emitRefusal("spoofed_sender", channelID, err)
	}
	if !slices.Contains(info.ExpectedNext, p.me) {
		if _, err := p.c.PostText(ctx, channelID, "speaking out of turn"); err != nil {
			emitRefusal("out_of_turn", channelID, err)
		}
	}
}

func emitRefusal(what, channelID string, err error) {
	fields := map[string]any{"event": "refused", "case": what, "channel": channelID, "message": err.Error()}
	if e, ok := agentnet.AsError(err); ok {
		fields["code"] = uint32(e.Code)
		fields["reason"] = e.Reason
		fields["message"] = e.Message
		fields["metadata"] = e.Metadata
	}
	emit(fields)
}
