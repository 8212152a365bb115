import {
  type CallOptions as GrpcCallOptions,
  type ChannelCredentials,
  type ChannelOptions,
  type ClientUnaryCall,
  credentials as grpcCredentials,
  Metadata,
  type ServiceError,
} from "@grpc/grpc-js";
import { type A2ADispatchInfo, type A2AReplyOptions, a2aReplyData, invokeNested, type NestedInvokeOptions } from "./a2a";
import type { ChannelType } from "./channel_types";
import type { Cursors } from "./cursors";
import {
  type AgentEnvelope,
  decodeEnvelope,
  decodePosted,
  encodePost,
  EventType,
  type Image,
  imageData,
  type Packet,
  type PostedEnvelope,
  type PostInput,
  type PostOptions,
} from "./envelope";
import { AgentNetError, Reason } from "./errors";
import {
  A2ASettings,
  type AgentRecord,
  type AgentSummary,
  type ChannelMetadata,
  ChannelState,
  type DelegateResponse,
  type DiscoveredAgent,
  type Envelope,
  type Execution,
  HubServiceClient,
  type InvokeAgentResponse,
  type Passport,
  PassportKind,
  type RefreshCallTokenResponse,
  type Resume,
  TaskEventKind,
  type TaskMetadata,
  type ToolSource,
} from "./gen";
import { type JsonObject, type JsonValue, parseJsonObject, parseJsonValue } from "./json";
import {
  type ConnectionState,
  type ConnectOptions,
  type EnvelopesOptions,
  type InboundEnvelope,
  type SessionInfo,
  StreamSession,
} from "./session";
import { HubRpc } from "./rpc_generated";
import { channelTarget } from "./targets";
import { type TlsOptions, tlsChannel } from "./tls";

/** Per-call options of every unary method. */
export interface CallOptions {
  /** Deadline in ms from now (default: the client's `callTimeoutMs`; 0 = none). */
  timeoutMs?: number;
  /** Cancel the call (it then rejects with reason `CANCELLED`). */
  signal?: AbortSignal;
}

/** Options of a {@link Client} (and of {@link register} / {@link registerHuman}). */
export interface ClientOptions {
  /** Channel credentials (default: plain text, or those of `tls`; not together with `tls`). */
  credentials?: ChannelCredentials;
  /** Connect over TLS / mTLS (a hub started with `--tls-cert`, and `--tls-client-ca` for mTLS). */
  tls?: TlsOptions;
  /** grpc-js channel options. */
  channelOptions?: ChannelOptions;
  /** Default deadline of unary calls in ms (default 30000; 0 = none). */
  callTimeoutMs?: number;
  /**
   * Further replicas of the hub (IP `host:port` each) besides the `target` argument.
   * The client connects to the first address that answers, in order, and moves to
   * another by itself when its hub dies (grpc-js `pick_first` over an `ipv4:`/`ipv6:`
   * address list); a connected session resumes there from its cursors. The replicas
   * must share one store (`python -m hubsvc --store redis://...`). Over TLS, several
   * targets need `tls.serverName` (a name every replica's certificate carries).
   */
  targets?: readonly string[];
}

/** A passport to register: `name` is required, everything else optional. */
export type PassportInit = { name: string } & Partial<Omit<Passport, "name">>;

/**
 * A resume to register or set (every field optional). It takes every field of
 * {@link Resume}, so a resume read back (`describeAgent(...).resume`) can be sent
 * again as it is, as the Go bridge's `Register` / `SetResume` take the whole
 * message. `observed` and `lastUpdated` are sent too, but they are the hub's: it
 * stamps them from the tasks it saw end and ignores what a client sends, so setting
 * a resume never changes the track record.
 */
export type ResumeInit = Partial<Resume>;

/** Extra fields of {@link register}. */
export interface RegisterOptions extends ClientOptions {
  /** Skill markdown (default: the hub renders a fallback from passport and resume). */
  skillMd?: string;
  /** Agent-to-agent settings (default: disabled). */
  a2a?: Partial<A2ASettings>;
  /** Governance rule of this agent's own; it can only narrow the hub's policy (docs/governance.md). */
  rule?: JsonObject;
  /**
   * A fresh random value (at least 16 characters): a retry with it returns the same identity and
   * credential (docs/hub.md). Keep it as secret as the credential.
   */
  idempotencyKey?: string;
}

/** Extra fields of {@link registerHuman}. */
export interface RegisterHumanOptions extends ClientOptions {
  /** Governance rule for this participant. */
  rule?: JsonObject;
  /** As {@link RegisterOptions.idempotencyKey}. */
  idempotencyKey?: string;
}

/** Options of {@link Client.openChannel}. */
export interface OpenChannelOptions {
  /** Adapter type, one of {@link CHANNEL_TYPES}. */
  type: ChannelType;
  /** Invitees by agent id or name (consulting and conversation: exactly one). */
  targets: readonly string[];
  /** Adapter options, e.g. `{max_turns: 6}`. */
  knobs?: JsonObject;
  /** Free-text purpose. */
  intent?: string;
  /** Channel lifetime in seconds (default: the hub's). */
  ttlSeconds?: number;
  /** Seconds to wait for every invite ack (default 30). */
  inviteAckTimeoutSeconds?: number;
  /** Seed text, posted as the initiator once the channel opened. */
  message?: string;
  /** Seed envelope instead of `message` (channelId and senderId may be left empty). */
  seedEnvelope?: Omit<PostInput, "channelId"> & { channelId?: string };
  /** Return only once the channel is OPENED (or ended). */
  waitUntilOpened?: boolean;
  /** Bound on `waitUntilOpened` in seconds (0 = invite timeout + 5 s). */
  waitTimeoutSeconds?: number;
}

/** Result of {@link Client.openChannel}. */
export interface OpenedChannel {
  /** The channel's metadata. */
  channel: ChannelMetadata;
  /** Id of the seed envelope once admitted ("" if none or not yet). */
  seedEnvelopeId: string;
}

