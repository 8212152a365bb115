import { type ClientDuplexStream, type Metadata, status as GrpcStatus } from "@grpc/grpc-js";
import { type Cursors, CursorBook, type CursorStore } from "./cursors";
import { type AgentEnvelope, decodeEnvelope, decodePosted, encodePost, EventType, HUB_SENDER, type PostedEnvelope, type PostInput } from "./envelope";
import { AgentNetError, RateLimitedError, Reason } from "./errors";
import type { ConnectRequest, ConnectResponse, Delivery, Envelope, HubServiceClient, Post, PostResult } from "./gen";
import { isJsonObject, type JsonObject } from "./json";
import { packPosts, postLimit } from "./postbatch";
import { AsyncQueue } from "./queue";

/** Where the Connect stream is. */
export type ConnectionState =
  /** Never connected, or disconnect() was called. */
  | "idle"
  /** Opening a stream and waiting for Welcome. */
  | "connecting"
  /** Welcome received; deliveries flow. */
  | "connected"
  /** The stream broke; waiting for the next attempt. */
  | "reconnecting"
  /** Stopped by an error that retrying cannot fix (bad credential, replaced by a newer stream). */
  | "failed"
  /** close() was called. */
  | "closed";

/** What the hub said in Welcome. */
export interface SessionInfo {
  /** The authenticated participant. */
  agentId: string;
  /** Unique id of this stream session (for logs). */
  sessionId: string;
  /**
   * The resume cursor of every channel of the participant: the one this client
   * sent in Hello, else the hub's stored one. Replay starts above it.
   */
  resumeCursors: Cursors;
  /** Interval at which the bridge pings an idle stream. */
  keepaliveSeconds: number;
  /** Most posts the hub accepts in one PostBatch frame (0 = a hub without PostBatch). */
  maxPostBatch: number;
  /** True when the hub reads acks riding in a PostBatch (false: an older hub, acks only in Ack frames). */
  postBatchAck: boolean;
  /**
   * The turns this participant's channels awaited from it when the stream began (Welcome.pending_turns):
   * the adapter expects it to speak next and it has not answered `envelopeId` (seq `seq`). Read one with
   * `readWal` (from = until = seq) unless it is replayed too (seq above its channel's resume cursor),
   * and answer it once (drop a second sighting by envelope id). At most 1000 (`pendingTurnsTruncated`).
   */
  pendingTurns: { channelId: string; seq: number; envelopeId: string }[];
  /** True when the hub had more than 1000 pending turns to list. */
  pendingTurnsTruncated: boolean;
}

/** A channel invite as handed to {@link ConnectOptions.onInvite}. */
export interface Invite {
  /** The channel. */
  channelId: string;
  /** Adapter type, e.g. `discussion`. */
  type: string;
  /** The initiator's agent id. */
  initiator: string;
  /** The initiator's name. */
  initiatorName: string;
  /** Free-text purpose. */
  intent: string;
  /** Participants in turn order (the initiator first). */
  participants: string[];
  /** Adapter options. */
  knobs: JsonObject;
  /** The invite envelope itself. */
  envelope: AgentEnvelope;
}

/** Reconnect backoff (exponential with ±20 % jitter). */
export interface BackoffOptions {
  /** First delay (default 200 ms). */
  initialDelayMs?: number;
  /** Largest delay (default 5000 ms). */
  maxDelayMs?: number;
  /** Growth factor per failed attempt (default 2). */
  multiplier?: number;
}

