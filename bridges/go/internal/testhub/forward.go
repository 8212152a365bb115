package testhub

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Forwarder is a loopback port a test holds across hub restarts, forwarding
// each connection to wherever the hub listens now.
//
// Restarting a hub "on the same port" after it exited races with every other
// process on the machine (the port is free in between). Instead hubs always
// start on port 0, clients dial Addr, and the test points the forwarder at
// each new hub.
type Forwarder struct {
	// Addr is 127.0.0.1:<port> for clients to dial (stable for the test's life).
	Addr string

	ln       net.Listener
	wg       sync.WaitGroup
	mu       sync.Mutex
	upstream string
	conns    map[net.Conn]struct{}
	closed   bool
}

// Forward listens on a free loopback port, forwards new connections to
// upstream and closes every connection when the test ends.
func Forward(t testing.TB, upstream string) *Forwarder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &Forwarder{Addr: ln.Addr().String(), ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.serve()
	t.Cleanup(f.close)
	return f
}

// PointTo forwards new connections to upstream ("": refuse them, as a
// stopped hub would). Connections already forwarded are left alone.
func (f *Forwarder) PointTo(upstream string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.upstream = upstream
}

// Drop closes every connection forwarded so far (new ones go to the current
// upstream): with PointTo(""), a hub that went away without a word.
func (f *Forwarder) Drop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.conns {
		_ = c.Close()
	}
}

func (f *Forwarder) serve() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return // closed
		}
		f.wg.Add(1)
		go f.pipe(c)
	}
}

// pipe copies both ways between c and the current upstream until either side
// ends, then closes both.
func (f *Forwarder) pipe(c net.Conn) {
	defer f.wg.Done()
	defer c.Close()
	f.mu.Lock()
	upstream := f.upstream
	f.mu.Unlock()
	up, err := net.DialTimeout("tcp", upstream, 5*time.Second)
	if err != nil {
		return // the hub is down: the client sees its connection closed and retries
	}
	defer up.Close()
	if !f.track(c, up) {
		return
	}
	defer f.untrack(c, up)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
	_ = c.Close()
	_ = up.Close()
	<-done
}

func (f *Forwarder) track(cs ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	for _, c := range cs {
		f.conns[c] = struct{}{}
	}
	return true
}

func (f *Forwarder) untrack(cs ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range cs {
		delete(f.conns, c)
	}
}

func (f *Forwarder) close() {
	f.mu.Lock()
	f.closed = true
	for c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
	_ = f.ln.Close()
	f.wg.Wait()
}