/** Result of {@link Client.describeChannel}. */
export interface ChannelDescription {
  /** The metadata. */
  channel: ChannelMetadata;
  /** The adapter's folded state (`{}` once the channel ended). */
  adapterState: JsonObject;
  /** Agent ids expected to speak next (empty = anyone / no one). */
  expectedNext: string[];
}

/** Result of {@link Client.canSend}. */
export interface CanSendResult {
  /** True when a post of that type would be admitted now. */
  allowed: boolean;
  /** Why not, when not allowed. */
  refusal: AgentNetError | undefined;
  /** Agent ids expected to speak next. */
  expectedNext: string[];
}

/** One tool usable now (OpenAI function-tool shape). */
export interface ToolInfo {
  /** Function name, e.g. `peers`. */
  name: string;
  /** What the tool does. */
  description: string;
  /** JSON Schema of the arguments object. */
  parameters: JsonObject;
  /** Plugin or adapter tool. */
  source: ToolSource;
}

/** Options of {@link Client.readWal} and {@link Client.streamWal}. */
export interface ReadWalOptions extends CallOptions {
  /** First seq (inclusive; default 1). */
  fromSeq?: number;
  /** Last seq (inclusive; default the latest). */
  untilSeq?: number;
  /** Maximum envelopes (default: no limit). */
  limit?: number;
}

/** Filters of {@link Client.listAgents}. */
export interface ListAgentsOptions extends CallOptions {
  /** Only this kind. */
  kind?: PassportKind;
  /** Only agents claiming this capability. */
  capability?: string;
  /** Case-insensitive substring over name, description, summary, domains. */
  query?: string;
  /** "name" (default), "registered_at" or "last_seen". */
  sortBy?: string;
  /** Maximum results (default 20). */
  limit?: number;
  /** Leave the caller out. */
  excludeSelf?: boolean;
}

/** Filters of {@link Client.discoverAgents}. */
export interface DiscoverAgentsOptions extends CallOptions {
  /** Project ("" = the caller's). */
  projectId?: string;
  /** Any of these skills. */
  skills?: string[];
  /** Any of these capabilities. */
  capabilities?: string[];
  /** Any of these input modes. */
  inputModes?: string[];
  /** Maximum results (default 50). */
  limit?: number;
}

/** Options of {@link Client.invokeAgent}. */
export interface InvokeAgentOptions extends CallOptions {
  /** Skill to use ("" = the target decides). */
  skill?: string;
  /** Seconds to wait for the answer (default 300). */
  timeoutSeconds?: number;
  /** Headers forwarded to the callee (a key starting with `a2a-`, any case, is refused with INVALID_ARGUMENT). */
  customHeaders?: Record<string, string>;
  /**
   * A call token of the dispatch this call runs in ({@link Client.callTokenFor}):
   * links the call as a child execution. An expired token is refused with
   * reason `TOKEN_EXPIRED` ({@link Client.invokeNested} handles both for you).
   */
  callToken?: string;
  /**
   * Root session to record a top-level call (one without `callToken`) under,
   * e.g. the user's session id ("" = a new one). Ignored with `callToken`.
   */
  rootSessionId?: string;
}

/** Options of {@link Client.listExecutions}. */
export interface ListExecutionsOptions extends CallOptions {
  /** The root session ("" = every root session this identity took part in). */
  rootSessionId?: string;
  /** Maximum results (default 100). */
  limit?: number;
}

type Callback<Res> = (error: ServiceError | null, response: Res) => void;
/** A unary method of a generated grpc-js client (its callback form). */
export type UnaryMethod<Req, Res> = (
  request: Req,
  metadata: Metadata,
  options: Partial<GrpcCallOptions>,
  callback: Callback<Res>,
) => ClientUnaryCall;

/** The shared unary call {@link HubRpc} sends every RPC through (the client's credential, deadline, signal, errors). */
export type UnaryCall = <Req, Res>(method: UnaryMethod<Req, Res>, request: Req, call?: CallOptions) => Promise<Res>;

const DEFAULT_CALL_TIMEOUT_MS = 30_000;

/**
 * One identity on the hub: every unary RPC as a promise (with the credential
 * metadata), plus the Connect stream ({@link connect}, {@link envelopes},
 * {@link post}). Create it with {@link register}, {@link registerHuman} or
 * {@link Client.fromCredential}; end it with {@link close}.
 */
export class Client {
  /** The registry entry returned at registration (undefined for {@link Client.fromCredential}). */
  readonly record: AgentRecord | undefined;
  /** This identity's agent id. */
  readonly agentId: string;
  /** The bearer credential. Keep it secret. */
  readonly credential: string;
  /**
   * The generated grpc-js client. Pass {@link authMetadata} with every call; {@link rpc}
   * sends the unary RPCs with it, a deadline and error mapping for you.
   */
  readonly raw: HubServiceClient;
  /**
   * Every unary RPC of the hub as a typed promise (request and response messages), sent with this
   * client's credential, deadline and error mapping: for requests the methods below do not wrap.
   */
  readonly rpc: HubRpc;
  private readonly callTimeoutMs: number;
  private readonly stream: StreamSession;
  /** Dials the replica a Redirect named, with this client's credentials and channel options. */
  private readonly dialPeer: (address: string) => HubServiceClient;
  /** Connections to the replicas Redirects named, by address (see {@link peer}); closed with the client. */
  private readonly peers = new Map<string, HubServiceClient>();
  private closed = false;
  /** Set once unregister succeeded: a second call is a no-op. */
  private unregistered = false;

  private constructor(
    raw: HubServiceClient,
    agentId: string,
    credential: string,
    record: AgentRecord | undefined,
    options: ClientOptions,
  ) {
    this.raw = raw;
    this.rpc = new HubRpc(raw, (method, request, call) => this.unary(method, request, call));
    this.agentId = agentId;
    this.credential = credential;
    this.record = record;
    this.callTimeoutMs = options.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
    this.dialPeer = (address) => makeStub(address, { ...options, targets: undefined });
    this.stream = new StreamSession({
      stub: raw,
      credential,
      agentId,
      postTimeoutMs: this.callTimeoutMs,
      metadata: () => this.authMetadata(),
      peer: (address) => this.peer(address),
      postUnary: (envelope, address, timeoutMs) => this.postEnvelopeRaw(envelope, address, timeoutMs),
      inviteOpen: async (channelId) => {
        const { channel } = await this.describeChannel(channelId);
        const me = channel.participants.find((p) => p.agentId === agentId);
        return channel.state === ChannelState.CHANNEL_STATE_PENDING && me !== undefined && !me.acked;
      },
    });
  }

