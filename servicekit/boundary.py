"""The error boundary of every agentnet servicer: where a domain error becomes a gRPC status.

Servicer methods raise :class:`~netkernel.errors.AgentNetError` subclasses; the
boundary ends the call with the error's status code, message and ``ErrorInfo``
(built by :func:`netkernel.errors.error_status`; set on the call, not aborted: see
:func:`end_with`). Anything else is a bug: it is
logged and answered ``INTERNAL`` without leaking internals. Wrap a method with
:func:`unary_boundary` / :func:`stream_boundary`, or open :class:`ErrorBoundary`
inside a long-lived stream handler (no per-message wrapper layer). :func:`error_detail` is the
same error as an ``ErrorDetail`` message, for answers that carry one outcome per item.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar, cast

import grpc
from agentnet.v1 import errors_pb2

from netkernel.errors import AgentNetError, InternalError, error_status

log = logging.getLogger("agentnet.service")

Req = TypeVar("Req")
Resp = TypeVar("Resp")


async def abort_with(context: grpc.aio.ServicerContext[Any, Any], error: AgentNetError) -> None:
    """End the call with ``error``'s status code, message and ErrorInfo details, at once (raises)."""
    await context.abort_with_status(error_status(error))


def end_with(context: grpc.aio.ServicerContext[Any, Any], error: AgentNetError) -> None:
    """Give the call ``error``'s status code, message and ErrorInfo details, sent when the handler
    returns. Unlike :func:`abort_with` it raises nothing: grpc.aio keeps the AbortError an abort
    raises on the call's state, whose traceback holds the handler's frames and they the call's
    state, a reference cycle keeping the request (megabytes when it was refused for its size) until
    the cyclic GC happens to run."""
    status = error_status(error)
    context.set_code(status.code)
    context.set_details(status.details)
    context.set_trailing_metadata(status.trailing_metadata)


def domain_error(exc: Exception, where: str) -> AgentNetError:
    """What a client is told about ``exc``: a domain error as it is; anything else is a bug in
    ``where``, logged with its traceback and answered as INTERNAL without internals."""
    if isinstance(exc, AgentNetError):
        return exc
    log.exception("unhandled error in %s", where)
    return InternalError(f"internal error in {where}: {type(exc).__name__}; nothing was changed. Report this bug.")


def error_detail(err: AgentNetError) -> errors_pb2.ErrorDetail:
    """The in-band form of a domain error, for an answer that carries several outcomes (a refused
    post's PostResult.error, CanSend's refusal, one item of a knowledge ReadMany)."""
    return errors_pb2.ErrorDetail(
        code=err.code.value[0], reason=err.reason, message=err.wire_message, metadata=err.wire_metadata
    )


class ErrorBoundary:
    """The boundary as an async context manager around a handler's body: a domain error raised
    inside ends the call with its status, a bug with INTERNAL; cancellation passes through."""

    def __init__(self, context: grpc.aio.ServicerContext[Any, Any], method: str) -> None:
        self._context = context
        self._method = method

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> bool:
        if exc is None or not isinstance(exc, Exception) or isinstance(exc, grpc.aio.AbortError):
            return False  # success, cancellation, generator close or an abort already under way
        end_with(self._context, domain_error(exc, self._method))
        return True  # the handler ends here; grpc.aio sends the status set (see end_with)


def unary_boundary(
    fn: Callable[[Any, Req, grpc.aio.ServicerContext[Req, Resp]], Awaitable[Resp]],
) -> Callable[[Any, Req, grpc.aio.ServicerContext[Req, Resp]], Awaitable[Resp]]:
    """Run a unary servicer method under :class:`ErrorBoundary`."""

    @functools.wraps(fn)
    async def wrapper(self: Any, request: Req, context: grpc.aio.ServicerContext[Req, Resp]) -> Resp:
        async with ErrorBoundary(context, fn.__qualname__):
            return await fn(self, request, context)
        return cast(Resp, None)  # refused: the boundary set the status; grpc.aio sends no response

    return wrapper


def stream_boundary(
    fn: Callable[[Any, Req, grpc.aio.ServicerContext[Req, Resp]], AsyncIterator[Resp]],
) -> Callable[[Any, Req, grpc.aio.ServicerContext[Req, Resp]], AsyncIterator[Resp]]:
    """Run a server-streaming (or bidi) servicer method under :class:`ErrorBoundary`."""

    @functools.wraps(fn)
    async def wrapper(self: Any, request: Req, context: grpc.aio.ServicerContext[Req, Resp]) -> AsyncIterator[Resp]:
        async with ErrorBoundary(context, fn.__qualname__):
            async for item in fn(self, request, context):
                yield item

    return wrapper