/** Options of {@link Client.connect}. */
export interface ConnectOptions {
  /**
   * Persist resume cursors here (e.g. a {@link JsonFileCursorStore}): loaded
   * before the first Hello, saved whenever a cursor moves.
   */
  cursorStore?: CursorStore;
  /** Most unacked deliveries the hub may have outstanding (0 = the hub's default). */
  maxInFlight?: number;
  /**
   * Most post results and deliveries the hub may pack into one `Batch` frame
   * (Hello `max_batch`; the hub caps it at its `--max-batch`). Default 256;
   * 0 = a frame per post result and delivery, as before batches existed. Batched
   * or not, every delivery goes through the same dedup, cursors and invite
   * handling, in the hub's order, and a frame's acks leave together.
   */
  maxBatch?: number;
  /**
   * Most posts the bridge packs into one `PostBatch` frame. Posts made together
   * (in the same turn of the event loop, or while the stream's write buffer is
   * full) leave in one frame once the stream can write, without waiting for more;
   * a lone post goes as a plain `Post`. Default: as many as the hub accepts
   * (Welcome `max_post_batch`); 0 = a frame per post. A hub that predates
   * PostBatch (`max_post_batch` 0) always gets single Posts. Each post still
   * resolves or rejects on its own.
   */
  maxPostBatch?: number;
  /**
   * How long (ms) an ack may wait for a post to carry it, when the hub reads acks
   * riding in a `PostBatch` (Welcome `post_batch_ack`, with `max_post_batch` above 0):
   * the acks pending when the bridge writes posts go in that frame (a lone post then
   * goes as a PostBatch of one), so a reply and the ack of the envelope it answers
   * cost the hub one frame. An ack that waited this long without a post goes in an
   * Ack frame of its own, and so do the pending acks at once when a quarter of
   * `maxInFlight` (the hub's default 1024 when unset; at least 2) are pending, so the
   * hub's flow control and stored cursors stay close behind. Default
   * {@link DEFAULT_ACK_DELAY_MS}; 0 = acks only in Ack frames (those made in one turn
   * of the event loop together), as with a hub that does not read them.
   */
  ackDelayMs?: number;
  /** Client identification for the hub's logs. */
  clientName?: string;
  /**
   * Decide on channel invites: resolve true to post `ag2.channel.invite_ack`,
   * false to post `ag2.channel.invite_reject`. Default: accept every invite.
   * An answer refused with `RATE_LIMITED` is posted again after the refusal's
   * retry-after. The invite envelope is also delivered to {@link Client.envelopes}.
   */
  onInvite?: (invite: Invite) => boolean | Promise<boolean>;
  /** Reconnect backoff, or false to stop (state "failed") when the stream breaks. */
  reconnect?: BackoffOptions | false;
  /**
   * Reject connect() when no Welcome arrived within this time (default 15000 ms;
   * 0 = wait forever). The bridge keeps trying in the background until
   * disconnect() or close().
   */
  connectTimeoutMs?: number;
  /** Background errors: a failed invite ack, a cursor store write, a fatal stream error. */
  onError?: (error: AgentNetError) => void;
  /** Every state change of the stream. */
  onStateChange?: (state: ConnectionState) => void;
  /**
   * Follow the hub's Redirect frames (session steering, docs/scale-out.md): with the
   * channels divided among hub replicas, a replica may ask the stream to move to the
   * replica holding most of this participant's channels. Default true: the bridge ends
   * the stream and reconnects at once to the named address, on a connection of its own
   * (this client's credentials and channel options), resuming from its cursors; posts
   * whose result had not come are sent again with PostEnvelope under the same
   * idempotency key. A moved stream that ends goes back to the target given; after a
   * Redirect that led nowhere (no Welcome there) none is followed for
   * {@link REDIRECT_PAUSE_MS}. False: Hello does not ask for redirects, the hub sends
   * none and the stream stays where it connected. See {@link Client.redirectedTo}.
   */
  followRedirects?: boolean;
}

/** An envelope delivered on the Connect stream. */
export interface InboundEnvelope extends AgentEnvelope {
  /** True when it was sent while the hub replayed from the resume cursors. */
  readonly replay: boolean;
  /**
   * Mark it processed: the bridge acks it to the hub and moves this client's
   * cursor. Idempotent. Unacked envelopes are delivered again after a reconnect.
   */
  ack(): void;
}

/** Options of {@link Client.envelopes}. */
export interface EnvelopesOptions {
  /**
   * Ack each envelope when the loop asks for the next one (i.e. after the loop
   * body ran). The envelope in hand when the loop exits early (break, throw) is
   * not acked. Default false: call `ack()` yourself.
   */
  autoAck?: boolean;
}

/** What the session needs from its client. @internal */
export interface SessionHost {
  readonly stub: HubServiceClient;
  readonly credential: string;
  readonly agentId: string;
  /** Bound on a PostEnvelope fallback, retries included (ms; 0 = none). */
  readonly postTimeoutMs: number;
  metadata(): Metadata;
  /** The connection to the hub replica at `address` (one a Redirect named), made once per address. */
  peer(address: string): HubServiceClient;
  /**
   * PostEnvelope (the admitted envelope and its duplicate flag): on the target given, waiting
   * for a hub and retried while the hub is away; with `address`, on that replica (a Redirect's),
   * failing fast when it does not answer.
   */
  postUnary(envelope: Envelope, address?: string, timeoutMs?: number): Promise<PostedEnvelope>;
  /** True when this participant's invite to the channel is still open (PENDING, not acked). */
  inviteOpen(channelId: string): Promise<boolean>;
}

interface PendingPost {
  envelope: Envelope;
  resolve: (env: PostedEnvelope) => void;
  reject: (err: AgentNetError) => void;
}

interface Waiter {
  resolve: (info: SessionInfo) => void;
  reject: (err: AgentNetError) => void;
  timer: NodeJS.Timeout | undefined;
}