  /**
   * A client for an identity registered earlier (e.g. a credential and agent id
   * kept in a secret store), without registering again.
   */
  static fromCredential(target: string, credential: string, agentId: string, options: ClientOptions = {}): Client {
    return new Client(makeStub(target, options), agentId, credential, undefined, options);
  }

  /** @internal Used by {@link register} / {@link registerHuman}. */
  static adopt(raw: HubServiceClient, record: AgentRecord, credential: string, options: ClientOptions): Client {
    return new Client(raw, record.agentId, credential, record, options);
  }

  /** The passport name (from registration; "" for {@link Client.fromCredential}). */
  get name(): string {
    return this.record?.passport?.name ?? "";
  }

  /** `authorization: Bearer <credential>` metadata (a fresh object per call). */
  authMetadata(): Metadata {
    const md = new Metadata();
    md.set("authorization", `Bearer ${this.credential}`);
    return md;
  }

  // -- the Connect stream ----------------------------------------------------------

  /**
   * Open the Connect stream and keep it alive: on a break the bridge reconnects
   * with backoff and resumes from its own cursors. Resolves at the first Welcome;
   * rejects when the hub refuses the stream (e.g. `UNAUTHENTICATED`) or no
   * Welcome arrives within `connectTimeoutMs`. Calling it while connected
   * returns the current session (the first call's options stay in force).
   */
  connect(options: ConnectOptions = {}): Promise<SessionInfo> {
    return this.stream.connect(options);
  }

  /**
   * End the stream but keep this client's cursors and undelivered envelopes;
   * a later {@link connect} resumes after the last processed envelope.
   */
  disconnect(): Promise<void> {
    return this.stream.disconnect();
  }

  /** Where the stream is. */
  get connectionState(): ConnectionState {
    return this.stream.connectionState;
  }

  /**
   * The address of the hub replica a Redirect moved the Connect stream to
   * (docs/scale-out.md "Session steering"); undefined while the stream is on, or
   * returning to, the target this client was given. Posts sent with PostEnvelope
   * while the stream is down go there too; every other call goes to the target
   * given. See {@link ConnectOptions.followRedirects}.
   */
  get redirectedTo(): string | undefined {
    return this.stream.redirectedTo;
  }

  /** The current Welcome while connected. */
  get session(): SessionInfo | undefined {
    return this.stream.session;
  }

  /**
   * This client's resume cursors: per channel, the seq up to which this
   * participant's chain of deliveries (`Delivery.prev_seq` → `seq`) was
   * processed (acked). Sent in Hello on every reconnect.
   */
  cursors(): Cursors {
    return this.stream.cursors();
  }

  /**
   * Delivered envelopes in arrival order (replay first, then live), duplicates
   * dropped by envelope id, payload decoded. One consumer at a time; breaking
   * out of a loop keeps undelivered envelopes for the next loop. Ends after
   * {@link close}; throws the error when the stream failed for good.
   */
  envelopes(options?: EnvelopesOptions): AsyncIterableIterator<InboundEnvelope> {
    return this.stream.envelopes(options);
  }

  /**
   * Post an envelope (any event type). Over the Connect stream when connected,
   * else with PostEnvelope. Resolves with the envelope as admitted (seq,
   * envelopeId, createdAt) after the WAL commit; rejects with an
   * {@link AgentNetError} (e.g. reason `NOT_YOUR_TURN`) when refused.
   */
  post(input: PostInput): Promise<PostedEnvelope> {
    return this.stream.post(input);
  }

  /** Post `ag2.msg.text` with `{text}`, and `images` when given (see {@link Image}). */
  postText(
    channelId: string,
    text: string,
    options: PostOptions & { readonly images?: readonly Image[] } = {},
  ): Promise<PostedEnvelope> {
    const { images, ...rest } = options;
    const eventData: JsonObject = { text };
    if (images !== undefined && images.length > 0) eventData["images"] = images.map(imageData);
    return this.post({ ...rest, channelId, eventType: EventType.TEXT, eventData });
  }

  /** Post `ag2.packet` (a workflow round). */
  postPacket(channelId: string, packet: Packet, options: PostOptions = {}): Promise<PostedEnvelope> {
    const eventData: JsonObject = {};
    if (packet.body !== undefined) eventData["body"] = packet.body;
    if (packet.routing !== undefined) {
      const routing: JsonObject = {};
      if (packet.routing.tool_called !== undefined) routing["tool_called"] = packet.routing.tool_called;
      if (packet.routing.tools_called !== undefined) routing["tools_called"] = [...packet.routing.tools_called];
      for (const key of ["reason", "kind", "target", "close_reason", "summary"] as const) {
        const value = packet.routing[key];
        if (value !== undefined) routing[key] = value;
      }
      eventData["routing"] = routing;
    }
    if (packet.context_updates !== undefined) {
      const updates: JsonObject = {};
      if (packet.context_updates.set !== undefined) updates["set"] = packet.context_updates.set;
      if (packet.context_updates.delete !== undefined) updates["delete"] = [...packet.context_updates.delete];
      eventData["context_updates"] = updates;
    }
    return this.post({ ...options, channelId, eventType: EventType.PACKET, eventData });
  }

  /**
   * Close the stream, end {@link envelopes}, save cursors, wait for background
   * work and close the gRPC channel. Idempotent.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.stream.close();
    this.raw.close();
    for (const peer of this.peers.values()) peer.close();
    this.peers.clear();
    await this.stream.settle();
  }

  // -- identity --------------------------------------------------------------------

  /** One identity's full profile, by agent id or name. */
  async describeAgent(ref: { agentId: string } | { name: string }, call?: CallOptions): Promise<AgentRecord> {
    const agent = "agentId" in ref ? { $case: "agentId" as const, value: ref.agentId } : { $case: "name" as const, value: ref.name };
    const res = await this.rpc.describeAgent({ agent }, call);
    return required(res.agent, "DescribeAgentResponse.agent");
  }

