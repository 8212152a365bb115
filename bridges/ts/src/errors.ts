import { Metadata, status as GrpcStatus, type ServiceError } from "@grpc/grpc-js";
import type { ErrorDetail } from "./gen";
import { decodeRpcStatus, findErrorInfo } from "./status";

/** The ErrorInfo domain of every refusal from the hub and the knowledge service. */
export const ERROR_DOMAIN = "agentnet.v1";

/**
 * The reasons of `docs/errors.md` (the `ErrorReason` enum without its
 * `ERROR_REASON_` prefix), as string constants.
 */
export const Reason = {
  INVALID_ARGUMENT: "INVALID_ARGUMENT",
  TIMEOUT: "TIMEOUT",
  NOT_FOUND: "NOT_FOUND",
  ALREADY_EXISTS: "ALREADY_EXISTS",
  NOT_PARTICIPANT: "NOT_PARTICIPANT",
  PERMISSION_DENIED: "PERMISSION_DENIED",
  INBOX_FULL: "INBOX_FULL",
  PAYLOAD_TOO_LARGE: "PAYLOAD_TOO_LARGE",
  RATE_LIMITED: "RATE_LIMITED",
  CHANNEL_CLOSED: "CHANNEL_CLOSED",
  DEPTH_EXCEEDED: "DEPTH_EXCEEDED",
  FAILED_PRECONDITION: "FAILED_PRECONDITION",
  NOT_YOUR_TURN: "NOT_YOUR_TURN",
  PROTOCOL_ERROR: "PROTOCOL_ERROR",
  OUT_OF_RANGE: "OUT_OF_RANGE",
  UNIMPLEMENTED: "UNIMPLEMENTED",
  INTERNAL: "INTERNAL",
  UNAVAILABLE: "UNAVAILABLE",
  TOKEN_EXPIRED: "TOKEN_EXPIRED",
  UNAUTHENTICATED: "UNAUTHENTICATED",
  RULE_DENIED: "RULE_DENIED",
  LIMIT_EXCEEDED: "LIMIT_EXCEEDED",
  SUPERSEDED: "SUPERSEDED",
  TURN_FAILED: "TURN_FAILED",
} as const;

/** One of the known reasons (a refusal from a newer hub may carry another string). */
export type KnownReason = (typeof Reason)[keyof typeof Reason];

/** Fields of an {@link AgentNetError}. */
export interface AgentNetErrorInit {
  /** gRPC status code number (e.g. 9 = FAILED_PRECONDITION). */
  code: number;
  /** ErrorInfo reason, e.g. `NOT_YOUR_TURN`. */
  reason: string;
  /** What was wrong and what to do. */
  message: string;
  /** Structured context, e.g. `{channel_id: "..."}`. */
  metadata?: Record<string, string>;
  /** ErrorInfo domain (`agentnet.v1` for hub refusals; "" when the status had no ErrorInfo). */
  domain?: string;
  /** The underlying error (a grpc-js ServiceError, a decode failure, ...). */
  cause?: unknown;
}

/**
 * Every failure of a hub call: a unary/stream gRPC status, or an in-stream
 * `PostResult.error`. `reason` is the ErrorInfo reason of `docs/errors.md`;
 * when the status carried no ErrorInfo (e.g. the transport failed before the
 * hub answered) it is the gRPC code name, e.g. `UNAVAILABLE` or `CANCELLED`.
 */
export class AgentNetError extends Error {
  /** gRPC status code number. */
  readonly code: number;
  /** ErrorInfo reason (see {@link Reason}). */
  readonly reason: string;
  /** Structured context from the hub. */
  readonly metadata: Readonly<Record<string, string>>;
  /** ErrorInfo domain, or "" when there was none. */
  readonly domain: string;

  /** Build an error from its fields. */
  constructor(init: AgentNetErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = "AgentNetError";
    this.code = init.code;
    this.reason = init.reason;
    this.metadata = Object.freeze({ ...(init.metadata ?? {}) });
    this.domain = init.domain ?? "";
  }

  /** The gRPC code name, e.g. `FAILED_PRECONDITION`. */
  get codeName(): string {
    return codeName(this.code);
  }

  /** True when `err` is an AgentNetError (with `reason`, when given). */
  static is(err: unknown, reason?: string): err is AgentNetError {
    return err instanceof AgentNetError && (reason === undefined || err.reason === reason);
  }

  /**
   * The error for `init`: the typed subclass of its reason ({@link RateLimitedError},
   * {@link InboxFullError}, {@link RuleDeniedError}, {@link LimitExceededError}),
   * else a plain AgentNetError. Every conversion below goes through it.
   */
  static create(init: AgentNetErrorInit): AgentNetError {
    switch (init.reason) {
      case Reason.RATE_LIMITED:
        return new RateLimitedError(init);
      case Reason.INBOX_FULL:
        return new InboxFullError(init);
      case Reason.RULE_DENIED:
        return new RuleDeniedError(init);
      case Reason.LIMIT_EXCEEDED:
        return new LimitExceededError(init);
      default:
        return new AgentNetError(init);
    }
  }

