package agentnet

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	agentnetv1 "github.com/agent-network/agent-network/gen/go/agentnet/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// Generated types used in this package's API, re-exported so callers rarely
// need to import the generated package themselves.
type (
	// Passport is an agent's public identity (name, kind, owner, ...).
	Passport = agentnetv1.Passport
	// Resume is what an agent claims it can do.
	Resume = agentnetv1.Resume
	// A2ASettings are an agent's agent-to-agent settings.
	A2ASettings = agentnetv1.A2ASettings
	// AgentRecord is the hub's registry entry for one identity.
	AgentRecord = agentnetv1.AgentRecord
	// AgentSummary is the short form of an identity returned by listings.
	AgentSummary = agentnetv1.AgentSummary
	// ChannelMetadata is everything the hub knows about a channel except its adapter state.
	ChannelMetadata = agentnetv1.ChannelMetadata
	// ToolSchema describes one network tool in the OpenAI function-tool shape.
	ToolSchema = agentnetv1.ToolSchema
	// DiscoveredAgent is one A2A discovery result.
	DiscoveredAgent = agentnetv1.DiscoveredAgent
	// Execution records one A2A call.
	Execution = agentnetv1.Execution
	// PassportKind says what sort of participant an identity is.
	PassportKind = agentnetv1.PassportKind
	// ChannelState is a channel's lifecycle position.
	ChannelState = agentnetv1.ChannelState
	// TaskMetadata is the hub's mirror of a task owned by one agent.
	TaskMetadata = agentnetv1.TaskMetadata
	// RuleReport is what GetRule answers: an identity's own rule, every rule
	// that governs it and what they combine to.
	RuleReport = agentnetv1.GetRuleResponse
)

// Passport kinds.
const (
	// KindAgent is an LLM agent.
	KindAgent = agentnetv1.PassportKind_PASSPORT_KIND_AGENT
	// KindHuman is a non-LLM participant (register it with RegisterHuman).
	KindHuman = agentnetv1.PassportKind_PASSPORT_KIND_HUMAN
	// KindRemoteAgent is an agent in another process or language: a bridge.
	KindRemoteAgent = agentnetv1.PassportKind_PASSPORT_KIND_REMOTE_AGENT
)

// Channel states.
const (
	// ChannelPending: created, waiting for every invite ack.
	ChannelPending = agentnetv1.ChannelState_CHANNEL_STATE_PENDING
	// ChannelOpened: every invitee acked; substantive envelopes are admitted.
	ChannelOpened = agentnetv1.ChannelState_CHANNEL_STATE_OPENED
	// ChannelClosed: closed by a participant, an adapter rule or a failed invite/seed.
	ChannelClosed = agentnetv1.ChannelState_CHANNEL_STATE_CLOSED
	// ChannelExpired: closed by the TTL sweeper.
	ChannelExpired = agentnetv1.ChannelState_CHANNEL_STATE_EXPIRED
)

// ClientName identifies this library in Hello.client_name.
const ClientName = "agentnet-go/0.1"

// Credentials identify a registered agent: what Register returns and what
// Dial needs to act as that agent again (e.g. after a restart). Keep the
// credential secret.
type Credentials struct {
	// AgentID is the hub-assigned id.
	AgentID string `json:"agent_id"`
	// Name is the passport name.
	Name string `json:"name,omitempty"`
	// Credential is the bearer credential.
	Credential string `json:"credential"`
}

// LoadCredentials reads credentials saved by SaveCredentials.
func LoadCredentials(path string) (Credentials, error) {
	var c Credentials
	b, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("agentnet: credentials file %s is not valid: %w", path, err)
	}
	if c.Credential == "" {
		return c, fmt.Errorf("agentnet: credentials file %s has no credential", path)
	}
	return c, nil
}

// SaveCredentials writes credentials to path with mode 0600.
func SaveCredentials(path string, c Credentials) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o600)
}

// Option configures Register, RegisterHuman and Dial.
type Option func(*clientOptions)

type clientOptions struct {
	dial     []grpc.DialOption
	conn     *grpc.ClientConn
	skill    *string
	a2a      *A2ASettings
	ruleJSON string
	tls      *TLSConfig
	targets  []string
}