  /** Identities matching the filters (the `peers(action="find")` tool). */
  async listAgents(options: ListAgentsOptions = {}): Promise<AgentSummary[]> {
    const res = await this.rpc.listAgents(
      {
        kind: options.kind ?? PassportKind.PASSPORT_KIND_UNSPECIFIED,
        capability: options.capability ?? "",
        query: options.query ?? "",
        sortBy: options.sortBy ?? "",
        limit: options.limit ?? 0,
        excludeSelf: options.excludeSelf ?? false,
        pageToken: "",
      },
      options,
    );
    return res.agents;
  }

  /** Replace this identity's skill markdown ("" = the hub's fallback). */
  async setSkill(skillMd: string, call?: CallOptions): Promise<AgentRecord> {
    const res = await this.rpc.setSkill({ skillMd }, call);
    return required(res.agent, "SetSkillResponse.agent");
  }

  /** Replace this identity's resume. */
  async setResume(resume: ResumeInit, call?: CallOptions): Promise<AgentRecord> {
    const res = await this.rpc.setResume({ resume: fullResume(resume) }, call);
    return required(res.agent, "SetResumeResponse.agent");
  }

  /**
   * Replace this identity's own governance rule (AG2's `set_rule`; `null` removes it): the policy
   * file's rule shape (`access`, `limits`, `rate`, `inbox`). Validated by the hub
   * (INVALID_ARGUMENT naming the problem), audited as `rule_set`, enforced from the next call on;
   * like the rule given at registration it only narrows what the hub's policy allows.
   */
  async setRule(rule: JsonObject | null, call?: CallOptions): Promise<AgentRecord> {
    const res = await this.rpc.setRule({ agentId: "", ruleJson: rule === null ? "" : JSON.stringify(rule) }, call);
    return required(res.agent, "SetRuleResponse.agent");
  }

  /**
   * The rules governing this identity: its own (`rule`, `undefined` when none), every rule that
   * applies (`rules`: the policy's default, matching entries, its own) and what they combine to
   * (`effective`: `limits`, `rate`, `inbox`).
   */
  async getRule(call?: CallOptions): Promise<{ rule: JsonObject | undefined; rules: { id: string; rule: JsonObject }[]; effective: JsonObject }> {
    const res = await this.rpc.getRule({ agentId: "" }, call);
    return {
      rule: res.ruleJson === "" ? undefined : parseJsonObject(res.ruleJson),
      rules: res.rules.map((r) => ({ id: r.id, rule: parseJsonObject(r.ruleJson) })),
      effective: parseJsonObject(res.effectiveJson),
    };
  }

  /** Remove this identity (its live channels close); returns the closed channel ids (none on a second call). */
  async unregister(call?: CallOptions): Promise<string[]> {
    if (this.unregistered) return []; // a second call is a no-op, as the Python SDK's
    const res = await this.rpc.unregister({}, call);
    this.unregistered = true;
    return res.closedChannelIds;
  }

  // -- channels --------------------------------------------------------------------

  /** Open a channel and invite the targets (optionally seeding it and waiting until OPENED). */
  async openChannel(options: OpenChannelOptions, call?: CallOptions): Promise<OpenedChannel> {
    let seed: { $case: "message"; value: string } | { $case: "seedEnvelope"; value: Envelope } | undefined;
    if (options.seedEnvelope !== undefined) {
      seed = { $case: "seedEnvelope", value: encodePost({ ...options.seedEnvelope, channelId: options.seedEnvelope.channelId ?? "" }) };
    } else if (options.message !== undefined) {
      seed = { $case: "message", value: options.message };
    }
    const waitSeconds = options.waitUntilOpened
      ? (options.waitTimeoutSeconds || (options.inviteAckTimeoutSeconds ?? 30) + 5)
      : 0;
    const res = await this.rpc.openChannel(
      {
        type: options.type,
        targets: [...options.targets],
        knobsJson: options.knobs === undefined ? "" : JSON.stringify(options.knobs),
        intent: options.intent ?? "",
        ttlSeconds: options.ttlSeconds,
        inviteAckTimeoutSeconds: options.inviteAckTimeoutSeconds,
        seed,
        waitUntilOpened: options.waitUntilOpened ?? false,
        waitTimeoutSeconds: options.waitTimeoutSeconds ?? 0,
      },
      withDefaultTimeout(call, waitSeconds > 0 ? (waitSeconds + 10) * 1000 : undefined),
    );
    return { channel: required(res.channel, "OpenChannelResponse.channel"), seedEnvelopeId: res.seedEnvelopeId };
  }

  /** Close a channel this identity participates in (reason "" = `closed_by_agent`). */
  async closeChannel(channelId: string, reason = "", call?: CallOptions): Promise<ChannelMetadata> {
    const res = await this.rpc.closeChannel({ channelId, reason }, call);
    return required(res.channel, "CloseChannelResponse.channel");
  }

  /** A channel's metadata, adapter state and expected next speakers. */
  async describeChannel(channelId: string, call?: CallOptions): Promise<ChannelDescription> {
    const res = await this.rpc.describeChannel({ channelId }, call);
    return {
      channel: required(res.channel, "DescribeChannelResponse.channel"),
      adapterState: parseJsonObject(res.adapterStateJson),
      expectedNext: res.expectedNext,
    };
  }

  /** This identity's channels, newest first. */
  async listChannels(
    options: CallOptions & { includeEnded?: boolean; type?: string; limit?: number } = {},
  ): Promise<ChannelMetadata[]> {
    const res = await this.rpc.listChannels(
      {
        includeEnded: options.includeEnded ?? false,
        type: options.type ?? "",
        limit: options.limit ?? 0,
        pageToken: "",
      },
      options,
    );
    return res.channels;
  }

