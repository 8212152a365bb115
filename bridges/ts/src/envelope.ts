import { randomUUID } from "node:crypto";
import { Envelope, Priority } from "./gen";
import { type JsonObject, parseJsonObject } from "./json";

/** Event types of the contract (the Python SDK's `EV_*` constants). */
export const EventType = {
  /** Plain text; `eventData = {text}`. Takes a turn. */
  TEXT: "ag2.msg.text",
  /** Workflow round-end capture; `eventData = {routing, context_updates, body}`. Takes a turn. */
  PACKET: "ag2.packet",
  /**
   * A piece of a reply a model is still streaming; `eventData = {delta, index, call}`,
   * `causationId` = the envelope being answered. Never takes a turn; the reply follows.
   */
  MSG_CHUNK: "ag2.msg.chunk",
  /** Posted by the hub to each target when a channel is created. */
  CHANNEL_INVITE: "ag2.channel.invite",
  /** Posted by an invitee accepting its invite. */
  CHANNEL_INVITE_ACK: "ag2.channel.invite_ack",
  /** Posted by an invitee rejecting its invite. */
  CHANNEL_INVITE_REJECT: "ag2.channel.invite_reject",
  /** Posted by the hub once every invitee acked. */
  CHANNEL_OPENED: "ag2.channel.opened",
  /** Posted by the hub on every terminal path; `eventData.reason` says why. */
  CHANNEL_CLOSED: "ag2.channel.closed",
  /** Posted by the hub when the channel's TTL ran out. */
  CHANNEL_EXPIRED: "ag2.channel.expired",
  /** Posted by the hub when an expectation threshold is breached. */
  EXPECTATION_VIOLATED: "ag2.channel.expectation_violated",
  /** Posted by the hub when a member reports that its turn on an envelope failed (ReportTurnFailure). */
  TURN_FAILED: "ag2.channel.turn_failed",
  /** Changes channel-scoped context vars; `eventData = {set, delete}`. */
  CONTEXT_SET: "ag2.context.set",
  /** A peer asks a task's owner to cancel. */
  TASK_CANCEL_REQUEST: "ag2.task.cancel_request",
  /** The owner's terminal envelope for a cancelled task. */
  TASK_CANCELLED: "ag2.task.cancelled",
} as const;

/** The sender id the hub stamps on its own lifecycle envelopes. */
export const HUB_SENDER = "hub";

/** Priority as a name ("background" | "normal" | "urgent"), or the generated enum. */
export type PriorityInput = "background" | "normal" | "urgent" | Priority;

/**
 * An admitted envelope (as written to the WAL) with its payload decoded.
 * `raw` is the wire message.
 */
export interface AgentEnvelope {
  /** Hub-stamped unique id. */
  readonly envelopeId: string;
  /** The channel. */
  readonly channelId: string;
  /** Per-channel sequence number (1, 2, 3, ...). */
  readonly seq: number;
  /** The sender's agent id (`"hub"` for lifecycle envelopes). */
  readonly senderId: string;
  /** Dotted event type, see {@link EventType}. */
  readonly eventType: string;
  /** The payload, `JSON.parse`d (`{}` when empty or not an object). */
  readonly eventData: JsonObject;
  /** `eventData.text` when it is a string (text envelopes), else undefined. */
  readonly text: string | undefined;
  /** Explicit recipients; undefined = broadcast. */
  readonly audience: readonly string[] | undefined;
  /** Admission time, RFC 3339 UTC. */
  readonly createdAt: string;
  /** The envelope this one replies to. */
  readonly causationId: string | undefined;
  /** The related task. */
  readonly taskId: string | undefined;
  /** Trace id. */
  readonly traceId: string | undefined;
  /** Delegation depth. */
  readonly depth: number;
  /** Delivery priority. */
  readonly priority: Priority;
  /** The wire message. */
  readonly raw: Envelope;
}