// WithDialOptions adds gRPC dial options. They are applied after the
// defaults (plain-text transport, or WithTLS's; a reconnect backoff of 200 ms
// growing to 10 s; PostRetryServiceConfig), so e.g. grpc.WithTransportCredentials here replaces them.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *clientOptions) { o.dial = append(o.dial, opts...) }
}

// WithTargets names further hub replicas (host:port each) besides the target
// given to Register, RegisterHuman or Dial; that target may then be "". The
// client connects to the first address that answers, in order, and when its
// hub dies it moves to another one by itself (gRPC's pick_first over every
// address); a Session resumes there from its cursors. The replicas must share
// one store (python -m hubsvc --store redis://...). A single "dns:///name:port"
// target whose name has several addresses fails over the same way without
// this option. An address that is not host:port is refused with an
// INVALID_ARGUMENT *Error; with WithConn the option has no effect.
func WithTargets(addrs ...string) Option {
	return func(o *clientOptions) { o.targets = append(o.targets, addrs...) }
}

// WithConn uses an existing connection instead of dialing one; Close then
// leaves it open. Dial it with grpc.WithDefaultServiceConfig(PostRetryServiceConfig)
// so posts are retried across a hub failover as on a connection the package dials.
func WithConn(conn *grpc.ClientConn) Option { return func(o *clientOptions) { o.conn = conn } }

// WithSkill sets the skill markdown at registration (default: the hub
// renders one from passport and resume).
func WithSkill(markdown string) Option { return func(o *clientOptions) { o.skill = &markdown } }

// WithA2A sets the agent-to-agent settings at registration.
func WithA2A(s *A2ASettings) Option { return func(o *clientOptions) { o.a2a = s } }

// WithRuleJSON sets the governance rule (a JSON object) of a RegisterHuman
// participant.
func WithRuleJSON(rule string) Option { return func(o *clientOptions) { o.ruleJSON = rule } }

// Client is one agent's handle on a hub: its connection and credential.
// Unary calls are methods on Client; Connect starts the live Session.
// A Client is safe for concurrent use.
type Client struct {
	conn    *grpc.ClientConn
	hub     agentnetv1.HubServiceClient
	ownConn bool
	// peerDial dials the connection to a replica a Redirect names: the
	// configured transport, backoff, service config and WithDialOptions (nil
	// with WithConn: such a client follows no Redirect).
	peerDial []grpc.DialOption

	mu      sync.Mutex
	creds   Credentials
	record  *AgentRecord
	session *Session
	closed  bool
	// peers are the connections to the replicas Redirects named, by address
	// (see peer); closed with the client.
	peers map[string]*peerConn
	// unregistered is set once Unregister succeeded: a second call is a no-op.
	unregistered bool
}

func newClient(target string, o *clientOptions) (*Client, error) {
	if o.conn != nil {
		return &Client{conn: o.conn, hub: agentnetv1.NewHubServiceClient(o.conn)}, nil
	}
	target, hubs, err := resolveTargets(target, o.targets)
	if err != nil {
		return nil, err
	}
	transport, err := o.transportOption()
	if err != nil {
		return nil, err
	}
	common := []grpc.DialOption{
		transport,
		// Reconnect the channel about as eagerly as a Session does (gRPC's
		// default backoff grows to two minutes).
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 200 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 10 * time.Second},
			MinConnectTimeout: 5 * time.Second,
		}),
		// Retry a post whose hub went away (see PostRetryServiceConfig).
		grpc.WithDefaultServiceConfig(PostRetryServiceConfig),
	}
	dial := append(append(slices.Clone(common), hubs...), o.dial...)
	conn, err := grpc.NewClient(target, dial...)
	if err != nil {
		return nil, fmt.Errorf("agentnet: dial %s: %w", target, err)
	}
	return &Client{
		conn: conn, hub: agentnetv1.NewHubServiceClient(conn), ownConn: true,
		peerDial: append(common, o.dial...),
	}, nil
}

// insecureCredentials is the plain-text transport (a hub without TLS).
func insecureCredentials() credentials.TransportCredentials { return insecure.NewCredentials() }

func buildOptions(opts []Option) *clientOptions {
	o := &clientOptions{}
	for _, opt := range opts {
		if opt != nil {
			opt(o)
		}
	}
	return o
}