  /**
   * Would a post of `eventType` (default text) be admitted now? `causationId`: the envelope the post
   * would answer (its delegation depth counts, as for the post).
   */
  async canSend(channelId: string, eventType = "", call?: CallOptions, causationId = ""): Promise<CanSendResult> {
    const res = await this.rpc.canSend({ channelId, eventType, causationId }, call);
    return {
      allowed: res.allowed,
      refusal: res.refusal !== undefined && !res.allowed ? AgentNetError.fromErrorDetail(res.refusal) : undefined,
      expectedNext: res.expectedNext,
    };
  }

  /**
   * The first envelope `sender` (an agent name or id; "" = you) posted to the channel whose
   * `causationId` is `causationId` — whether that envelope was answered already — or undefined.
   * A handler asks before answering an envelope delivered again (a crash between its reply and
   * its ack), so it posts no second reply. One indexed lookup on the hub.
   */
  async findReply(channelId: string, causationId: string, sender = "", call?: CallOptions): Promise<AgentEnvelope | undefined> {
    const res = await this.rpc.findReply({ channelId, causationId, sender }, call);
    return res.envelope === undefined ? undefined : decodeEnvelope(res.envelope);
  }

  /**
   * Tell the hub that this identity's turn on `envelopeId` failed (its model call, a tool or its
   * handler threw): the channel's members get an `ag2.channel.turn_failed` event and the channel's
   * `on_turn_failed` policy applies (a consulting channel closes with `turn_failed`; docs/hub.md
   * "Failed turns"). Send the error's class and message only, never the prompt (the hub redacts
   * what looks like a credential and keeps 300 characters). Returns whether the event was posted.
   */
  async reportTurnFailure(
    channelId: string,
    envelopeId: string,
    errorClass: string,
    message: string,
    options: CallOptions & { attempts?: number } = {},
  ): Promise<{ posted: boolean; action: string }> {
    const res = await this.rpc.reportTurnFailure(
      { channelId, envelopeId, errorClass, message, attempts: options.attempts ?? 0 },
      options,
    );
    return { posted: res.posted, action: res.action };
  }

  /**
   * The turns this identity's channels await from it now, one page at a time (docs/hub.md
   * "Pending turns"): the adapter expects it to speak next and it has not answered the latest
   * message. `limit` 0 = 100, at most 1000; `pageToken` "" = the first page; `nextPageToken` ""
   * = that was the last page.
   */
  async listPendingTurns(
    options: CallOptions & { limit?: number; pageToken?: string } = {},
  ): Promise<{ turns: { channelId: string; seq: number; envelopeId: string }[]; nextPageToken: string }> {
    const res = await this.rpc.listPendingTurns(
      { limit: options.limit ?? 0, pageToken: options.pageToken ?? "" },
      options,
    );
    return {
      turns: res.turns.map((t) => ({ channelId: t.channelId, seq: Number(t.seq), envelopeId: t.envelopeId })),
      nextPageToken: res.nextPageToken,
    };
  }

  /** The visible envelopes of a WAL range, in seq order. */
  async readWal(channelId: string, options: ReadWalOptions = {}): Promise<AgentEnvelope[]> {
    const out: AgentEnvelope[] = [];
    for await (const env of this.walStream(channelId, options, false)) out.push(env);
    return out;
  }

  /**
   * Follow a channel's WAL: the visible envelopes from `fromSeq`, then each new
   * one as it is admitted, until the channel ends or the loop stops.
   */
  streamWal(channelId: string, options: Omit<ReadWalOptions, "timeoutMs"> = {}): AsyncIterableIterator<AgentEnvelope> {
    return this.walStream(channelId, { ...options, timeoutMs: 0 }, true);
  }

  // -- tools -----------------------------------------------------------------------

  /** The tools usable now: the plugin tools and the adapter tools of `channelId` for this turn. */
  async listTools(channelId = "", options: CallOptions & { excludePlugin?: boolean } = {}): Promise<ToolInfo[]> {
    const res = await this.rpc.listTools({ channelId, excludePlugin: options.excludePlugin ?? false }, options);
    return res.tools.map((t) => ({
      name: t.name,
      description: t.description,
      parameters: parseJsonObject(t.parametersJsonSchema),
      source: t.source,
    }));
  }

  /**
   * Run one tool with JSON arguments (as an LLM produced them); returns its JSON result.
   * `causationId` is the envelope the caller's turn answers: a `delegate` then counts one
   * hop more than it, so delegation chains stop at the hub's depth limit.
   */
  async callTool(
    name: string,
    args: JsonObject,
    options: CallOptions & { channelId?: string; taskId?: string; causationId?: string } = {},
  ): Promise<JsonValue> {
    const res = await this.rpc.callTool(
      {
        name,
        argumentsJson: JSON.stringify(args),
        channelId: options.channelId ?? "",
        taskId: options.taskId ?? "",
        causationId: options.causationId ?? "",
      },
      options,
    );
    return parseJsonValue(res.resultJson);
  }

  // -- tasks -----------------------------------------------------------------------

  /**
   * Start a task this identity owns (ReportTask STARTED), in `channelId` ("" = none); returns its mirror.
   * `capability` tags it: when it ends, the hub counts its outcome in this identity's
   * `resume.observed[capability]` (read it with `describeAgent`).
   */
  async startTask(
    title: string,
    options: CallOptions & { channelId?: string; ttlSeconds?: number; capability?: string } = {},
  ): Promise<TaskMetadata> {
    const res = await this.rpc.reportTask(
      {
        taskId: "",
        kind: TaskEventKind.TASK_EVENT_KIND_STARTED,
        title,
        channelId: options.channelId ?? "",
        payloadJson: "",
        error: "",
        ttlSeconds: options.ttlSeconds,
        capability: options.capability ?? "",
      },
      options,
    );
    return required(res.task, "ReportTaskResponse.task");
  }

