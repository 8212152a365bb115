"""One exception hierarchy for the whole network, and its single mapping to gRPC.

Every domain error has a gRPC status code and a ``google.rpc.ErrorInfo`` reason
(domain ``agentnet.v1``, reasons from the ``ErrorReason`` enum in
``proto/agentnet/v1/errors.proto``). Servers raise these classes; the servicer
layer turns them into a status with ErrorInfo details; clients turn the status
back into the *same* class with :func:`error_from_rpc`. ``docs/errors.md`` shows
the table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from netkernel.clip import MAX_MESSAGE_BYTES, clip_metadata, clip_text

ERROR_DOMAIN = "agentnet.v1"


class AgentNetError(Exception):
    """Base of every error the hub, the knowledge service and the SDK raise.

    ``message`` says what was wrong and what to do; ``metadata`` carries structured
    context (ids, expected values) that travels in the ErrorInfo.
    """

    reason: ClassVar[str] = "INTERNAL"
    code: ClassVar[grpc.StatusCode] = grpc.StatusCode.INTERNAL

    def __init__(self, message: str, *, metadata: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.metadata: dict[str, str] = dict(metadata or {})

    @property
    def wire_message(self) -> str:
        """The message as a client receives it: clipped to ``netkernel.clip.MAX_MESSAGE_BYTES``."""
        return clip_text(self.message, MAX_MESSAGE_BYTES)

    @property
    def wire_metadata(self) -> dict[str, str]:
        """The metadata as a client receives it: few entries, each value clipped (``netkernel.clip``)."""
        return clip_metadata(self.metadata)


class ProtocolError(AgentNetError):
    """The envelope breaks the channel's protocol for the adapter's current state."""

    reason = "PROTOCOL_ERROR"
    code = grpc.StatusCode.FAILED_PRECONDITION


class ChannelClosed(ProtocolError):
    """The channel is closed or expired (consulting: its 1 question + 1 reply are done)."""

    reason = "CHANNEL_CLOSED"


class NotYourTurn(ProtocolError):
    """Another participant is expected to speak."""

    reason = "NOT_YOUR_TURN"


class DepthExceeded(ProtocolError):
    """The envelope's delegation depth is above the hub's limit."""

    reason = "DEPTH_EXCEEDED"


class FailedPrecondition(AgentNetError):
    """A precondition other than turn-taking failed (e.g. the task is not running)."""

    reason = "FAILED_PRECONDITION"
    code = grpc.StatusCode.FAILED_PRECONDITION


class Superseded(AgentNetError):
    """A newer Connect stream of the same identity took this one over (metadata ``superseded_by``: its
    session id). Permanent for the stream it ends: a client stops instead of reconnecting."""

    reason = "SUPERSEDED"
    code = grpc.StatusCode.FAILED_PRECONDITION


class TurnFailed(AgentNetError):
    """The agent that was to answer reported that its turn failed (its model call, a tool or its handler
    raised): no answer is coming. Metadata ``channel_id``, ``envelope_id`` (the envelope it failed on),
    ``agent_id``, ``error_class``; the message carries the agent's short, redacted error message."""

    reason = "TURN_FAILED"
    code = grpc.StatusCode.ABORTED


class NotParticipant(AgentNetError):
    """The caller is not a participant of the channel."""

    reason = "NOT_PARTICIPANT"
    code = grpc.StatusCode.PERMISSION_DENIED


class PermissionDenied(AgentNetError):
    """Authenticated, but not allowed (spoofed sender, allowed_callers, access rules)."""

    reason = "PERMISSION_DENIED"
    code = grpc.StatusCode.PERMISSION_DENIED


class RuleDenied(PermissionDenied):
    """A governance rule (or the arbiter) refuses this action; metadata ``rule`` names it, ``check`` the part."""

    reason = "RULE_DENIED"


class Unauthenticated(AgentNetError):
    """Missing, unknown or revoked credential."""

    reason = "UNAUTHENTICATED"
    code = grpc.StatusCode.UNAUTHENTICATED