  /** Convert an in-stream `ErrorDetail` (a refused Connect post). */
  static fromErrorDetail(detail: ErrorDetail): AgentNetError {
    return AgentNetError.create({
      code: detail.code,
      reason: detail.reason || codeName(detail.code),
      message: detail.message,
      metadata: detail.metadata,
      domain: detail.reason ? ERROR_DOMAIN : "",
    });
  }

  /**
   * Convert a grpc-js `ServiceError` (or any thrown value) into an AgentNetError,
   * decoding the `grpc-status-details-bin` trailer when present.
   */
  static fromServiceError(err: unknown): AgentNetError {
    if (err instanceof AgentNetError) return err;
    if (!isServiceError(err)) {
      const message = err instanceof Error ? err.message : String(err);
      return new AgentNetError({ code: GrpcStatus.UNKNOWN, reason: "UNKNOWN", message, cause: err });
    }
    const message = err.details || err.message;
    const raw = err.metadata instanceof Metadata ? err.metadata.get("grpc-status-details-bin") : [];
    for (const value of raw) {
      if (typeof value === "string") continue;
      try {
        const status = decodeRpcStatus(value);
        const info = findErrorInfo(status);
        if (info !== undefined) {
          return AgentNetError.create({
            code: err.code,
            reason: info.reason || codeName(err.code),
            message: status.message || message,
            metadata: info.metadata,
            domain: info.domain,
            cause: err,
          });
        }
      } catch {
        // Malformed details: fall back to the plain status below.
      }
    }
    return new AgentNetError({ code: err.code, reason: codeName(err.code), message, cause: err });
  }
}

/**
 * `RATE_LIMITED`: the caller sends faster than its rule's rate allows. Wait
 * {@link RateLimitedError.retryAfterSeconds}, then retry.
 */
export class RateLimitedError extends AgentNetError {
  /** Seconds the hub asks the caller to wait (metadata `retry_after_seconds`; 0 when it gave none). */
  readonly retryAfterSeconds: number;

  /** Build the error from its fields (usually through {@link AgentNetError.create}). */
  constructor(init: AgentNetErrorInit) {
    super(init);
    this.name = "RateLimitedError";
    const seconds = Number(init.metadata?.["retry_after_seconds"] ?? "");
    this.retryAfterSeconds = Number.isFinite(seconds) && seconds > 0 ? seconds : 0;
  }
}

/**
 * `INBOX_FULL`: the recipient's inbox is at its cap; retry later. (A stream
 * ended for reading too slowly is `INBOX_FULL` too, with metadata
 * `cause: "slow_consumer"` and no recipient.)
 */
export class InboxFullError extends AgentNetError {
  /** The agent whose inbox is full (metadata `recipient`; "" when absent). */
  readonly recipient: string;

  /** Build the error from its fields (usually through {@link AgentNetError.create}). */
  constructor(init: AgentNetErrorInit) {
    super(init);
    this.name = "InboxFullError";
    this.recipient = init.metadata?.["recipient"] ?? "";
  }
}

/** `RULE_DENIED`: a governance rule or the hub's arbiter refuses the action; retrying does not help. */
export class RuleDeniedError extends AgentNetError {
  /** The id of the refusing rule (metadata `rule`). */
  readonly rule: string;
  /** The part of the rule that refused, e.g. `access.peers` (metadata `check`). */
  readonly check: string;

  /** Build the error from its fields (usually through {@link AgentNetError.create}). */
  constructor(init: AgentNetErrorInit) {
    super(init);
    this.name = "RuleDeniedError";
    this.rule = init.metadata?.["rule"] ?? "";
    this.check = init.metadata?.["check"] ?? "";
  }
}

/** `LIMIT_EXCEEDED`: a governance limit (open channels, running tasks, ...) is reached. */
export class LimitExceededError extends AgentNetError {
  /** The id of the rule that sets the limit (metadata `rule`). */
  readonly rule: string;
  /** The limit reached (metadata `limit`). */
  readonly limit: string;

  /** Build the error from its fields (usually through {@link AgentNetError.create}). */
  constructor(init: AgentNetErrorInit) {
    super(init);
    this.name = "LimitExceededError";
    this.rule = init.metadata?.["rule"] ?? "";
    this.limit = init.metadata?.["limit"] ?? "";
  }
}

/** The name of a gRPC status code number (`"UNKNOWN"` for unknown numbers). */
export function codeName(code: number): string {
  const name: unknown = (GrpcStatus as unknown as Record<number, unknown>)[code];
  return typeof name === "string" ? name : "UNKNOWN";
}

function isServiceError(err: unknown): err is Partial<ServiceError> & Error & { code: number } {
  return err instanceof Error && typeof (err as Partial<ServiceError>).code === "number";
}