  /** End this identity's task: completed with `result` (any JSON value), or failed when `error` is given. */
  async endTask(taskId: string, outcome: { result?: JsonValue; error?: string } = {}, call?: CallOptions): Promise<TaskMetadata> {
    const failed = outcome.error !== undefined && outcome.error !== "";
    const res = await this.rpc.reportTask(
      {
        taskId,
        kind: failed ? TaskEventKind.TASK_EVENT_KIND_FAILED : TaskEventKind.TASK_EVENT_KIND_COMPLETED,
        title: "",
        channelId: "",
        payloadJson: !failed && outcome.result !== undefined ? JSON.stringify(outcome.result) : "",
        error: failed ? (outcome.error ?? "") : "",
        ttlSeconds: undefined,
        capability: "",
      },
      call,
    );
    return required(res.task, "ReportTaskResponse.task");
  }

  /**
   * Ask the owner of a task to cancel it (an urgent `ag2.task.cancel_request` reaches the owner
   * when the task has a channel). The task must be this identity's or belong to a channel it
   * participates in (PERMISSION_DENIED otherwise; FAILED_PRECONDITION once it ended); the
   * `tasks` tool's `action: "cancel"` is the same call.
   */
  async cancelTask(taskId: string, reason = "", call?: CallOptions): Promise<TaskMetadata> {
    const res = await this.rpc.cancelTask({ taskId, reason }, call);
    return required(res.task, "CancelTaskResponse.task");
  }

  /**
   * Save `state` as the checkpoint of this identity's running task, replacing the last one
   * (AG2's `checkpoint_task`). Durable on the hub; at most its `--max-checkpoint-bytes`
   * (PAYLOAD_TOO_LARGE beyond); only the task's owner may save, while the task runs.
   */
  async checkpointTask(taskId: string, state: JsonObject, call?: CallOptions): Promise<void> {
    await this.rpc.checkpointTask({ taskId, stateJson: JSON.stringify(state) }, call);
  }

  /**
   * The last checkpoint of this identity's task (running or ended), or `undefined` when none
   * was saved (AG2's `read_task_checkpoint`): what a restarted agent resumes from.
   */
  async readTaskCheckpoint(taskId: string, call?: CallOptions): Promise<JsonObject | undefined> {
    const res = await this.rpc.readTaskCheckpoint({ taskId }, call);
    return res.found ? parseJsonObject(res.stateJson) : undefined;
  }

  /** One-shot consultation: open a consulting channel, ask, wait for the single reply. */
  async delegate(
    target: string,
    prompt: string,
    options: CallOptions & { capability?: string; timeoutSeconds?: number; causationId?: string } = {},
  ): Promise<DelegateResponse> {
    const timeoutSeconds = options.timeoutSeconds ?? 300;
    return this.rpc.delegate(
      { target, prompt, capability: options.capability ?? "", timeoutSeconds, causationId: options.causationId ?? "" },
      withDefaultTimeout(options, (timeoutSeconds + 10) * 1000),
    );
  }

  /** Post text to a channel (the `say` tool); audience by peer names or ids (empty = broadcast). */
  async say(
    channelId: string,
    content: string,
    options: CallOptions & { audience?: string[]; causationId?: string } = {},
  ): Promise<AgentEnvelope> {
    const res = await this.rpc.say(
      { content, audience: options.audience ?? [], channelId, causationId: options.causationId },
      options,
    );
    return decodeEnvelope(required(res.envelope, "SayResponse.envelope"));
  }

  // -- A2A -------------------------------------------------------------------------

  /** The A2A-enabled agents this identity may see and invoke. */
  async discoverAgents(options: DiscoverAgentsOptions = {}): Promise<DiscoveredAgent[]> {
    const res = await this.rpc.discoverAgents(
      {
        projectId: options.projectId ?? "",
        skills: options.skills ?? [],
        capabilities: options.capabilities ?? [],
        inputModes: options.inputModes ?? [],
        limit: options.limit ?? 0,
      },
      options,
    );
    return res.agents;
  }

  /** Replace this identity's A2A settings (omitted fields are cleared: `enabled` false, lists empty). */
  async setA2ASettings(a2a: Partial<A2ASettings>, call?: CallOptions): Promise<AgentRecord> {
    const res = await this.rpc.setA2ASettings({ a2a: A2ASettings.fromPartial(a2a) }, call);
    return required(res.agent, "SetA2ASettingsResponse.agent");
  }

  /**
   * Call another agent and wait for its answer. Resolves with status
   * COMPLETED (`result` = the answer), INPUT_REQUIRED (`result` = the callee's
   * question) or FAILED (`error`); rejects when the hub refuses the call.
   */
  async invokeAgent(agentId: string, message: string, options: InvokeAgentOptions = {}): Promise<InvokeAgentResponse> {
    const timeoutSeconds = options.timeoutSeconds;
    return this.rpc.invokeAgent(
      {
        agentId,
        message,
        skill: options.skill ?? "",
        timeoutSeconds,
        customHeaders: options.customHeaders ?? {},
        callToken: options.callToken ?? "",
        rootSessionId: options.rootSessionId ?? "",
        // This method waits for the answer: it never detaches, and starts a new call.
        detach: false,
        continuesExecutionId: "",
      },
      withDefaultTimeout(options, ((timeoutSeconds ?? 300) + 10) * 1000),
    );
  }

  /**
   * {@link invokeAgent} from inside an A2A dispatch this identity is answering:
   * obtains a call token of the dispatch's execution on first use (kept in
   * `dispatch`), and on `TOKEN_EXPIRED` a fresh one once, and retries. See {@link invokeNested}.
   */
  invokeNested(
    dispatch: A2ADispatchInfo,
    agentId: string,
    message: string,
    options: NestedInvokeOptions = {},
  ): Promise<InvokeAgentResponse> {
    return invokeNested(this, dispatch, agentId, message, options);
  }

  /** Exchange a call token that is still valid (or expired within the hub's grace period) for a fresh one. */
  async refreshCallToken(callToken: string, call?: CallOptions): Promise<RefreshCallTokenResponse> {
    return this.rpc.refreshCallToken({ callToken, executionId: "" }, call);
  }