/** Hubs before the SUPERSEDED reason ended a superseded stream with UNAVAILABLE and this text. */
const REPLACED_MARKER = "replaced by a newer Connect";
const FATAL_CODES = new Set<number>([
  GrpcStatus.UNAUTHENTICATED,
  GrpcStatus.PERMISSION_DENIED,
  GrpcStatus.INVALID_ARGUMENT,
  GrpcStatus.FAILED_PRECONDITION,
  GrpcStatus.NOT_FOUND,
  GrpcStatus.UNIMPLEMENTED,
]);
const END_GRACE_MS = 1000;
const DEFAULT_MAX_BATCH = 256;
const WELCOME_WATCHDOG_MS = 15_000;
/** The hub's `max_in_flight` when Hello asks for 0 (its default). */
const HUB_DEFAULT_MAX_IN_FLIGHT = 1024;
/** How long (ms) no Redirect is followed after one whose replica gave no Welcome (unreachable, or it refused). */
export const REDIRECT_PAUSE_MS = 60_000;
/** {@link ConnectOptions.ackDelayMs} when unset: the longest an ack waits for a post to ride in. */
export const DEFAULT_ACK_DELAY_MS = 5;

/**
 * How long an ack may wait for a post to carry it on a stream whose Welcome said
 * `postBatchAck` and `maxPostBatch`: `option` (default {@link DEFAULT_ACK_DELAY_MS})
 * when the hub reads acks riding in a PostBatch, else 0 (acks only in Ack frames).
 *
 * @internal
 */
export function ackWait(postBatchAck: boolean, maxPostBatch: number, option: number | undefined): number {
  if (!postBatchAck || maxPostBatch <= 0) return 0;
  return Math.max(0, option ?? DEFAULT_ACK_DELAY_MS);
}

function closedError(what: string): AgentNetError {
  return new AgentNetError({ code: GrpcStatus.CANCELLED, reason: "CANCELLED", message: what });
}

/**
 * The Connect stream of one client: handshake, frame dispatch, posts and their
 * results, acks and cursors, keep-alive, reconnect. Owned by {@link Client}.
 *
 * @internal
 */
export class StreamSession {
  private state: ConnectionState = "idle";
  private options: ConnectOptions = {};
  private readonly book = new CursorBook();
  private queue = new AsyncQueue<InboundEnvelope>();
  private call: ClientDuplexStream<ConnectRequest, ConnectResponse> | undefined;
  private generation = 0;
  private streamEnded = true;
  private info: SessionInfo | undefined;
  private waiters: Waiter[] = [];
  private readonly posts = new Map<string, PendingPost>();
  /** Posts waiting for the stream's writer (sent by flushPosts). */
  private outPosts: Post[] = [];
  /** A flush of outPosts is scheduled or waits for the stream's 'drain'. */
  private postFlush = false;
  /** Most posts per frame on the current stream (1 = single Posts). */
  private postLimit = 1;
  private nextRequestId = 1;
  private nextNonce = 1;
  private ackBatch: Array<{ channelId: string; seq: number }> = [];
  private ackScheduled = false;
  /** How long an ack may wait for a post on the current stream (0 = acks only in Ack frames). */
  private ackWaitMs = 0;
  /** Sends the pending acks once they waited ackWaitMs. */
  private ackTimer: NodeJS.Timeout | undefined;
  private attempts = 0;
  private backoffTimer: NodeJS.Timeout | undefined;
  private keepaliveTimer: NodeJS.Timeout | undefined;
  private lastSent = 0;
  private lastReceived = 0;
  private stopping = false;
  private closing = false;
  private welcomeTimer: NodeJS.Timeout | undefined;
  private streamDone: (() => void) | undefined;
  private readonly storesLoaded = new WeakSet<CursorStore>();
  private readonly background = new Set<Promise<unknown>>();
  private readonly sleepers = new Set<() => void>();
  /** The replica a Redirect moved the stream to (undefined = the target given). */
  private redirected: string | undefined;
  /** No Redirect is followed before this time (ms since the epoch): the last one led nowhere. */
  private redirectPausedUntil = 0;
  /** The current stream got its Welcome. */
  private welcomed = false;
  /** The current stream ends to follow a Redirect. */
  private moving = false;
  /** Redirects followed (for tests). @internal */
  redirects = 0;
  /** Batch frames received (for tests). @internal */
  batchFrames = 0;
  /** PostBatch frames of several posts sent (for tests). @internal */
  postBatchFrames = 0;
  /** Ack frames sent (for tests). @internal */
  ackFrames = 0;
  /** Post frames sent with acks riding in them (for tests). @internal */
  ackRides = 0;

  constructor(private readonly host: SessionHost) {}

  /** Current state. */
  get connectionState(): ConnectionState {
    return this.state;
  }

  /** The current Welcome, while connected. */
  get session(): SessionInfo | undefined {
    return this.state === "connected" ? this.info : undefined;
  }

