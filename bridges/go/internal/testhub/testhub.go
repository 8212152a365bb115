// Package testhub starts a real hub (python -m hubsvc) for tests.
package testhub

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Hub is a running hub subprocess.
type Hub struct {
	// Addr is host:port the hub listens on.
	Addr string
	// Dir is the hub's data directory.
	Dir string

	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{}
	once   sync.Once
}

// ModuleRoot is the bridges/go directory.
func ModuleRoot() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "."
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// RepoRoot is the repository root (where `python -m hubsvc` runs).
func RepoRoot() string { return filepath.Clean(filepath.Join(ModuleRoot(), "..", "..")) }

// Python is the interpreter: $AGENTNET_PYTHON, else ../../.venv/bin/python
// relative to bridges/go, as an absolute path.
func Python() string {
	p := os.Getenv("AGENTNET_PYTHON")
	if p == "" {
		p = filepath.Join(ModuleRoot(), "..", "..", ".venv", "bin", "python")
	}
	if !filepath.IsAbs(p) && strings.ContainsRune(p, filepath.Separator) {
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
	}
	return filepath.Clean(p)
}

// StartWith is Start with extra hub flags, e.g. "--tls-cert", path.
func StartWith(t testing.TB, args ...string) *Hub {
	t.Helper()
	return StartIn(t, t.TempDir(), args...)
}

// Certs writes throwaway TLS certificates into a temporary directory (python
// -m tests.system.security.certs): ca.pem, server.pem/.key for localhost and
// 127.0.0.1, and client-<name>.pem/.key for each client name. It returns the
// directory.
func Certs(t testing.TB, clients ...string) string {
	t.Helper()
	dir := t.TempDir()
	args := []string{"-m", "tests.system.security.certs", dir}
	for _, c := range clients {
		args = append(args, "--client", c)
	}
	cmd := exec.Command(Python(), args...)
	cmd.Dir = RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generate certificates: %v\n%s", err, out)
	}
	return dir
}

// Start runs a fresh hub in a temporary directory on a free port and stops
// it when the test ends.
func Start(t testing.TB) *Hub {
	t.Helper()
	return StartIn(t, t.TempDir())
}

// StartIn runs a hub with its database in dir on a free port. Several hubs
// may use one dir one after the other (a restart: the new hub listens on a
// new port, so clients that must survive it dial a Forwarder).
func StartIn(t testing.TB, dir string, args ...string) *Hub {
	t.Helper()
	py := Python()
	if _, err := os.Stat(py); err != nil {
		t.Fatalf("hub interpreter %s not found (set AGENTNET_PYTHON): %v", py, err)
	}
	cmd := exec.Command(py, append([]string{"-m", "hubsvc", "--port", "0",
		"--db", filepath.Join(dir, "hub.db"), "--data-dir", dir, "--log-level", "WARNING"}, args...)...)
	cmd.Dir = RepoRoot()
	cmd.Env = append(os.Environ(), "PYTHONUNBUFFERED=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	h := &Hub{Dir: dir, cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = h.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start hub: %v", err)
	}
	go func() {
		_ = cmd.Wait()
		close(h.done)
	}()
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, "agentnet-hub listening on "); ok {
				select {
				case addr <- strings.TrimSpace(rest):
				default:
				}
			}
		}
	}()
	select {
	case a := <-addr:
		h.Addr = a
	case <-h.done:
		t.Fatalf("hub exited before listening:\n%s", h.stderr.String())
	case <-time.After(30 * time.Second):
		h.Stop()
		t.Fatalf("hub did not print its address within 30s:\n%s", h.stderr.String())
	}
	t.Cleanup(func() {
		h.Stop()
		if t.Failed() {
			if s := h.stderr.String(); s != "" {
				t.Logf("hub stderr:\n%s", s)
			}
		}
	})
	return h
}

// Stop sends SIGTERM and waits (SIGKILL after 10 s). Safe to call twice.
func (h *Hub) Stop() {
	h.once.Do(func() {
		_ = h.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-h.done:
		case <-time.After(10 * time.Second):
			_ = h.cmd.Process.Kill()
			<-h.done
		}
	})
}

// Kill ends the hub with SIGKILL (a crash) and waits for it.
func (h *Hub) Kill() {
	h.once.Do(func() {
		_ = h.cmd.Process.Kill()
		<-h.done
	})
}

// Stderr is what the hub logged so far.
func (h *Hub) Stderr() string { return h.stderr.String() }

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// String describes the hub.
func (h *Hub) String() string { return fmt.Sprintf("hub@%s", h.Addr) }