/** Decode a wire envelope. */
export function decodeEnvelope(raw: Envelope): AgentEnvelope {
  const eventData = parseJsonObject(raw.eventDataJson);
  const text = eventData["text"];
  return {
    envelopeId: raw.envelopeId,
    channelId: raw.channelId,
    seq: raw.seq,
    senderId: raw.senderId,
    eventType: raw.eventType,
    eventData,
    text: typeof text === "string" ? text : undefined,
    audience: raw.audience === undefined ? undefined : [...raw.audience.agentIds],
    createdAt: raw.createdAt,
    causationId: raw.causationId,
    taskId: raw.taskId,
    traceId: raw.traceId,
    depth: raw.depth,
    priority: raw.priority,
    raw,
  };
}

/** A post's answer: the envelope as admitted, and whether the hub had admitted it already. */
export interface PostedEnvelope extends AgentEnvelope {
  /**
   * True when the hub had already admitted a post with this idempotency key and
   * answered with that envelope (e.g. a post retried after its hub died).
   */
  readonly duplicate: boolean;
}

/** Decode a post's answer. */
export function decodePosted(raw: Envelope, duplicate: boolean): PostedEnvelope {
  return { ...decodeEnvelope(raw), duplicate };
}

/**
 * One image a text or packet carries (`eventData.images`): by `url` (http or https), or
 * inline `data` (bytes, sent as standard base64) with its `mediaType` (`image/png`,
 * `image/jpeg`, `image/gif`, `image/webp`). `detail` (`auto` | `low` | `high`) is passed to
 * the model. The hub refuses malformed images and more than 16 per envelope
 * (INVALID_ARGUMENT); their bytes count toward its event_data limit.
 */
export interface Image {
  /** The image's address (omit for inline data). */
  readonly url?: string;
  /** The image's bytes (omit for a URL). */
  readonly data?: Uint8Array;
  /** The image format; required with `data`. */
  readonly mediaType?: string;
  /** How closely the model looks. */
  readonly detail?: "auto" | "low" | "high";
}

/** An image as one item of `eventData.images`. */
export function imageData(image: Image): JsonObject {
  const item: JsonObject = {};
  if (image.url !== undefined) item["url"] = image.url;
  else item["data"] = Buffer.from(image.data ?? new Uint8Array()).toString("base64");
  if (image.mediaType !== undefined) item["media_type"] = image.mediaType;
  if (image.detail !== undefined) item["detail"] = image.detail;
  return item;
}

/** The images a text or packet envelope carries (`[]` for none; items that are not images are skipped). */
export function imagesOf(envelope: AgentEnvelope): Image[] {
  if (envelope.eventType !== EventType.TEXT && envelope.eventType !== EventType.PACKET) return [];
  const items = envelope.eventData["images"];
  if (!Array.isArray(items)) return [];
  const out: Image[] = [];
  for (const item of items) {
    if (typeof item !== "object" || item === null || Array.isArray(item)) continue;
    const url = item["url"];
    const data = item["data"];
    const mediaType = item["media_type"];
    const detail = item["detail"];
    out.push({
      ...(typeof url === "string" ? { url } : {}),
      ...(typeof data === "string" ? { data: new Uint8Array(Buffer.from(data, "base64")) } : {}),
      ...(typeof mediaType === "string" ? { mediaType } : {}),
      ...(detail === "auto" || detail === "low" || detail === "high" ? { detail } : {}),
    });
  }
  return out;
}

/** Optional envelope fields shared by every post helper. */
export interface PostOptions {
  /** Explicit recipients (agent ids); undefined = broadcast. */
  audience?: readonly string[];
  /** The envelope this one replies to. */
  causationId?: string;
  /** The related task. */
  taskId?: string;
  /** Trace id propagated across channels. */
  traceId?: string;
  /** Delivery priority (default normal). */
  priority?: PriorityInput;
  /** Per-envelope TTL in seconds. */
  ttlSeconds?: number;
  /** Delegation depth (default 0). */
  depth?: number;
  /**
   * Idempotency key. When omitted the bridge generates `ts-<uuid v4>`, so a post
   * whose hub went away before answering is retried without a duplicate.
   */
  idempotencyKey?: string;
  /**
   * The sender. Leave it unset: the hub stamps it from the credential, and any
   * id other than your own is refused with PERMISSION_DENIED.
   */
  senderId?: string;
}