  /** The replica a Redirect moved the stream to (undefined = the target given). */
  get redirectedTo(): string | undefined {
    return this.redirected;
  }

  /** This client's cursors. */
  cursors(): Cursors {
    return this.book.snapshot();
  }

  /** Start (or join) the stream; resolves at the first Welcome. */
  async connect(options: ConnectOptions): Promise<SessionInfo> {
    if (this.state === "closed") throw closedError("the client is closed; create a new one.");
    if (this.state === "connected" && this.info !== undefined) return this.info;
    const waiting = this.waitForWelcome(options.connectTimeoutMs ?? 15000);
    if (this.state === "connecting" || this.state === "reconnecting") return waiting;
    this.options = options;
    if (this.queue.closed) this.queue = new AsyncQueue<InboundEnvelope>();
    this.stopping = false;
    this.attempts = 0;
    const store = options.cursorStore;
    this.setState("connecting");
    if (store !== undefined && !this.storesLoaded.has(store)) {
      try {
        this.book.seed(await store.load(this.host.agentId));
        this.storesLoaded.add(store);
      } catch (err) {
        this.setState("idle");
        this.rejectWaiters(AgentNetError.fromServiceError(err));
        return waiting;
      }
      if (this.connectionState !== "connecting") return waiting; // disconnect() or close() meanwhile
    }
    this.openStream();
    return waiting;
  }

  /** End the stream but keep cursors and undelivered envelopes; connect() resumes. */
  async disconnect(): Promise<void> {
    if (this.state === "closed") return;
    await this.stopStream();
    if (this.state !== "failed") this.setState("idle");
    await this.saveCursors();
  }

  /** End everything: the stream, the envelope iterator, background work. */
  async close(): Promise<void> {
    if (this.state === "closed") return;
    this.closing = true;
    for (const wake of [...this.sleepers]) wake();
    await this.stopStream();
    this.setState("closed");
    this.queue.end();
    await this.saveCursors();
  }

  private async saveCursors(): Promise<void> {
    const store = this.options.cursorStore;
    if (store === undefined) return;
    await store.save(this.host.agentId, this.book.snapshot()).catch((err: unknown) => this.report(err));
  }

  /** Wait for background work (invite acks, cursor saves) to settle. */
  async settle(): Promise<void> {
    while (this.background.size > 0) await Promise.allSettled([...this.background]);
  }

  /** The async iterator over delivered envelopes. */
  envelopes(options: EnvelopesOptions = {}): AsyncIterableIterator<InboundEnvelope> {
    const queue = this.queue;
    let inHand: InboundEnvelope | undefined;
    let finished = false;
    const iterator: AsyncIterableIterator<InboundEnvelope> = {
      next: async (): Promise<IteratorResult<InboundEnvelope>> => {
        if (options.autoAck === true && inHand !== undefined) inHand.ack();
        inHand = undefined;
        if (finished) return { value: undefined, done: true };
        const result = await queue.shift();
        if (result.done === true) return { value: undefined, done: true };
        inHand = result.value;
        return { value: result.value, done: false };
      },
      return: async (): Promise<IteratorResult<InboundEnvelope>> => {
        finished = true;
        inHand = undefined;
        return { value: undefined, done: true };
      },
      [Symbol.asyncIterator]() {
        return iterator;
      },
    };
    return iterator;
  }

  /** Post over the stream when connected, else with PostEnvelope. */
  post(input: PostInput): Promise<PostedEnvelope> {
    if (this.state === "closed") return Promise.reject(closedError("the client is closed."));
    const envelope = encodePost(input);
    const call = this.call;
    if (this.state !== "connected" || call === undefined) return this.postUnary(envelope);
    const requestId = `r${this.nextRequestId++}`;
    return new Promise<PostedEnvelope>((resolve, reject) => {
      this.posts.set(requestId, { envelope, resolve, reject });
      this.outPosts.push({ requestId, envelope });
      if (this.postFlush) return;
      this.postFlush = true;
      queueMicrotask(() => this.flushPosts(call));
    });
  }

  // -- the stream ------------------------------------------------------------------

  private setState(state: ConnectionState): void {
    if (this.state === state) return;
    this.state = state;
    try {
      this.options.onStateChange?.(state);
    } catch {
      // A throwing observer must not break the stream.
    }
  }

  private waitForWelcome(timeoutMs: number): Promise<SessionInfo> {
    return new Promise<SessionInfo>((resolve, reject) => {
      const waiter: Waiter = { resolve, reject, timer: undefined };
      if (timeoutMs > 0) {
        waiter.timer = setTimeout(() => {
          this.waiters = this.waiters.filter((w) => w !== waiter);
          const err = new AgentNetError({
            code: GrpcStatus.DEADLINE_EXCEEDED,
            reason: Reason.TIMEOUT,
            message: `no Welcome from the hub within ${timeoutMs} ms; the bridge keeps trying to connect.`,
          });
          reject(err);
        }, timeoutMs);
      }
      this.waiters.push(waiter);
    });
  }

