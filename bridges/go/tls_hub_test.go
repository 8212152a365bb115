package agentnet_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	agentnet "github.com/agent-network/agent-network/bridges/go"
	"github.com/agent-network/agent-network/bridges/go/internal/testhub"
)

func remote(name string) *agentnet.Passport {
	return &agentnet.Passport{Name: name, Kind: agentnet.KindRemoteAgent}
}

// talk registers two agents with opts, has them converse over their live
// sessions and returns the first client (proving unary calls and the Connect
// stream both run over the transport opts choose).
func talk(t *testing.T, ctx context.Context, addr, prefix string, opts ...agentnet.Option) *agentnet.Client {
	t.Helper()
	var ps []*participant
	for _, name := range []string{prefix + "-alice", prefix + "-bob"} {
		c, err := agentnet.Register(ctx, addr, remote(name), nil, opts...)
		if err != nil {
			t.Fatalf("register %s: %v", name, err)
		}
		t.Cleanup(func() { _ = c.Close() })
		s, err := c.Connect(ctx, agentnet.ConnectOptions{})
		if err != nil {
			t.Fatalf("connect %s: %v", name, err)
		}
		t.Cleanup(func() { _ = s.Close() })
		ps = append(ps, &participant{c: c, s: s})
	}
	alice, bob := ps[0], ps[1]
	ch, err := alice.c.OpenChannel(ctx, agentnet.OpenChannelRequest{Type: "conversation", Targets: []string{bob.id()}})
	if err != nil {
		t.Fatalf("open channel: %v", err)
	}
	bob.next(t, ctx, "the opening", func(e *agentnet.Envelope) bool {
		return e.ChannelID == ch.Channel.GetChannelId() && e.EventType == agentnet.EventOpened
	})
	if _, err := alice.c.PostText(ctx, ch.Channel.GetChannelId(), "over TLS"); err != nil {
		t.Fatalf("post: %v", err)
	}
	bob.next(t, ctx, "alice's text", func(e *agentnet.Envelope) bool { return e.Text() == "over TLS" })
	return alice.c
}

// A hub serving TLS: the bridge verifies it with the CA file (also when it
// dials an IP address, and with a server-name override); a plain-text client,
// one without the CA, and one expecting another name cannot reach it.
func TestTLSHub(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 60*time.Second)
	certs := testhub.Certs(t)
	h := testhub.StartWith(t, "--tls-cert", filepath.Join(certs, "server.pem"), "--tls-key", filepath.Join(certs, "server.key"))
	ca := filepath.Join(certs, "ca.pem")
	port := h.Addr[strings.LastIndex(h.Addr, ":")+1:]

	talk(t, ctx, "localhost:"+port, "tls", agentnet.WithTLS(agentnet.TLSConfig{CAFile: ca}))
	talk(t, ctx, "127.0.0.1:"+port, "tls-ip", agentnet.WithTLS(agentnet.TLSConfig{CAFile: ca}))
	talk(t, ctx, "127.0.0.1:"+port, "tls-sni", agentnet.WithTLS(agentnet.TLSConfig{CAFile: ca, ServerName: "localhost"}))

	short := func() context.Context {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		t.Cleanup(cancel)
		return c
	}
	refused := map[string][]agentnet.Option{
		"plain text":        nil,
		"unknown CA":        {agentnet.WithTLS(agentnet.TLSConfig{})},
		"another name":      {agentnet.WithTLS(agentnet.TLSConfig{CAFile: ca, ServerName: "hub.elsewhere.example"})},
		"CA is not the hub": {agentnet.WithTLS(agentnet.TLSConfig{CAFile: filepath.Join(testhub.Certs(t), "ca.pem")})},
	}
	for what, opts := range refused {
		_, err := agentnet.Register(short(), "localhost:"+port, remote("nobody"), nil, opts...)
		if err == nil || agentnet.ReasonFor(err) != "" {
			t.Errorf("%s: registered, or a hub refusal instead of a transport failure: %v", what, err)
		}
	}
}

