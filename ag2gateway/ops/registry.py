"""The op table: each AG2 op registers itself here; :func:`dispatch` runs one."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from agentnet.v1 import hub_pb2, identity_pb2

from ag2gateway import frames
from ag2gateway.refusals import Ag2Refusal
from netkernel.errors import NotFound

if TYPE_CHECKING:
    from ag2gateway.connection import Connection

log = logging.getLogger(__name__)

Op = Callable[["Connection", dict[str, Any]], Awaitable[Any]]
"""An op: called as its request frame is read, it returns what the response waits for. An ``async def``
op does all its work when that is awaited; a plain function returning an awaitable does its first
part at once, in the frame's turn (``post_envelope`` queues the post on the sender's stream there)."""
OPS: dict[str, Op] = {}


def op(name: str) -> Callable[[Op], Op]:
    """Register an op under AG2's name for it."""

    def register(fn: Op) -> Op:
        OPS[name] = fn
        return fn

    return register


def start(conn: Connection, name: str, params: dict[str, Any]) -> Awaitable[Any]:
    """Begin one op (its first part runs now, see :data:`Op`); awaiting the result finishes it.
    Raises protocol_error for an unknown op (as AG2's hub answers) or bad params."""
    fn = OPS.get(name)
    if fn is None:
        raise Ag2Refusal(frames.PROTOCOL_ERROR, f"unknown control-plane op: {name!r}")
    try:
        return _finish(name, fn(conn, params))
    except (KeyError, TypeError, ValueError) as err:
        raise bad_params(name, err) from None


async def _finish(name: str, pending: Awaitable[Any]) -> Any:
    try:
        return await pending
    except (KeyError, TypeError, ValueError) as err:
        raise bad_params(name, err) from None


def bad_params(name: str, err: Exception) -> Ag2Refusal:
    """The protocol_error for an op's params of the wrong shape (as AG2's hub refuses them)."""
    return Ag2Refusal(frames.PROTOCOL_ERROR, f"bad params for {name!r}: {err!r}")


async def dispatch(conn: Connection, name: str, params: dict[str, Any]) -> Any:
    """Run one op (protocol_error for an unknown one, as AG2's hub answers)."""
    return await start(conn, name, params)


def text_param(params: dict[str, Any], key: str) -> str:
    value = params.get(key)
    if not isinstance(value, str) or not value:
        raise Ag2Refusal(frames.PROTOCOL_ERROR, f"params.{key} must be a non-empty string")
    return value


async def describe(conn: Connection, name_or_id: str) -> identity_pb2.AgentRecord:
    rpc = conn.reader()
    try:
        request = hub_pb2.DescribeAgentRequest(agent_id=name_or_id)
        return (await rpc.describe_agent(request)).agent
    except NotFound:
        return (await rpc.describe_agent(hub_pb2.DescribeAgentRequest(name=name_or_id))).agent
