"""Hub refusals as A2A errors: the hub's own gRPC status on the gRPC binding, a JSON-RPC error
code (or, for who-you-are and how-much refusals, the HTTP status) on the JSON-RPC binding."""

from __future__ import annotations

from typing import NoReturn

import grpc
from a2a.server.context import ServerCallContext
from a2a.utils.errors import (
    A2AError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    TaskNotCancelableError,
    TaskNotFoundError,
)
from starlette.exceptions import HTTPException

from netkernel.errors import (
    AgentNetError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PayloadTooLarge,
    ProtocolError,
    error_status,
    http_status,
)

HTTP_ANSWERED: frozenset[int] = frozenset({401, 403, 429, 503})
"""The HTTP statuses (:func:`netkernel.errors.http_status`) the JSON-RPC binding answers with: who-you-are,
how-much and try-later refusals, for which A2A's JSON-RPC has no error code; other refusals become
JSON-RPC errors (:func:`as_a2a_error`)."""


def grpc_context(context: ServerCallContext) -> grpc.aio.ServicerContext | None:
    """The gRPC call behind ``context``, None on the JSON-RPC binding."""
    found: grpc.aio.ServicerContext | None = context.state.get("grpc_context")
    return found


def as_a2a_error(err: AgentNetError) -> A2AError:
    """The JSON-RPC error of a hub refusal that has no HTTP status of its own."""
    if isinstance(err, InvalidArgument | PayloadTooLarge | NotFound | ProtocolError):
        return InvalidParamsError(message=err.message)
    if isinstance(err, FailedPrecondition):
        return InvalidRequestError(message=err.message)
    return InternalError(message=err.message)


async def refuse(err: AgentNetError | A2AError, context: ServerCallContext) -> NoReturn:
    """End the request with ``err``, as the binding that carries it expresses it."""
    call = grpc_context(context)
    if call is not None and isinstance(err, AgentNetError):
        await call.abort_with_status(error_status(err))
        raise AssertionError("abort_with_status returns only by raising")
    if isinstance(err, A2AError):
        raise err
    status = http_status(err)
    if status in HTTP_ANSWERED:
        headers = {"WWW-Authenticate": 'Bearer realm="agent-network"'} if status == 401 else None
        raise HTTPException(status_code=status, detail=err.message, headers=headers)
    raise as_a2a_error(err)


def task_not_found(task_id: str) -> TaskNotFoundError:
    """The task does not exist for this caller and agent."""
    return TaskNotFoundError(
        message=f"no task {task_id!r} of yours with this agent; ListTasks lists your tasks (tasks are the hub's "
        "A2A executions you started)."
    )


def not_cancelable(task_id: str, why: str) -> TaskNotCancelableError:
    """The task has ended."""
    return TaskNotCancelableError(message=f"task {task_id!r} cannot be cancelled: {why}")
