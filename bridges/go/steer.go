package agentnet

// Session steering (docs/scale-out.md "Session steering"): with the channels
// divided among hub replicas, a replica may send a Connect stream a Redirect
// frame naming the replica that holds most of the agent's channels. A Session
// that follows redirects (the default) ends the stream and reconnects there at
// once, on a connection of its own, through the same reconnect path a broken
// stream takes: it resumes from its processed cursors, and posts whose result
// had not come are sent again by PostEnvelope under the same idempotency key.

import (
	"context"
	"fmt"
	"time"

	agentnetv1 "github.com/agent-network/agent-network/gen/go/agentnet/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// RedirectPause is how long a Session follows no Redirect after one whose
// replica it could not get a Welcome from (unreachable, or it refused the
// stream): the stream went back to the configured target meanwhile.
const RedirectPause = 60 * time.Second

// peerConn is the connection to one replica a Redirect named.
type peerConn struct {
	conn *grpc.ClientConn
	hub  agentnetv1.HubServiceClient
}

// peer returns the stub of the hub replica at addr (one a Redirect named):
// its connection is dialed once per address, with the client's transport
// (TLS as given to WithTLS; the certificate is checked against addr's host
// unless TLSConfig.ServerName is set), backoff, service config and
// WithDialOptions, and closed with the client.
func (c *Client) peer(addr string) (agentnetv1.HubServiceClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if p := c.peers[addr]; p != nil {
		return p.hub, nil
	}
	conn, err := grpc.NewClient(addr, c.peerDial...)
	if err != nil {
		return nil, &Error{Code: codes.Unavailable, Message: fmt.Sprintf("agentnet: dial %s, where the hub redirected: %v", addr, err)}
	}
	if c.peers == nil {
		c.peers = map[string]*peerConn{}
	}
	p := &peerConn{conn: conn, hub: agentnetv1.NewHubServiceClient(conn)}
	c.peers[addr] = p
	return p.hub, nil
}

// closePeers closes the connections to the replicas Redirects named.
func (c *Client) closePeers() {
	c.mu.Lock()
	peers := c.peers
	c.peers = nil
	c.mu.Unlock()
	for _, p := range peers {
		_ = p.conn.Close()
	}
}

// followsRedirects reports whether the Session asks for Redirects in Hello:
// unless ConnectOptions.IgnoreRedirects, and not on a client given its
// connection with WithConn (it could not dial another replica the same way).
func (s *Session) followsRedirects() bool {
	return !s.opts.IgnoreRedirects && s.c.peerDial != nil
}

// RedirectedTo is the address of the hub replica a Redirect moved the
// Session's stream to ("" while the stream is on, or returning to, the target
// the Client was given). Posts sent by PostEnvelope while the stream is down
// go there too; every other call keeps going to the configured target.
func (s *Session) RedirectedTo() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.redirectedTo
}

// streamHub is where the stream connects and its unary post fallbacks go:
// the replica a Redirect named (its address), else the configured
// connection (addr "").
func (s *Session) streamHub() (hub agentnetv1.HubServiceClient, addr string, err error) {
	s.mu.Lock()
	addr = s.redirectedTo
	s.mu.Unlock()
	if addr == "" {
		return s.c.hub, "", nil
	}
	hub, err = s.c.peer(addr)
	return hub, addr, err
}

// follow decides a Redirect frame: true (and RedirectedTo names the address)
// when the stream is to end and reconnect there; false when redirects are
// off, paused after one that led nowhere, the Session is closing, or it names
// where the stream already is.
func (s *Session) follow(r *agentnetv1.Redirect) bool {
	addr := r.GetAddress()
	if !s.followsRedirects() || addr == "" {
		return false
	}
	s.mu.Lock()
	ok := !s.closing && addr != s.redirectedTo && !time.Now().Before(s.redirectPausedUntil)
	if ok {
		s.redirectedTo = addr
	}
	s.mu.Unlock()
	if ok {
		s.redirects.Add(1)
		s.log.Info("agentnet: the hub moves this stream", "to", addr, "reason", r.GetReason())
	}
	return ok
}

// leaveRedirect sends the next stream back to the configured target after
// a stream on the replica at addr (a Redirect's; "" = the configured target)
// ended without being moved on.
func (s *Session) leaveRedirect(addr string) {
	s.mu.Lock()
	back := addr != "" && s.redirectedTo == addr
	if back {
		s.redirectedTo = ""
	}
	closing := s.closing
	s.mu.Unlock()
	if back && !closing {
		s.log.Info("agentnet: the stream on the replica the hub redirected to ended; back to the configured target", "was", addr)
	}
}

// abandonRedirect handles a failed Connect attempt: when it went to a
// replica a Redirect named, which led nowhere, the next attempt goes to the
// configured target and no Redirect is followed for RedirectPause (true).
func (s *Session) abandonRedirect(err error) bool {
	s.mu.Lock()
	addr := s.redirectedTo
	if addr != "" {
		s.redirectedTo = ""
		s.redirectPausedUntil = time.Now().Add(RedirectPause)
	}
	s.mu.Unlock()
	if addr == "" {
		return false
	}
	s.log.Warn("agentnet: could not connect where the hub redirected; back to the configured target",
		"to", addr, "err", err, "paused", RedirectPause)
	return true
}

// postUnary sends a post by PostEnvelope where the stream is (see
// streamHub). A replica a Redirect named that does not answer at all
// (UNAVAILABLE without a cause: not the hub's answer) is tried again, with
// backoff, wherever the stream's next connection goes (a moved stream whose
// replica went away goes back to the configured target), until ctx ends
// (DefaultPostTimeout when it has no deadline). The idempotency key makes
// every attempt land once.
func (s *Session) postUnary(ctx context.Context, w *agentnetv1.Envelope) (*Envelope, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultPostTimeout)
		defer cancel()
	}
	backoff := 50 * time.Millisecond
	for {
		hub, addr, err := s.streamHub()
		if err != nil {
			return nil, err
		}
		peer := addr != ""
		var opts []grpc.CallOption
		if peer {
			// Fail fast on a replica that went away, instead of waiting for
			// it to come back (PostRetryServiceConfig's waitForReady).
			opts = append(opts, grpc.WaitForReady(false))
		}
		env, err := postOnce(ctx, s.c, hub, w, opts...)
		if err == nil || !peer || !unanswered(err) {
			return env, err
		}
		pause := s.jitter(backoff)
		if dl, _ := ctx.Deadline(); time.Until(dl) <= pause {
			return nil, err
		}
		if !sleepCtx(ctx, pause) { // a backoff between attempts, not a wait for a condition
			return nil, err
		}
		backoff = min(backoff*2, time.Second)
	}
}

// unanswered reports an UNAVAILABLE error the hub did not answer itself
// (no cause in its metadata): the replica could not be reached.
func unanswered(err error) bool {
	e, ok := AsError(err)
	return ok && e.Code == codes.Unavailable && e.Metadata["cause"] == ""
}

// sleepCtx waits d, false when ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
