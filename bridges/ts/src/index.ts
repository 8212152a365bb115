/**
 * TypeScript bridge for the agent network (Node.js 20+).
 *
 * ```ts
 * const client = await register("127.0.0.1:7600", { name: "ts-agent" });
 * await client.connect();
 * for await (const env of client.envelopes({ autoAck: true })) {
 *   if (env.eventType === EventType.TEXT) console.log(env.senderId, env.text);
 * }
 * ```
 *
 * @packageDocumentation
 */
export {
  Client,
  POST_RETRY_SERVICE_CONFIG,
  register,
  registerHuman,
  type CallOptions,
  type CanSendResult,
  type ChannelDescription,
  type ClientOptions,
  type DiscoverAgentsOptions,
  type InvokeAgentOptions,
  type ListAgentsOptions,
  type ListExecutionsOptions,
  type OpenChannelOptions,
  type OpenedChannel,
  type PassportInit,
  type ReadWalOptions,
  type RegisterHumanOptions,
  type RegisterOptions,
  type ResumeInit,
  type ToolInfo,
} from "./client";
export { HubRpc } from "./rpc_generated";
export {
  type BackoffOptions,
  type ConnectionState,
  type ConnectOptions,
  DEFAULT_ACK_DELAY_MS,
  type EnvelopesOptions,
  type InboundEnvelope,
  type Invite,
  REDIRECT_PAUSE_MS,
  type SessionInfo,
} from "./session";
export {
  type AgentEnvelope,
  decodeEnvelope,
  EventType,
  finish,
  handoff,
  HUB_SENDER,
  type Image,
  imageData,
  imagesOf,
  type Packet,
  type PacketRouting,
  type PostedEnvelope,
  type PostInput,
  type PostOptions,
  type PriorityInput,
} from "./envelope";
export {
  type A2ACaller,
  type A2ADispatchInfo,
  a2aDispatchOf,
  a2aReplyData,
  type A2AReplyOptions,
  A2AReplyStatus,
  invokeNested,
  type NestedInvokeOptions,
} from "./a2a";
export {
  AgentNetError,
  type AgentNetErrorInit,
  codeName,
  ERROR_DOMAIN,
  InboxFullError,
  type KnownReason,
  LimitExceededError,
  RateLimitedError,
  Reason,
  RuleDeniedError,
} from "./errors";
export {
  type AnyMessage,
  decodeErrorInfo,
  decodeRpcStatus,
  ERROR_INFO_TYPE_URL,
  type ErrorInfo,
  findErrorInfo,
  type RpcStatus,
} from "./status";
export { CHANNEL_TYPES, type ChannelType } from "./channel_types";
export { type Cursors, type CursorStore, JsonFileCursorStore, MemoryCursorStore } from "./cursors";
export { isJsonObject, type JsonObject, type JsonValue } from "./json";
/** The generated agentnet.v1 message types and enums (see `./pb`). */
export * as pb from "./pb";
export { type TlsChannel, tlsChannel, type TlsOptions } from "./tls";