// A hub requiring client certificates (mTLS): a client with a certificate of
// its CA gets in, one without is turned away; under --tls-bind-identity the
// certificate's agent name is the only one it may register.
func TestMutualTLSHub(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 60*time.Second)
	certs := testhub.Certs(t, "mtls-alice", "mtls-bob")
	ca := filepath.Join(certs, "ca.pem")
	client := func(name string) agentnet.Option {
		return agentnet.WithTLS(agentnet.TLSConfig{
			CAFile: ca, CertFile: filepath.Join(certs, "client-"+name+".pem"), KeyFile: filepath.Join(certs, "client-"+name+".key"),
		})
	}
	h := testhub.StartWith(t, "--tls-cert", filepath.Join(certs, "server.pem"), "--tls-key", filepath.Join(certs, "server.key"),
		"--tls-client-ca", ca)
	port := h.Addr[strings.LastIndex(h.Addr, ":")+1:]
	target := "localhost:" + port

	c, err := agentnet.Register(ctx, target, remote("mtls-alice"), nil, client("mtls-alice"))
	if err != nil {
		t.Fatalf("register with a client certificate: %v", err)
	}
	defer c.Close()
	if _, err := c.ListAgents(ctx, agentnet.ListAgentsRequest{}); err != nil {
		t.Fatalf("a call over mTLS: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := agentnet.Register(short, target, remote("nocert"), nil, agentnet.WithTLS(agentnet.TLSConfig{CAFile: ca})); err == nil ||
		agentnet.ReasonFor(err) != "" {
		t.Errorf("registered without a client certificate: %v", err)
	}

	// Identity binding: the certificate names the agent this connection may be.
	bound := testhub.StartWith(t, "--tls-cert", filepath.Join(certs, "server.pem"), "--tls-key", filepath.Join(certs, "server.key"),
		"--tls-client-ca", ca, "--tls-bind-identity")
	target = "localhost:" + bound.Addr[strings.LastIndex(bound.Addr, ":")+1:]
	bob, err := agentnet.Register(ctx, target, remote("mtls-bob"), nil, client("mtls-bob"))
	if err != nil {
		t.Fatalf("register the certificate's agent: %v", err)
	}
	defer bob.Close()
	s, err := bob.Connect(ctx, agentnet.ConnectOptions{})
	if err != nil {
		t.Fatalf("connect as the certificate's agent: %v", err)
	}
	defer s.Close()
	if _, err := agentnet.Register(ctx, target, remote("mtls-carol"), nil, client("mtls-bob")); !agentnet.IsReason(err, agentnet.ReasonPermissionDenied) {
		t.Errorf("registered another name than the certificate's: %v", err)
	}
	// bob's credential on alice's certificate is refused.
	stolen, err := agentnet.Dial(target, bob.Credentials(), client("mtls-alice"))
	if err != nil {
		t.Fatal(err)
	}
	defer stolen.Close()
	if _, err := stolen.ListAgents(ctx, agentnet.ListAgentsRequest{}); !agentnet.IsReason(err, agentnet.ReasonPermissionDenied) {
		t.Errorf("bob's credential over alice's certificate: %v", err)
	}
}

// Unreadable or malformed TLS files are refused before anything is dialed.
func TestTLSConfigErrors(t *testing.T) {
	certs := testhub.Certs(t, "files")
	pem := filepath.Join(certs, "client-files.pem")
	notPEM := filepath.Join(t.TempDir(), "ca.txt")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for what, cfg := range map[string]agentnet.TLSConfig{
		"missing CA file":  {CAFile: filepath.Join(certs, "nope.pem")},
		"CA file not PEM":  {CAFile: notPEM},
		"key is not a CA":  {CAFile: filepath.Join(certs, "server.key")},
		"cert without key": {CertFile: pem},
		"key without cert": {KeyFile: filepath.Join(certs, "client-files.key")},
		"mismatched pair":  {CertFile: pem, KeyFile: filepath.Join(certs, "server.key")},
	} {
		_, err := agentnet.Dial("localhost:1", agentnet.Credentials{Credential: "a.b"}, agentnet.WithTLS(cfg))
		if !agentnet.IsReason(err, agentnet.ReasonInvalidArgument) {
			t.Errorf("%s: %v", what, err)
		}
	}
}