class TokenExpired(Unauthenticated):
    """An A2A call token expired; refresh it and retry."""

    reason = "TOKEN_EXPIRED"


class InboxFull(AgentNetError):
    """A recipient's inbox is full; retry later."""

    reason = "INBOX_FULL"
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class RateLimited(AgentNetError):
    """The caller exceeded its rate limit; retry later."""

    reason = "RATE_LIMITED"
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class LimitExceeded(AgentNetError):
    """A governance limit is reached (open channels, running tasks; metadata ``rule``, ``limit``), or an A2A
    call holds its most call tokens (metadata ``execution_id``, ``limit``, ``held``)."""

    reason = "LIMIT_EXCEEDED"
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class PayloadTooLarge(AgentNetError):
    """A payload exceeds the configured size limit."""

    reason = "PAYLOAD_TOO_LARGE"
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class InvalidArgument(AgentNetError):
    """A field is malformed or out of range."""

    reason = "INVALID_ARGUMENT"
    code = grpc.StatusCode.INVALID_ARGUMENT


class OutOfRange(InvalidArgument):
    """An offset or position lies outside the valid range (e.g. inside a UTF-8 character)."""

    reason = "OUT_OF_RANGE"
    code = grpc.StatusCode.OUT_OF_RANGE


class NotFound(AgentNetError):
    """The named agent, channel, task, execution or path does not exist."""

    reason = "NOT_FOUND"
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(AgentNetError):
    """The thing being created exists already (e.g. a passport name)."""

    reason = "ALREADY_EXISTS"
    code = grpc.StatusCode.ALREADY_EXISTS


class Timeout(AgentNetError):
    """A wait (task wait, delegate, invoke, open) timed out."""

    reason = "TIMEOUT"
    code = grpc.StatusCode.DEADLINE_EXCEEDED


class Unimplemented(AgentNetError):
    """The RPC or feature is not implemented by this server yet."""

    reason = "UNIMPLEMENTED"
    code = grpc.StatusCode.UNIMPLEMENTED


class Unavailable(AgentNetError):
    """The server is shutting down or a backend is unreachable; retry."""

    reason = "UNAVAILABLE"
    code = grpc.StatusCode.UNAVAILABLE


class LostRace(Unavailable):
    """Inside the hub: a write was not stored because another hub replica's write to the same
    channel reached the shared store first (or an earlier write of the channel lost such a
    race). Nothing of it was written, so the hub admits the post again against the channel's
    fresh state; a client sees UNAVAILABLE only if that keeps failing."""


PARTITION_MOVED = "partition_moved"
"""The ``cause`` of an UNAVAILABLE write refused because this hub replica no longer owns the
channel's partition (docs/scale-out.md, "Partitions and ownership"): retryable."""


class PartitionMoved(Unavailable):
    """Inside the hub: a write was not stored because this replica no longer holds the lease of the
    channel's partition with the epoch the write was fenced with (its lease lapsed, or another
    replica owns the partition now). Nothing of it was written; a client gets UNAVAILABLE with
    metadata ``cause: partition_moved`` (and ``partition``) and retries, reaching the new owner."""

    def __init__(self, message: str, *, metadata: Mapping[str, str] | None = None) -> None:
        super().__init__(message, metadata={"cause": PARTITION_MOVED, **(metadata or {})})


class InternalError(AgentNetError):
    """A bug in the server; nothing was changed."""

    reason = "INTERNAL"
    code = grpc.StatusCode.INTERNAL


def _all_error_classes() -> list[type[AgentNetError]]:
    seen: list[type[AgentNetError]] = []
    stack: list[type[AgentNetError]] = [AgentNetError]
    while stack:
        cls = stack.pop()
        seen.append(cls)
        stack.extend(cls.__subclasses__())
    return seen


#: reason string -> exception class; the single error table.
ERROR_CLASSES: dict[str, type[AgentNetError]] = {}
for _cls in _all_error_classes():
    # A subclass sharing its parent's reason (LostRace: an UNAVAILABLE marked inside the hub)
    # does not take the reason over: a client gets the parent class.
    if _cls is not AgentNetError:
        ERROR_CLASSES.setdefault(_cls.reason, _cls)