/** A raw envelope to post (custom event types pass through unchanged). */
export interface PostInput extends PostOptions {
  /** The channel. */
  channelId: string;
  /** Dotted event type, e.g. `myapp.review_request`. */
  eventType: string;
  /** The payload (default `{}`). */
  eventData?: JsonObject;
}

/**
 * The routing of an `ag2.packet`: the hub routes on `tool_called` (the round's one
 * routing tool; `tools_called` is a record). A typed decision goes first:
 * `kind: "handoff"` with `target` (a participant id or name) names the next speaker;
 * `kind: "finish"` ends the workflow with `close_reason` (default `finished`, at most
 * 64 characters). Build them with {@link handoff} / {@link finish}.
 */
export interface PacketRouting {
  tool_called?: string | null;
  tools_called?: string[];
  /** Why the round routes as it does. */
  reason?: string;
  kind?: "handoff" | "finish";
  /** kind "handoff": the next speaker. */
  target?: string;
  /** kind "finish": the channel's close reason. */
  close_reason?: string;
  /** kind "finish": a summary for whoever reads the WAL. */
  summary?: string;
}

/** Routing that hands the turn to `target` (a participant id or name), e.g. `routing: handoff("bob", "knows")`. */
export function handoff(target: string, reason?: string, toolCalled?: string): PacketRouting {
  const out: PacketRouting = { kind: "handoff", target };
  if (reason !== undefined && reason !== "") out.reason = reason;
  if (toolCalled !== undefined) out.tool_called = toolCalled;
  return out;
}

/** Routing that ends the workflow; the channel closes with `reason` (default `finished`). */
export function finish(options: { reason?: string; summary?: string; toolCalled?: string } = {}): PacketRouting {
  const out: PacketRouting = { kind: "finish" };
  if (options.reason !== undefined) out.close_reason = options.reason;
  if (options.summary !== undefined && options.summary !== "") out.summary = options.summary;
  if (options.toolCalled !== undefined) out.tool_called = options.toolCalled;
  return out;
}

/** The payload of an `ag2.packet` envelope (workflow channels). */
export interface Packet {
  /** The text of the round. */
  body?: string;
  /** Which tool(s) the speaker called this round, and a typed routing decision. */
  routing?: PacketRouting;
  /** Context variable updates. */
  context_updates?: { set?: JsonObject; delete?: string[] };
}

function toPriority(p: PriorityInput | undefined): Priority {
  switch (p) {
    case undefined:
      return Priority.PRIORITY_UNSPECIFIED;
    case "background":
      return Priority.PRIORITY_BACKGROUND;
    case "normal":
      return Priority.PRIORITY_NORMAL;
    case "urgent":
      return Priority.PRIORITY_URGENT;
    default:
      return p;
  }
}

/** Build the wire envelope of a post (with a generated idempotency key when none was given). */
export function encodePost(input: PostInput): Envelope {
  return Envelope.fromPartial({
    channelId: input.channelId,
    senderId: input.senderId ?? "",
    audience: input.audience === undefined ? undefined : { agentIds: [...input.audience] },
    eventType: input.eventType,
    eventDataJson: JSON.stringify(input.eventData ?? {}),
    taskId: input.taskId,
    causationId: input.causationId,
    traceId: input.traceId,
    priority: toPriority(input.priority),
    depth: input.depth ?? 0,
    idempotencyKey: input.idempotencyKey ?? `ts-${randomUUID()}`,
    ttlSeconds: input.ttlSeconds,
  });
}
