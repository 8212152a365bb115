package agentnet_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	agentnet "github.com/agent-network/agent-network/bridges/go"
	"github.com/agent-network/agent-network/bridges/go/internal/testhub"
)

var (
	binDir   string
	buildMu  sync.Mutex
	builtBin = map[string]string{}
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "agentnet-go-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// exampleBin builds ./examples/<name> once per test run and returns the binary.
func exampleBin(t *testing.T, name string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := builtBin[name]; ok {
		return p
	}
	out := filepath.Join(binDir, name)
	cmd := exec.Command("go", "build", "-o", out, "./examples/"+name)
	cmd.Dir = testhub.ModuleRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", name, err, b)
	}
	builtBin[name] = out
	return out
}

// answer mirrors the consulting_agent example's reply.
func answer(q string) string {
	r := []rune(q)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return "go-agent: " + strings.ToUpper(string(r))
}

// agentProc is a running consulting_agent example.
type agentProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	mu     sync.Mutex
	events []map[string]any
	wake   chan struct{}
	done   chan struct{}
	stderr strings.Builder
	errMu  sync.Mutex
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func startAgent(t *testing.T, args ...string) *agentProc {
	t.Helper()
	a := &agentProc{t: t, wake: make(chan struct{}, 1), done: make(chan struct{})}
	a.cmd = exec.Command(exampleBin(t, "consulting_agent"), args...)
	a.cmd.Stderr = lockedWriter{&a.errMu, &a.stderr}
	stdout, err := a.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan struct{})
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var ev map[string]any
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			a.mu.Lock()
			a.events = append(a.events, ev)
			a.mu.Unlock()
			select {
			case a.wake <- struct{}{}:
			default:
			}
		}
	}()
	go func() {
		<-lines // read all output before reaping
		_ = a.cmd.Wait()
		close(a.done)
	}()
	t.Cleanup(func() {
		a.stop()
		if t.Failed() {
			a.errMu.Lock()
			t.Logf("agent %v stderr:\n%s", args, a.stderr.String())
			a.errMu.Unlock()
		}
	})
	a.waitFor(20*time.Second, "ready", func(evs []map[string]any) bool { return len(filter(evs, "ready")) > 0 })
	return a
}

func filter(evs []map[string]any, kind string) []map[string]any {
	var out []map[string]any
	for _, e := range evs {
		if e["event"] == kind {
			out = append(out, e)
		}
	}
	return out
}

func (a *agentProc) snapshot() []map[string]any {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]map[string]any(nil), a.events...)
}

func (a *agentProc) agentID() string {
	for _, e := range a.snapshot() {
		if e["event"] == "ready" {
			s, _ := e["agent_id"].(string)
			return s
		}
	}
	return ""
}

func (a *agentProc) waitFor(timeout time.Duration, what string, pred func([]map[string]any) bool) {
	a.t.Helper()
	deadline := time.After(timeout)
	for {
		if pred(a.snapshot()) {
			return
		}
		select {
		case <-a.wake:
		case <-time.After(50 * time.Millisecond):
		case <-a.done:
			if pred(a.snapshot()) {
				return
			}
			a.errMu.Lock()
			defer a.errMu.Unlock()
			a.t.Fatalf("agent exited while waiting for %s:\n%s", what, a.stderr.String())
		case <-deadline:
			a.t.Fatalf("timed out waiting for agent %s; events: %v", what, a.snapshot())
		}
	}
}

// kill sends SIGKILL and waits for the process and its output.
func (a *agentProc) kill() {
	_ = a.cmd.Process.Signal(syscall.SIGKILL)
	<-a.done
}

// stop sends SIGTERM and waits (SIGKILL after 10 s).
func (a *agentProc) stop() {
	select {
	case <-a.done:
		return
	default:
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(10 * time.Second):
		a.kill()
	}
}

// participant is an in-process agent with a live Session.
type participant struct {
	c *agentnet.Client
	s *agentnet.Session
}

func (p *participant) id() string { return p.c.AgentID() }

func register(t *testing.T, ctx context.Context, addr, name string) *agentnet.Client {
	t.Helper()
	c, err := agentnet.Register(ctx, addr, &agentnet.Passport{Name: name, Kind: agentnet.KindRemoteAgent}, nil)
	if err != nil {
		t.Fatalf("register %s: %v", name, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func newParticipant(t *testing.T, ctx context.Context, addr, name string, opts agentnet.ConnectOptions) *participant {
	t.Helper()
	c := register(t, ctx, addr, name)
	s, err := c.Connect(ctx, opts)
	if err != nil {
		t.Fatalf("connect %s: %v", name, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return &participant{c: c, s: s}
}

// next returns the next envelope matching pred, acking every envelope it reads.
func (p *participant) next(t *testing.T, ctx context.Context, what string, pred func(*agentnet.Envelope) bool) *agentnet.Envelope {
	t.Helper()
	for {
		select {
		case env, ok := <-p.s.Envelopes():
			if !ok {
				t.Fatalf("session ended while waiting for %s: %v", what, p.s.Err())
			}
			if err := env.Ack(); err != nil {
				t.Fatalf("ack: %v", err)
			}
			if pred(env) {
				return env
			}
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