  private resolveWaiters(info: SessionInfo): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) {
      clearTimeout(w.timer);
      w.resolve(info);
    }
  }

  private rejectWaiters(err: AgentNetError): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) {
      clearTimeout(w.timer);
      w.reject(err);
    }
  }

  private openStream(): void {
    const generation = ++this.generation;
    this.streamEnded = false;
    this.welcomed = false;
    this.moving = false;
    let call: ClientDuplexStream<ConnectRequest, ConnectResponse>;
    try {
      const stub = this.redirected === undefined ? this.host.stub : this.host.peer(this.redirected);
      call = stub.connect(this.host.metadata());
    } catch (err) {
      this.onStreamEnd(generation, AgentNetError.fromServiceError(err));
      return;
    }
    this.call = call;
    // A hub that accepted the connection but never answers Hello: give up on this attempt.
    this.welcomeTimer = setTimeout(() => call.cancel(), WELCOME_WATCHDOG_MS);
    call.on("data", (frame: ConnectResponse) => this.onFrame(generation, frame));
    call.on("error", (err: unknown) => this.onStreamEnd(generation, AgentNetError.fromServiceError(err)));
    call.on("status", (status: { code: number }) => {
      if (status.code === GrpcStatus.OK) this.onStreamEnd(generation, undefined);
    });
    this.lastReceived = Date.now();
    this.send(call, {
      frame: {
        $case: "hello",
        value: {
          credential: this.host.credential,
          cursors: this.book.snapshot(),
          maxInFlight: this.options.maxInFlight ?? 0,
          maxBatch: this.options.maxBatch ?? DEFAULT_MAX_BATCH,
          clientName: this.options.clientName ?? "agentnet-bridge-ts/0.1",
          // Session steering (docs/scale-out.md): see ConnectOptions.followRedirects.
          followsRedirects: this.options.followRedirects !== false,
        },
      },
    });
  }

  /** Write one frame; false when the stream's buffer is full (wait for 'drain'). */
  private send(call: ClientDuplexStream<ConnectRequest, ConnectResponse>, request: ConnectRequest): boolean {
    this.lastSent = Date.now();
    try {
      return call.write(request);
    } catch {
      // The stream is ending; its error/status handler takes over.
      return true;
    }
  }

  /**
   * Send every queued post, packed up to postLimit per frame, in queue order, the
   * pending acks riding in the first frame when the hub reads them there. When the
   * stream's buffer fills, the rest, and the posts made meanwhile, wait for 'drain'
   * and then leave packed together.
   */
  private flushPosts(call: ClientDuplexStream<ConnectRequest, ConnectResponse>): void {
    if (call !== this.call) return; // that stream ended: onStreamEnd posted its posts with PostEnvelope
    this.postFlush = false;
    while (this.outPosts.length > 0) {
      const ack = this.ackWaitMs > 0 ? this.takeAcks() : undefined;
      const { frame, count } = packPosts(this.outPosts, this.postLimit, ack);
      this.outPosts = this.outPosts.slice(count);
      if (frame === undefined) return;
      if (count > 1) this.postBatchFrames += 1;
      if (ack !== undefined) this.ackRides += 1;
      if (!this.send(call, frame)) {
        // The buffer is full: posts made from now on queue until the stream drains.
        this.postFlush = true;
        call.once("drain", () => this.flushPosts(call));
        return;
      }
    }
  }

  private onFrame(generation: number, response: ConnectResponse): void {
    if (generation !== this.generation || this.streamEnded) return;
    this.lastReceived = Date.now();
    const frame = response.frame;
    switch (frame?.$case) {
      case "welcome": {
        const w = frame.value;
        this.info = {
          agentId: w.agentId,
          sessionId: w.sessionId,
          resumeCursors: { ...w.cursors },
          keepaliveSeconds: w.keepaliveSeconds,
          maxPostBatch: w.maxPostBatch,
          postBatchAck: w.postBatchAck,
          pendingTurns: w.pendingTurns.map((t) => ({ channelId: t.channelId, seq: Number(t.seq), envelopeId: t.envelopeId })),
          pendingTurnsTruncated: w.pendingTurnsTruncated,
        };
        this.postLimit = postLimit(w.maxPostBatch, this.options.maxPostBatch);
        this.ackWaitMs = ackWait(w.postBatchAck, w.maxPostBatch, this.options.ackDelayMs);
        clearTimeout(this.welcomeTimer);
        this.book.seed(w.cursors); // the resume cursors the hub replays above
        this.attempts = 0;
        this.welcomed = true;
        this.setState("connected");
        this.startKeepalive(w.keepaliveSeconds || 30);
        this.resolveWaiters(this.info);
        return;
      }
      case "postResult":
        this.onPostResult(frame.value);
        return;
      case "delivery":
        this.onDelivery(frame.value);
        return;
      case "batch":
        // In the order the hub would have sent them as single frames: post results
        // first, then the deliveries. Acks queued meanwhile leave together.
        this.batchFrames += 1;
        for (const result of frame.value.postResults) this.onPostResult(result);
        for (const delivery of frame.value.deliveries) this.onDelivery(delivery);
        return;
      case "redirect":
        if (this.follow(frame.value.address)) {
          // End this stream; onStreamEnd reconnects at once to the replica named.
          this.moving = true;
          const call = this.call;
          this.onStreamEnd(generation, undefined);
          call?.cancel();
        }
        return;
      case "pong":
      case undefined:
        return;
    }
  }

  /**
   * Whether to end the stream and reconnect at `address` (then {@link redirectedTo} names
   * it): not when redirects are off, paused after one that led nowhere, the stream is
   * stopping, or it names where the stream already is.
   */
  private follow(address: string): boolean {
    if (
      this.options.followRedirects === false ||
      address === "" ||
      address === this.redirected ||
      Date.now() < this.redirectPausedUntil ||
      this.stopping ||
      this.closing
    ) {
      return false;
    }
    this.redirected = address;
    this.redirects += 1;
    return true;
  }

  /**
   * A stream ended: pick where the next one (and the PostEnvelope fallbacks meanwhile) goes —
   * the replica a Redirect named when `moving`, else the target given. A moved stream that
   * ended goes back; one that never got its Welcome there led nowhere, so no Redirect is
   * followed for {@link REDIRECT_PAUSE_MS}. Returns true in that last case.
   */
  private nextConnection(moving: boolean, welcomed: boolean): boolean {
    if (moving || this.redirected === undefined) return false;
    this.redirected = undefined;
    if (welcomed) return false;
    this.redirectPausedUntil = Date.now() + REDIRECT_PAUSE_MS;
    return true;
  }

  private onPostResult(result: PostResult): void {
    const pending = this.posts.get(result.requestId);
    if (pending === undefined) return;
    this.posts.delete(result.requestId);
    if (result.result?.$case === "envelope") pending.resolve(decodePosted(result.result.value, result.duplicate));
    else if (result.result?.$case === "error") pending.reject(AgentNetError.fromErrorDetail(result.result.value));
    else pending.reject(new AgentNetError({ code: GrpcStatus.INTERNAL, reason: Reason.INTERNAL, message: "empty PostResult" }));
  }

  private onDelivery(delivery: Delivery): void {
    const { envelope: raw, prevSeq, replay, expired } = delivery;
    if (raw === undefined) return;
    const offer = this.book.offer(raw.channelId, raw.seq, prevSeq, raw.envelopeId);
    if (offer === "processed") {
      // Processed before (its ack may have been lost with the old stream): ack again, do not redeliver.
      this.queueAck(raw.channelId, raw.seq);
      return;
    }
    if (offer === "pending") return; // already handed to the application
    if (expired) {
      // A content-less slot of an envelope whose TTL ran out: not for the application; ack it.
      this.onAck(raw.channelId, raw.seq);
      return;
    }
    const decoded = decodeEnvelope(raw);
    let acked = false;
    const inbound: InboundEnvelope = {
      ...decoded,
      replay,
      ack: () => {
        if (acked) return;
        acked = true;
        this.onAck(raw.channelId, raw.seq);
      },
    };
    if (raw.eventType === EventType.CHANNEL_INVITE && raw.senderId === HUB_SENDER) this.onInvite(inbound, replay);
    this.queue.push(inbound);
  }

  private onInvite(envelope: AgentEnvelope, replay: boolean): void {
    const d = envelope.eventData;
    const str = (v: unknown): string => (typeof v === "string" ? v : "");
    const invite: Invite = {
      channelId: envelope.channelId,
      type: str(d["type"]),
      initiator: str(d["initiator"]),
      initiatorName: str(d["initiator_name"]),
      intent: str(d["intent"]),
      participants: Array.isArray(d["participants"]) ? d["participants"].filter((p): p is string => typeof p === "string") : [],
      knobs: isJsonObject(d["knobs"]) ? d["knobs"] : {},
      envelope,
    };
    const decide = this.options.onInvite;
    this.track(
      (async () => {
        // A replayed invite may have been answered before (its envelope was not acked).
        if (replay && !(await this.host.inviteOpen(envelope.channelId))) return;
        const accept = decide === undefined ? true : await decide(invite);
        const eventType = accept ? EventType.CHANNEL_INVITE_ACK : EventType.CHANNEL_INVITE_REJECT;
        // A key derived from the invite: answering it again returns the original answer.
        const answer = { channelId: envelope.channelId, eventType, eventData: {}, idempotencyKey: `${eventType}:${envelope.envelopeId}` };
        for (;;) {
          try {
            await this.post(answer);
            return;
          } catch (err) {
            // An answer takes a token of the identity's rate limit like any post. The
            // refusal changed nothing: wait as the hub asks and answer again (the hub's
            // invite timeout ends the channel, and this, if it takes too long).
            if (!(err instanceof RateLimitedError) || this.closing) throw err;
            await this.pause((err.retryAfterSeconds || 1) * 1000);
            if (this.closing) return;
          }
        }
      })().catch((err: unknown) => {
        // A replayed invite that was answered before, or a channel that ended meanwhile.
        if (AgentNetError.is(err, Reason.PROTOCOL_ERROR) || AgentNetError.is(err, Reason.CHANNEL_CLOSED)) return;
        this.report(err);
      }),
    );
  }

  private onAck(channelId: string, seq: number): void {
    const moved = this.book.process(channelId, seq);
    this.queueAck(channelId, seq);
    if (moved) this.persist();
  }

  /**
   * Queue an ack. It leaves with the acks made in the same turn of the event loop: in
   * an Ack frame after the turn or, while the hub reads acks riding in a PostBatch,
   * with the next posts written within ackWaitMs (else in an Ack frame then, or after
   * the turn once a quarter of maxInFlight acks are pending).
   */
  private queueAck(channelId: string, seq: number): void {
    if (this.state !== "connected") return; // the next Hello carries the cursor instead
    this.ackBatch.push({ channelId, seq });
    if (this.ackScheduled) return;
    if (this.ackWaitMs > 0 && this.ackBatch.length < this.ackFlushAt()) {
      this.ackTimer ??= setTimeout(() => this.flushAcks(), this.ackWaitMs);
      return;
    }
    this.ackScheduled = true;
    setImmediate(() => this.flushAcks());
  }

  /** Pending acks sent without waiting for a post: a quarter of the stream's max_in_flight, at least 2. */
  private ackFlushAt(): number {
    return Math.max(2, Math.floor((this.options.maxInFlight || HUB_DEFAULT_MAX_IN_FLIGHT) / 4));
  }

  /** Empty the pending acks (for an Ack frame or posts to carry) and stop the timer that would send them. */
  private takeAcks(): { entries: Array<{ channelId: string; seq: number }> } | undefined {
    clearTimeout(this.ackTimer);
    this.ackTimer = undefined;
    const entries = this.ackBatch;
    this.ackBatch = [];
    return entries.length === 0 ? undefined : { entries };
  }

  private flushAcks(): void {
    this.ackScheduled = false;
    const ack = this.takeAcks();
    const call = this.call;
    if (ack === undefined || call === undefined || this.state !== "connected") return;
    this.send(call, { frame: { $case: "ack", value: ack } });
    this.ackFrames += 1;
  }

  private persist(): void {
    const store = this.options.cursorStore;
    if (store === undefined) return;
    this.track(store.save(this.host.agentId, this.book.snapshot()).catch((err: unknown) => this.report(err)));
  }

  private startKeepalive(seconds: number): void {
    this.stopKeepalive();
    const interval = seconds * 1000;
    this.keepaliveTimer = setInterval(() => {
      const call = this.call;
      if (call === undefined || this.state !== "connected") return;
      const now = Date.now();
      if (now - this.lastReceived > 3 * interval) {
        // No frame (not even a Pong) for three intervals: the stream is dead.
        call.cancel();
        return;
      }
      if (now - this.lastSent >= interval / 2) {
        this.send(call, { frame: { $case: "ping", value: { nonce: this.nextNonce++ } } });
      }
    }, interval / 2);
    this.keepaliveTimer.unref();
  }

  private stopKeepalive(): void {
    if (this.keepaliveTimer !== undefined) clearInterval(this.keepaliveTimer);
    this.keepaliveTimer = undefined;
  }

  private onStreamEnd(generation: number, error: AgentNetError | undefined): void {
    if (generation !== this.generation || this.streamEnded) return;
    this.streamEnded = true;
    this.call = undefined;
    this.info = undefined;
    this.stopKeepalive();
    clearTimeout(this.welcomeTimer);
    this.takeAcks(); // unsent acks are dropped: the next Hello carries the cursors instead
    this.outPosts = [];
    this.postFlush = false;
    const moving = this.moving;
    // A replica a Redirect named that gave no Welcome (unreachable, or it refused) is left
    // for the target given, whatever it answered.
    const abandoned = this.nextConnection(moving, this.welcomed);
    this.retryPostsUnary(); // where the stream goes next
    const done = this.streamDone;
    this.streamDone = undefined;
    if (this.stopping) {
      done?.();
      return;
    }
    if (moving || abandoned) {
      this.scheduleReconnect(0); // to the replica named, or back to the target given, at once
      return;
    }
    const fatal =
      error !== undefined &&
      (FATAL_CODES.has(error.code) ||
        error.reason === Reason.SUPERSEDED ||
        (error.code === GrpcStatus.UNAVAILABLE && error.message.includes(REPLACED_MARKER)));
    if (fatal || this.options.reconnect === false) {
      const err =
        error ??
        new AgentNetError({ code: GrpcStatus.UNAVAILABLE, reason: Reason.UNAVAILABLE, message: "the Connect stream ended" });
      this.setState("failed");
      this.rejectWaiters(err);
      this.queue.fail(err);
      this.report(err);
      return;
    }
    this.scheduleReconnect();
  }

  /** Open the next stream after the backoff (or after `delay` ms, when given). */
  private scheduleReconnect(delayMs?: number): void {
    this.setState("reconnecting");
    const b = this.options.reconnect === false ? {} : (this.options.reconnect ?? {});
    const initial = b.initialDelayMs ?? 200;
    const max = b.maxDelayMs ?? 5000;
    const factor = b.multiplier ?? 2;
    const base = Math.min(max, initial * factor ** this.attempts);
    if (delayMs === undefined) this.attempts += 1;
    const delay = delayMs ?? base * (0.8 + 0.4 * Math.random());
    this.backoffTimer = setTimeout(() => {
      this.backoffTimer = undefined;
      if (this.stopping || this.state !== "reconnecting") return;
      this.setState("connecting");
      this.openStream();
    }, delay);
  }

  private retryPostsUnary(): void {
    // The stream broke before these results arrived: retry with PostEnvelope. The
    // idempotency key makes the hub return the original if the post was admitted.
    const posts = [...this.posts.values()];
    this.posts.clear();
    for (const p of posts) {
      if (this.closing) p.reject(closedError("the client was closed before the post's result arrived."));
      else this.postUnary(p.envelope).then(p.resolve, p.reject);
    }
  }

  /**
   * PostEnvelope where the stream is (a replica a Redirect named, else the target given).
   * A replica a Redirect named that does not answer at all (UNAVAILABLE without a `cause`:
   * not the hub's answer) is tried again, with backoff, wherever the stream goes next (a
   * moved stream whose replica went away goes back to the target given), within the
   * client's `callTimeoutMs`. The idempotency key makes every attempt land once.
   */
  private async postUnary(envelope: Envelope): Promise<PostedEnvelope> {
    const deadline = this.host.postTimeoutMs > 0 ? Date.now() + this.host.postTimeoutMs : Infinity;
    let backoff = 50;
    for (;;) {
      const address = this.redirected;
      const left = deadline - Date.now();
      try {
        return await this.host.postUnary(envelope, address, Number.isFinite(left) ? Math.max(1, left) : 0);
      } catch (err) {
        const error = AgentNetError.fromServiceError(err);
        const pause = backoff * (0.5 + Math.random());
        const gone = address !== undefined && error.code === GrpcStatus.UNAVAILABLE && !error.metadata["cause"];
        if (!gone || this.closing || Date.now() + pause >= deadline) throw error;
        await this.pause(pause); // a backoff between attempts, not a wait for a condition
        backoff = Math.min(backoff * 2, 1000);
      }
    }
  }

  private async stopStream(): Promise<void> {
    this.stopping = true;
    if (this.backoffTimer !== undefined) clearTimeout(this.backoffTimer);
    this.backoffTimer = undefined;
    this.rejectWaiters(closedError("connect() was interrupted by disconnect() or close()."));
    const call = this.call;
    if (call !== undefined) {
      this.flushAcks();
      const ended = new Promise<void>((resolve) => (this.streamDone = resolve));
      call.end();
      const timer = setTimeout(() => call.cancel(), END_GRACE_MS);
      await ended;
      clearTimeout(timer);
    }
    this.stopKeepalive();
    this.call = undefined;
    this.stopping = false;
  }

  /** Sleep `ms`, or until close() (which wakes every sleeper). */
  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = (): void => {
        clearTimeout(timer);
        this.sleepers.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      this.sleepers.add(wake);
    });
  }

  private track(promise: Promise<unknown>): void {
    this.background.add(promise);
    const remove = (): void => {
      this.background.delete(promise);
    };
    promise.then(remove, remove);
  }

  private report(err: unknown): void {
    if (this.closing) return; // calls cut short by close() are not errors
    const error = AgentNetError.fromServiceError(err);
    try {
      this.options.onError?.(error);
    } catch {
      // A throwing observer must not break the stream.
    }
  }
}