  /**
   * A call token of the running execution `executionId` this identity is the
   * target of (the A2A dispatch it answers): pass it as `callToken` to link
   * nested calls. Refused with PERMISSION_DENIED (another agent's call) or
   * FAILED_PRECONDITION (the call is not running).
   */
  async callTokenFor(executionId: string, call?: CallOptions): Promise<RefreshCallTokenResponse> {
    return this.rpc.refreshCallToken({ callToken: "", executionId }, call);
  }

  /** The A2A executions (call tree) of a root session, in start order. */
  async listExecutions(options: ListExecutionsOptions = {}): Promise<Execution[]> {
    const res = await this.rpc.listExecutions(
      { rootSessionId: options.rootSessionId ?? "", limit: options.limit ?? 0 },
      options,
    );
    return res.executions;
  }

  /**
   * Answer an A2A question (an envelope {@link a2aDispatchOf} recognises): post
   * `ag2.msg.text` in its channel, replying to it, with the outcome — `completed`
   * (default; `text` is the result), `input-required` (`text` is your question)
   * or `failed` (`error`, else `text`, says why).
   */
  replyA2A(question: AgentEnvelope, text: string, options: PostOptions & A2AReplyOptions = {}): Promise<PostedEnvelope> {
    const { status, error, ...post } = options;
    return this.post({
      causationId: question.envelopeId,
      ...post,
      channelId: question.channelId,
      eventType: EventType.TEXT,
      eventData: a2aReplyData(text, { status, error }),
    });
  }

  // -- plumbing --------------------------------------------------------------------

  private unary<Req, Res>(
    method: UnaryMethod<Req, Res>,
    request: Req,
    call: CallOptions = {},
    defaultTimeoutMs?: number,
    waitForReady = false,
    stub: HubServiceClient = this.raw,
  ): Promise<Res> {
    return new Promise<Res>((resolve, reject) => {
      if (this.closed) {
        reject(new AgentNetError({ code: 1, reason: "CANCELLED", message: "the client is closed; create a new one." }));
        return;
      }
      if (call.signal?.aborted === true) {
        reject(new AgentNetError({ code: 1, reason: "CANCELLED", message: "the call was aborted before it started" }));
        return;
      }
      const timeoutMs = call.timeoutMs ?? defaultTimeoutMs ?? this.callTimeoutMs;
      const options: Partial<GrpcCallOptions> = timeoutMs > 0 ? { deadline: Date.now() + timeoutMs } : {};
      const metadata = this.authMetadata();
      if (waitForReady) metadata.setOptions({ waitForReady: true });
      let onAbort: (() => void) | undefined;
      let handle: ClientUnaryCall;
      try {
        handle = method.call(stub, request, metadata, options, (err, res) => {
          if (onAbort !== undefined) call.signal?.removeEventListener("abort", onAbort);
          if (err !== null) reject(AgentNetError.fromServiceError(err));
          else resolve(res);
        });
      } catch (err) {
        reject(AgentNetError.fromServiceError(err));
        return;
      }
      if (call.signal !== undefined) {
        onAbort = () => handle.cancel();
        call.signal.addEventListener("abort", onAbort, { once: true });
      }
    });
  }

  /**
   * PostEnvelope, waiting for a reachable hub (for at most `callTimeoutMs`) and
   * retried by grpc-js while its hub is away ({@link POST_RETRY_SERVICE_CONFIG}).
   */
  /**
   * PostEnvelope on the target given, waiting for a reachable hub; or, with `address`, on
   * the replica a Redirect named, failing fast when it does not answer (the session then
   * tries again where its stream goes next).
   */
  private async postEnvelopeRaw(envelope: Envelope, address?: string, timeoutMs?: number): Promise<PostedEnvelope> {
    const stub = address === undefined ? undefined : this.peer(address);
    const res = await this.unary(this.raw.postEnvelope, { envelope }, { timeoutMs }, undefined, stub === undefined, stub);
    return decodePosted(required(res.envelope, "PostEnvelopeResponse.envelope"), res.duplicate);
  }

  /**
   * The connection to the hub replica at `address` (one a Redirect named): dialed once per
   * address with this client's credentials (TLS as given: without `tls.serverName` the
   * replica's certificate must name the address's host) and channel options, closed with
   * the client.
   */
  private peer(address: string): HubServiceClient {
    let peer = this.peers.get(address);
    if (peer === undefined) {
      peer = this.dialPeer(address);
      this.peers.set(address, peer);
    }
    return peer;
  }

  private async *walStream(channelId: string, options: ReadWalOptions, follow: boolean): AsyncIterableIterator<AgentEnvelope> {
    const timeoutMs = options.timeoutMs ?? this.callTimeoutMs;
    const stream = this.raw.readWal(
      {
        channelId,
        fromSeq: options.fromSeq ?? 0,
        untilSeq: options.untilSeq ?? 0,
        limit: options.limit ?? 0,
        follow,
      },
      this.authMetadata(),
      timeoutMs > 0 ? { deadline: Date.now() + timeoutMs } : {},
    );
    const onAbort = (): void => stream.cancel();
    options.signal?.addEventListener("abort", onAbort, { once: true });
    try {
      for await (const item of stream as AsyncIterable<{ envelope?: Envelope }>) {
        if (item.envelope !== undefined) yield decodeEnvelope(item.envelope);
      }
    } catch (err) {
      throw AgentNetError.fromServiceError(err);
    } finally {
      options.signal?.removeEventListener("abort", onAbort);
      stream.cancel();
    }
  }
}

/**
 * The gRPC service config every client's channel gets by default: grpc-js retries a
 * PostEnvelope that failed with UNAVAILABLE before an answer (its hub died or was
 * shutting down), up to 5 attempts, against whichever replica the channel reaches; the
 * bridge sends PostEnvelope with `waitForReady` (grpc-js takes that from the call, not
 * from this config), so each attempt waits for a reachable hub. Retrying is safe because
 * every post carries an idempotency key: a post the dead hub had stored is answered with
 * the stored envelope (`duplicate: true`). Other errors come back at once. A caller
 * passing its own `grpc.service_config` in `channelOptions` should include this method
 * config.
 */