def error_status(error: AgentNetError) -> grpc.Status:
    """Build the gRPC status (code, message, ErrorInfo details) for ``error``; what it echoes is clipped."""
    info = error_details_pb2.ErrorInfo(reason=error.reason, domain=ERROR_DOMAIN, metadata=error.wire_metadata)
    detail = any_pb2.Any()
    detail.Pack(info)
    proto = status_pb2.Status(code=error.code.value[0], message=error.wire_message, details=[detail])
    return rpc_status.to_status(proto)


HTTP_STATUS: tuple[tuple[type[AgentNetError], int], ...] = (
    (Unauthenticated, 401),
    (NotParticipant, 403),
    (PermissionDenied, 403),
    (PayloadTooLarge, 413),
    (RateLimited, 429),
    (InboxFull, 429),
    (LimitExceeded, 429),
    (InvalidArgument, 400),
    (NotFound, 404),
    (AlreadyExists, 409),
    (FailedPrecondition, 409),
    (ProtocolError, 409),
    (Superseded, 409),
    (TurnFailed, 502),
    (Timeout, 504),
    (Unimplemented, 501),
    (Unavailable, 503),
)
"""The HTTP status of each refusal, for the services that answer over HTTP (the A2A gateway, the
console): the first entry ``err`` is an instance of wins (subclasses — ``RuleDenied``, ``OutOfRange``,
``ChannelClosed``, ``TokenExpired`` — take their parent's); anything else is 500."""


def http_status(err: AgentNetError) -> int:
    """The HTTP status of ``err`` (:data:`HTTP_STATUS`; 500 for a class it does not list)."""
    return next((status for kind, status in HTTP_STATUS if isinstance(err, kind)), 500)


def error_from_reason(
    reason: str, message: str, metadata: Mapping[str, str] | None = None, *, code: int | None = None
) -> AgentNetError:
    """Rebuild the domain exception for an ErrorInfo reason (unknown reasons map by code)."""
    cls = ERROR_CLASSES.get(reason)
    if cls is None:
        cls = _class_for_code(code) if code is not None else InternalError
    return cls(message, metadata=metadata)


_CODE_FALLBACK: dict[int, type[AgentNetError]] = {
    code_pb2.INVALID_ARGUMENT: InvalidArgument,
    code_pb2.NOT_FOUND: NotFound,
    code_pb2.ALREADY_EXISTS: AlreadyExists,
    code_pb2.PERMISSION_DENIED: PermissionDenied,
    code_pb2.UNAUTHENTICATED: Unauthenticated,
    code_pb2.FAILED_PRECONDITION: FailedPrecondition,
    code_pb2.RESOURCE_EXHAUSTED: RateLimited,
    code_pb2.DEADLINE_EXCEEDED: Timeout,
    code_pb2.UNIMPLEMENTED: Unimplemented,
    code_pb2.UNAVAILABLE: Unavailable,
    code_pb2.OUT_OF_RANGE: OutOfRange,
}


def _class_for_code(code: int) -> type[AgentNetError]:
    return _CODE_FALLBACK.get(code, InternalError)


def error_from_rpc(err: grpc.RpcError) -> AgentNetError:
    """Turn a failed call's status back into the exception class the server raised.

    Works for ``grpc.aio.AioRpcError`` and sync ``grpc.RpcError`` alike. A status
    without ErrorInfo (e.g. a transport failure) maps by its code.
    """
    status = rpc_status.from_call(err)
    code_enum = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    code_num: int = code_enum.value[0] if code_enum is not None else code_pb2.UNKNOWN
    details = (err.details() if hasattr(err, "details") else None) or str(err)
    if status is not None:
        for detail in status.details:
            if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                info = error_details_pb2.ErrorInfo()
                detail.Unpack(info)
                if info.domain == ERROR_DOMAIN:
                    return error_from_reason(info.reason, status.message, dict(info.metadata), code=status.code)
        return error_from_reason("", status.message, code=status.code)
    return error_from_reason("", details, code=code_num)