// Register creates an agent on the hub at target (host:port) and returns a
// Client acting as it. passport.Kind defaults to KindAgent; use
// KindRemoteAgent for bridges. Kind human is refused: use RegisterHuman.
func Register(ctx context.Context, target string, passport *Passport, resume *Resume, opts ...Option) (*Client, error) {
	return register(ctx, target, passport, opts, func(c *Client, o *clientOptions) (identity, error) {
		req := &agentnetv1.RegisterRequest{Passport: passport, Resume: resume, A2A: o.a2a}
		if o.skill != nil {
			req.SkillMd = proto.String(*o.skill)
		}
		return c.hub.Register(ctx, req)
	})
}

// RegisterHuman creates a non-LLM participant (kind human) and returns a
// Client acting as it.
func RegisterHuman(ctx context.Context, target string, passport *Passport, resume *Resume, opts ...Option) (*Client, error) {
	return register(ctx, target, passport, opts, func(c *Client, o *clientOptions) (identity, error) {
		return c.hub.RegisterHuman(ctx, &agentnetv1.RegisterHumanRequest{
			Passport: passport, Resume: resume, RuleJson: o.ruleJSON,
		})
	})
}

// identity is what both registration responses return.
type identity interface {
	GetAgent() *AgentRecord
	GetCredential() string
}

// register opens a client, runs one registration call on it and adopts the
// identity it returns (closing the connection when the hub refuses).
func register(
	ctx context.Context, target string, passport *Passport, opts []Option,
	call func(c *Client, o *clientOptions) (identity, error),
) (*Client, error) {
	if passport == nil {
		return nil, invalidArgument("passport is nil; give at least a name")
	}
	o := buildOptions(opts)
	c, err := newClient(target, o)
	if err != nil {
		return nil, err
	}
	resp, err := call(c, o)
	if err != nil {
		c.closeConn()
		return nil, FromStatus(err)
	}
	c.adopt(resp.GetAgent(), resp.GetCredential())
	return c, nil
}

// Dial returns a Client acting as an already registered agent. Nothing is
// sent until the first call; an unknown credential surfaces as an
// UNAUTHENTICATED *Error then. When creds.AgentID is empty it is learnt
// from the first Connect.
func Dial(target string, creds Credentials, opts ...Option) (*Client, error) {
	if creds.Credential == "" {
		return nil, invalidArgument("credentials have no credential")
	}
	c, err := newClient(target, buildOptions(opts))
	if err != nil {
		return nil, err
	}
	c.creds = creds
	return c, nil
}

func (c *Client) adopt(rec *AgentRecord, credential string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.record = rec
	c.creds = Credentials{AgentID: rec.GetAgentId(), Name: rec.GetPassport().GetName(), Credential: credential}
}

// AgentID is the agent's hub-assigned id ("" for a Dial'ed client before its
// first Connect, when the credentials did not carry it).
func (c *Client) AgentID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.creds.AgentID
}

// Name is the agent's passport name, when known.
func (c *Client) Name() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.creds.Name
}

// Credentials returns what Dial needs to act as this agent again.
func (c *Client) Credentials() Credentials {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.creds
}

// Record is the registry entry returned by Register (nil for Dial'ed clients).
func (c *Client) Record() *AgentRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.record
}

// Conn is the underlying gRPC connection.
func (c *Client) Conn() *grpc.ClientConn { return c.conn }

// Hub is the raw generated stub, for RPCs this package does not wrap; pass
// AuthContext(ctx) as the context.
func (c *Client) Hub() agentnetv1.HubServiceClient { return c.hub }

// AuthContext returns ctx carrying the "authorization: Bearer <credential>"
// metadata every hub RPC (except Register) needs.
func (c *Client) AuthContext(ctx context.Context) context.Context {
	c.mu.Lock()
	cred := c.creds.Credential
	c.mu.Unlock()
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+cred)
}

func (c *Client) setAgentID(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.creds.AgentID == "" {
		c.creds.AgentID = id
	}
}

func (c *Client) checkOpen() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	return nil
}

func (c *Client) currentSession() *Session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session
}

// Close stops the Session (if any) and closes the connection (unless it was
// passed in with WithConn). It is safe to call more than once.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	s := c.session
	c.mu.Unlock()
	if s != nil {
		_ = s.Close()
	}
	return c.closeConn()
}

func (c *Client) closeConn() error {
	c.closePeers()
	if c.ownConn {
		return c.conn.Close()
	}
	return nil
}

// newID returns a random id (26 base32 characters, 130 bits).
func newID() string { return rand.Text() }
