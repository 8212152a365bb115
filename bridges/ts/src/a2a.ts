/**
 * Agent-to-agent (A2A) helpers for the callee side.
 *
 * An InvokeAgent call reaches its target as the seed question of a consulting
 * channel: an `ag2.msg.text` envelope whose `eventData` is
 * `{text: <message>, a2a: <A2ADispatch as JSON, proto field names>}`. The target
 * answers with one `ag2.msg.text` reply in that channel, optionally saying how the
 * call ends (`{text, a2a: {status: "input-required" | "failed", error?}}`).
 *
 * @packageDocumentation
 */
import type { CallOptions, InvokeAgentOptions } from "./client";
import { type AgentEnvelope, EventType } from "./envelope";
import { AgentNetError, Reason } from "./errors";
import { A2ADispatch, type InvokeAgentResponse, type RefreshCallTokenResponse } from "./gen";
import { isJsonObject, type JsonObject } from "./json";

/**
 * What the callee sees of an invocation (the generated `A2ADispatch`):
 * `executionId`, `rootSessionId`, `message`, `skill`, `customHeaders`, and
 * `callToken` / `callTokenExpiresAt`, which the hub never fills in (the
 * channel's log is readable by every member): {@link invokeNested} obtains a
 * token from the hub and keeps it there.
 */
export type A2ADispatchInfo = A2ADispatch;

/** How the callee's reply ends the call (the `status` of `A2AReply`). */
export const A2AReplyStatus = {
  /** The text is the answer (the default; the reply carries no `a2a` object). */
  COMPLETED: "completed",
  /** The text is the callee's question; the caller gets INPUT_REQUIRED. */
  INPUT_REQUIRED: "input-required",
  /** The call fails with `error` (or the text when `error` is empty). */
  FAILED: "failed",
} as const;

/** One of {@link A2AReplyStatus}. */
export type A2AReplyStatus = (typeof A2AReplyStatus)[keyof typeof A2AReplyStatus];

/** The outcome fields of an A2A reply. */
export interface A2AReplyOptions {
  /** How the reply ends the call (default `completed`). */
  status?: A2AReplyStatus;
  /** Why the callee failed (status `failed` only). */
  error?: string;
}

/**
 * The A2A dispatch carried by `envelope`, or undefined when it is not an A2A
 * question (not `ag2.msg.text`, or no `a2a` object with an `execution_id` — a
 * callee's reply also carries an `a2a` object, without one).
 */
export function a2aDispatchOf(envelope: AgentEnvelope): A2ADispatchInfo | undefined {
  if (envelope.eventType !== EventType.TEXT) return undefined;
  const meta = envelope.eventData["a2a"];
  if (!isJsonObject(meta)) return undefined;
  const dispatch = A2ADispatch.fromJSON(meta);
  if (!dispatch.executionId) return undefined;
  if (!dispatch.message && envelope.text !== undefined) dispatch.message = envelope.text;
  // Tokens come from the hub (RefreshCallToken by execution id), never from the channel.
  dispatch.callToken = "";
  dispatch.callTokenExpiresAt = undefined;
  return dispatch;
}

/**
 * The `eventData` of an A2A reply: `{text}` for `completed`, else
 * `{text, a2a: {status, error?}}`. {@link Client.replyA2A} posts it.
 */
export function a2aReplyData(text: string, options: A2AReplyOptions = {}): JsonObject {
  const status = options.status ?? A2AReplyStatus.COMPLETED;
  if (status === A2AReplyStatus.COMPLETED) return { text };
  const a2a: JsonObject = { status };
  if (status === A2AReplyStatus.FAILED && options.error) a2a["error"] = options.error;
  return { text, a2a };
}

/** What {@link invokeNested} needs of a client ({@link Client} has both). */
export interface A2ACaller {
  invokeAgent(agentId: string, message: string, options?: InvokeAgentOptions): Promise<InvokeAgentResponse>;
  callTokenFor(executionId: string, call?: CallOptions): Promise<RefreshCallTokenResponse>;
}

/** Options of {@link invokeNested}: those of `invokeAgent` minus the token and root session it sets. */
export type NestedInvokeOptions = Omit<InvokeAgentOptions, "callToken" | "rootSessionId">;

/**
 * Make an A2A call from inside `dispatch` (linked as its child execution, in its
 * root session). The first call obtains a call token of the dispatch's execution
 * from the hub (RefreshCallToken by execution id: granted only to the callee,
 * while the call runs) and stores it in `dispatch.callToken` /
 * `dispatch.callTokenExpiresAt`, so later calls reuse it. When the hub refuses
 * it as expired (`TOKEN_EXPIRED`), a fresh one is obtained once and the call
 * retried once. Any other refusal, and a refused token request, rejects.
 */
export async function invokeNested(
  caller: A2ACaller,
  dispatch: A2ADispatchInfo,
  agentId: string,
  message: string,
  options: NestedInvokeOptions = {},
): Promise<InvokeAgentResponse> {
  if (!dispatch.callToken) await obtainToken(caller, dispatch, options);
  const used = dispatch.callToken;
  try {
    return await caller.invokeAgent(agentId, message, { ...options, callToken: used });
  } catch (err) {
    if (!AgentNetError.is(err, Reason.TOKEN_EXPIRED)) throw err;
  }
  // Another call may have refreshed it meanwhile; replace only a token still in use.
  if (dispatch.callToken === used) await obtainToken(caller, dispatch, options);
  return caller.invokeAgent(agentId, message, { ...options, callToken: dispatch.callToken });
}

async function obtainToken(caller: A2ACaller, dispatch: A2ADispatchInfo, options: NestedInvokeOptions): Promise<void> {
  if (!dispatch.executionId) {
    throw new AgentNetError({ code: 3, reason: Reason.INVALID_ARGUMENT, message: "the dispatch has no execution id" });
  }
  const fresh = await caller.callTokenFor(dispatch.executionId, { signal: options.signal });
  dispatch.callToken = fresh.callToken;
  dispatch.callTokenExpiresAt = fresh.expiresAt;
}
