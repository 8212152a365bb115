"""AG2's channel, envelope and WAL ops (and the turn-failure report, which has no hub RPC)."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from agentnet.v1 import channel_pb2, envelope_pb2, hub_pb2

from ag2gateway import frames, ids, records
from ag2gateway.ops.registry import op, text_param
from ag2gateway.refusals import Ag2Refusal
from agentsdk.rpc import HubRpc
from netkernel.channel_types import WORKFLOW_TYPE
from netkernel.errors import AgentNetError, NotFound
from netkernel.turn_failure import safe_message

if TYPE_CHECKING:
    from ag2gateway.connection import Connection

log = logging.getLogger(__name__)

MAX_WAL = 10_000
"""Envelopes one ``read_wal`` returns (AG2 reads whole WALs; longer channels are cut here)."""


def _ttl(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and value[:-1].isdigit() and value[-1] in "smhd":
        return float(int(value[:-1]) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[value[-1]])
    raise Ag2Refusal(frames.PROTOCOL_ERROR, f"params.ttl must be seconds or a duration like '2h', got {value!r}")


@op("create_channel")
async def create_channel(conn: Connection, params: dict[str, Any]) -> Any:
    """``OpenChannel`` as the creator, answered once the channel is open, as AG2's hub answers: invites go
    out, and the hub returns when every invitee acked (``wait_until_opened``). A channel that ended
    instead (an invitee rejected, the acks did not come within the hub's invite-ack timeout) is
    protocol_error, as AG2's ``create_channel`` fails then; so the creator may send at once."""
    creator = params.get("creator_id")
    rpc = conn.as_agent(creator)
    channel_type = text_param(params, "manifest_type")
    participants = params["participants"]
    if not isinstance(participants, list) or not all(isinstance(p, str) for p in participants):
        raise Ag2Refusal(frames.PROTOCOL_ERROR, "params.participants must be a list of agent ids")
    raw_knobs = params.get("knobs")
    graph = raw_knobs.get("graph") if isinstance(raw_knobs, dict) else None
    if channel_type == WORKFLOW_TYPE and not isinstance(graph, dict):
        raise Ag2Refusal(  # AG2's hub refuses it so, in AG2's words (the hub refuses it too)
            frames.PROTOCOL_ERROR,
            "workflow requires knobs['graph'] as a dict: pass TransitionGraph.to_dict() as knobs={'graph': ...}",
        )
    knobs = records.knobs_from_ag2(channel_type, params.get("knobs"), params.get("labels"))
    request = hub_pb2.OpenChannelRequest(
        type=channel_type,
        targets=[p for p in participants if p != creator],
        knobs_json=json.dumps(knobs) if knobs else "",
        intent=params.get("intent") or "",
        wait_until_opened=True,
    )
    ttl = _ttl(params.get("ttl"))
    if ttl is not None:
        request.ttl_seconds = ttl
    meta = (await rpc.open_channel(request)).channel
    conn.learn_channel(meta.channel_id, str(creator))
    if meta.state != channel_pb2.CHANNEL_STATE_OPENED:
        raise Ag2Refusal(frames.PROTOCOL_ERROR, _not_opened(meta))
    return records.channel_to_ag2(meta)


def _not_opened(meta: channel_pb2.ChannelMetadata) -> str:
    """Why a channel did not open (the message AG2's hub gives for the same case, with the hub's reason)."""
    if meta.close_reason == "invite_timeout":
        return f"channel {meta.channel_id!r} ack timeout: not every invitee acked its invite (invite_timeout)"
    if meta.close_reason == "invite_rejected":
        return f"channel {meta.channel_id!r} rejected: an invitee rejected its invite (invite_rejected)"
    state = channel_pb2.ChannelState.Name(meta.state)
    return f"channel {meta.channel_id!r} did not open: {state} ({meta.close_reason or 'no reason given'})"


@op("get_channel")
async def get_channel(conn: Connection, params: dict[str, Any]) -> Any:
    """``DescribeChannel`` as a bound participant."""

    async def call(rpc: HubRpc) -> Any:
        meta = (await rpc.describe_channel(hub_pb2.DescribeChannelRequest(channel_id=params["channel_id"]))).channel
        return records.channel_to_ag2(meta)

    return await conn.on_channel(params.get("channel_id"), call)


@op("list_channels")
async def list_channels(conn: Connection, params: dict[str, Any]) -> Any:
    """``ListChannels`` of the named identity (or of every identity bound here)."""
    limit = min(int(params.get("limit") or 50), 1000)
    agent_id = params.get("agent_id")
    agents = [agent_id] if agent_id is not None else list(conn.bound)
    seen: dict[str, Any] = {}
    for agent in agents:
        conn.as_agent(agent)
        response = await conn.bound[agent].rpc.list_channels(
            hub_pb2.ListChannelsRequest(include_ended=True, limit=limit)
        )
        for meta in response.channels:
            conn.learn_channel(meta.channel_id, agent)
            seen.setdefault(meta.channel_id, records.channel_to_ag2(meta))
    return list(seen.values())[:limit]


@op("close_channel")
async def close_channel(conn: Connection, params: dict[str, Any]) -> Any:
    """``CloseChannel`` as a bound participant."""

    async def call(rpc: HubRpc) -> Any:
        request = hub_pb2.CloseChannelRequest(channel_id=params["channel_id"], reason=params.get("reason") or "")
        return records.channel_to_ag2((await rpc.close_channel(request)).channel)

    return await conn.on_channel(params.get("channel_id"), call)


@op("post_envelope")
def post_envelope(conn: Connection, params: dict[str, Any]) -> Awaitable[Any]:
    """A post as the envelope's sender, over its Connect stream (answered once the hub committed it);
    returns the AG2 id of the admitted envelope. The post is queued on the stream as the request
    frame is read: one event-loop turn sooner than in the op's task, and in the order read. (A
    connection runs its clients' ``post_envelope`` frames by :func:`post_parts` and
    :meth:`IdentityStream.post_then <ag2gateway.delivery.IdentityStream.post_then>` instead, answered
    without a task; this is the same op for :func:`~ag2gateway.ops.registry.dispatch`.)"""
    sender, env = post_parts(params)
    return _posted(conn, conn.identity(sender).stream.post(env), str(sender))


def post_parts(params: dict[str, Any]) -> tuple[Any, envelope_pb2.Envelope]:
    """The sender id (as sent: :meth:`Connection.identity` refuses one not bound) and the hub envelope
    of a ``post_envelope``'s params (KeyError, TypeError or ValueError for params of the wrong shape;
    the hub's InvalidArgument for a bad envelope)."""
    raw = params["envelope"]
    env = records.envelope_from_ag2(raw)
    return raw.get("sender_id"), env


def posted_id(conn: Connection, admitted: envelope_pb2.Envelope, sender: str) -> str:
    """The AG2 id a ``post_envelope`` answers with, for the envelope the hub admitted (remembered for
    the connection, as :func:`~ag2gateway.records.envelope_to_ag2` would, without converting the rest)."""
    conn.learn_channel(admitted.channel_id, sender)
    ag2 = ids.ag2_id(admitted)
    conn.memory.remember(admitted.envelope_id, ag2)
    return ag2


async def _posted(conn: Connection, posting: Awaitable[envelope_pb2.Envelope], sender: str) -> str:
    return posted_id(conn, await posting, sender)


@op("read_wal")
async def read_wal(conn: Connection, params: dict[str, Any]) -> Any:
    """``ReadWal`` as a bound participant: what it may read, in admission order (``since`` / ``until``
    are list positions, as AG2's)."""
    since = int(params.get("since") or 0)
    until = params.get("until")

    async def call(rpc: HubRpc) -> Any:
        request = hub_pb2.ReadWalRequest(channel_id=params["channel_id"], limit=MAX_WAL)
        return [r.envelope async for r in rpc.read_wal(request)]

    envelopes = await conn.on_channel(params.get("channel_id"), call)
    out = [records.envelope_to_ag2(e, conn.memory) for e in envelopes]
    return out[since : None if until is None else int(until)]


@op("find_envelope_by_causation")
async def find_envelope_by_causation(conn: Connection, params: dict[str, Any]) -> Any:
    """``FindReply``: the sender's envelope answering ``causation_id``, or None."""
    request = hub_pb2.FindReplyRequest(
        channel_id=text_param(params, "channel_id"),
        causation_id=ids.hub_envelope_id(text_param(params, "causation_id")),
        sender=text_param(params, "sender_id"),
    )

    async def call(rpc: HubRpc) -> Any:
        response = await rpc.find_reply(request)
        return records.envelope_to_ag2(response.envelope, conn.memory) if response.HasField("envelope") else None

    return await conn.on_channel(request.channel_id, call)


@op("can_send")
async def can_send(conn: Connection, params: dict[str, Any]) -> Any:
    """``CanSend`` as the sender (a substantive text when no event type is named, as AG2's probe)."""
    event_type = params.get("event_type") or "ag2.msg.text"
    request = hub_pb2.CanSendRequest(
        channel_id=text_param(params, "channel_id"), event_type=records.EVENT_FROM_AG2.get(event_type, event_type)
    )
    try:
        return (await conn.as_agent(params.get("sender_id")).can_send(request)).allowed
    except NotFound:
        return False


@op("pending_turns_for")
async def pending_turns_for(conn: Connection, params: dict[str, Any]) -> Any:
    """``ListPendingTurns`` as the identity, each as AG2's ``PendingTurn``."""
    rpc = conn.as_agent(params.get("agent_id"))
    turns = (await rpc.list_pending_turns(hub_pb2.ListPendingTurnsRequest(limit=1000))).turns
    out = []
    for turn in turns:
        trigger, at = None, ""
        if turn.seq:
            request = hub_pb2.ReadWalRequest(channel_id=turn.channel_id, from_seq=turn.seq, until_seq=turn.seq, limit=1)
            async for r in rpc.read_wal(request):
                trigger, at = records.envelope_to_ag2(r.envelope, conn.memory)["envelope_id"], r.envelope.created_at
        out.append({"channel_id": turn.channel_id, "triggering_envelope_id": trigger, "expected_at": at})
    return out


@op("report_turn_failure")
async def report_turn_failure(conn: Connection, params: dict[str, Any]) -> Any:
    """The hub's ReportTurnFailure: the channel hears of it (``ag2.channel.turn_failed``), the hub audits and
    counts it and applies the channel's ``on_turn_failed`` policy. AG2 sends the exception as text only, so
    the error class is ``ag2.TurnFailure``. A report the hub refuses (e.g. the channel ended, or an envelope
    of another channel) is logged: AG2's handler reports from its own error path, and nothing answers it."""
    rpc = conn.as_agent(params.get("agent_id"))
    envelope_id = str(params.get("envelope_id") or "")
    ref = ids.parse(envelope_id)
    request = hub_pb2.ReportTurnFailureRequest(
        channel_id=str(params.get("channel_id") or ""),
        envelope_id=ref.envelope_id if ref is not None else envelope_id,
        error_class="ag2.TurnFailure",
        message=safe_message(str(params.get("error", ""))),
    )
    try:
        await rpc.report_turn_failure(request)
    except AgentNetError as err:
        log.warning("AG2 turn failure not recorded by the hub (%s): %s", err.reason, err.message)