export const POST_RETRY_SERVICE_CONFIG = {
  methodConfig: [
    {
      name: [{ service: "agentnet.v1.HubService", method: "PostEnvelope" }],
      retryPolicy: {
        maxAttempts: 5,
        initialBackoff: "0.1s",
        maxBackoff: "2s",
        backoffMultiplier: 2,
        retryableStatusCodes: ["UNAVAILABLE"],
      },
    },
  ],
};

/**
 * grpc-js backs off reconnecting a failed channel up to 120 s by default; the
 * bridge's own reconnect loop would then wait on it. Keep the channel's backoff
 * short, and retry posts across a hub failover (callers can override these in
 * `channelOptions`).
 */
const DEFAULT_CHANNEL_OPTIONS: ChannelOptions = {
  "grpc.initial_reconnect_backoff_ms": 200,
  "grpc.max_reconnect_backoff_ms": 5000,
  "grpc.service_config": JSON.stringify(POST_RETRY_SERVICE_CONFIG),
};

function makeStub(target: string, options: ClientOptions): HubServiceClient {
  if (options.tls !== undefined && options.credentials !== undefined) {
    throw new AgentNetError({ code: 3, reason: Reason.INVALID_ARGUMENT, message: "pass either tls or credentials, not both" });
  }
  const channel = channelTarget(target, options.targets);
  if (options.tls !== undefined && !options.tls.serverName && /^ipv[46]:.*,/.test(channel)) {
    // grpc-js checks every replica's certificate against one name: the first address unless told
    throw new AgentNetError({
      code: 3,
      reason: Reason.INVALID_ARGUMENT,
      message: "several hub targets over TLS need tls.serverName: a name every replica's certificate carries",
    });
  }
  const tls = options.tls === undefined ? undefined : tlsChannel(options.tls);
  return new HubServiceClient(channel, tls?.credentials ?? options.credentials ?? grpcCredentials.createInsecure(), {
    ...DEFAULT_CHANNEL_OPTIONS,
    ...tls?.channelOptions,
    ...options.channelOptions,
  });
}

/**
 * `call` with its deadline defaulting to `timeoutMs` (undefined: the client's `callTimeoutMs`), for an
 * RPC that waits on the hub for longer than a plain call.
 */
function withDefaultTimeout(call: CallOptions | undefined, timeoutMs: number | undefined): CallOptions {
  return { timeoutMs: call?.timeoutMs ?? timeoutMs, signal: call?.signal };
}

function required<T>(value: T | undefined, what: string): T {
  if (value === undefined) {
    throw new AgentNetError({ code: 13, reason: "INTERNAL", message: `the hub's answer lacks ${what}` });
  }
  return value;
}

function fullPassport(passport: PassportInit, kind: PassportKind): Passport {
  return {
    name: passport.name,
    kind: passport.kind ?? kind,
    owner: passport.owner ?? "",
    provider: passport.provider ?? "",
    model: passport.model ?? "",
    project: passport.project ?? "",
    description: passport.description ?? "",
    labels: { ...(passport.labels ?? {}) },
  };
}

function fullResume(resume: ResumeInit = {}): Resume {
  return {
    claimedCapabilities: [...(resume.claimedCapabilities ?? [])],
    domains: [...(resume.domains ?? [])],
    summary: resume.summary ?? "",
    examples: [...(resume.examples ?? [])],
    tools: [...(resume.tools ?? [])],
    languages: [...(resume.languages ?? [])],
    // The hub's to stamp: sent as given (as the Go bridge does), ignored by the hub.
    observed: { ...(resume.observed ?? {}) },
    lastUpdated: resume.lastUpdated,
  };
}

function callRegister<Req, Res extends { agent?: AgentRecord | undefined; credential: string }>(
  stub: HubServiceClient,
  method: UnaryMethod<Req, Res>,
  request: Req,
  options: ClientOptions,
): Promise<Client> {
  const timeoutMs = options.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
  return new Promise<Client>((resolve, reject) => {
    try {
      method.call(stub, request, new Metadata(), timeoutMs > 0 ? { deadline: Date.now() + timeoutMs } : {}, (err, res) => {
        if (err !== null) {
          stub.close();
          reject(AgentNetError.fromServiceError(err));
          return;
        }
        try {
          resolve(Client.adopt(stub, required(res.agent, "agent"), res.credential, options));
        } catch (e) {
          stub.close();
          reject(AgentNetError.fromServiceError(e));
        }
      });
    } catch (err) {
      stub.close();
      reject(AgentNetError.fromServiceError(err));
    }
  });
}

/**
 * Register an agent (kind `REMOTE_AGENT` unless the passport says otherwise;
 * kind `HUMAN` is refused — use {@link registerHuman}) and return its client.
 *
 * @param target - the hub address, e.g. `127.0.0.1:7600`
 */
export async function register(
  target: string,
  passport: PassportInit,
  resume?: ResumeInit,
  options: RegisterOptions = {},
): Promise<Client> {
  const stub = makeStub(target, options);
  return callRegister(
    stub,
    stub.register,
    {
      passport: fullPassport(passport, PassportKind.PASSPORT_KIND_REMOTE_AGENT),
      resume: fullResume(resume),
      skillMd: options.skillMd,
      a2a: options.a2a === undefined ? undefined : A2ASettings.fromPartial(options.a2a),
      ruleJson: options.rule === undefined ? "" : JSON.stringify(options.rule),
      idempotencyKey: options.idempotencyKey ?? "",
    },
    options,
  );
}

/** Register a non-LLM participant (kind `HUMAN`) and return its client. */
export async function registerHuman(
  target: string,
  passport: PassportInit,
  resume?: ResumeInit,
  options: RegisterHumanOptions = {},
): Promise<Client> {
  const stub = makeStub(target, options);
  return callRegister(
    stub,
    stub.registerHuman,
    {
      passport: fullPassport(passport, PassportKind.PASSPORT_KIND_HUMAN),
      resume: fullResume(resume),
      ruleJson: options.rule === undefined ? "" : JSON.stringify(options.rule),
      idempotencyKey: options.idempotencyKey ?? "",
    },
    options,
  );
}
