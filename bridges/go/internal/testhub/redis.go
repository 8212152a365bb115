package testhub

import (
	"bufio"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// StartRedis runs a throw-away redis-server (no persistence) on a free
// loopback port in a temporary directory, kills it when the test ends and
// returns its redis:// URL for database db. It fails the test when
// redis-server is not on PATH (`make redis-server` installs it).
func StartRedis(t testing.TB, db int) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server is not on PATH: run `make redis-server` to install it: %v", err)
	}
	dir := t.TempDir()
	for range 3 { // the free port may be taken between probing and binding
		port := freePort(t)
		cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir)
		if err := cmd.Start(); err != nil {
			t.Fatalf("start redis-server: %v", err)
		}
		done := make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(done)
		}()
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if waitPing(addr, done, 10*time.Second) {
			t.Cleanup(func() {
				_ = cmd.Process.Signal(syscall.SIGKILL)
				<-done
			})
			return fmt.Sprintf("redis://%s/%d", addr, db)
		}
		_ = cmd.Process.Kill()
		<-done
	}
	t.Fatal("redis-server did not answer PING on three free ports")
	return ""
}

// freePort is a loopback TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitPing reports whether the server at addr answers PING before timeout
// (false at once if the process exits).
func waitPing(addr string, exited <-chan struct{}, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		if ping(addr) {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

func ping(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}
