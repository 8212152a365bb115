"""What the console's pages show, read through :class:`OperatorClient`: envelopes as rows by event
type, whose turn it is in each live channel, windows of a WAL, and the newest audit record."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from agentnet.v1 import a2a_pb2, channel_pb2, envelope_pb2, hub_pb2, operator_pb2

from agentsdk.cli.render import channel_state, enum_name, when
from agentsdk.operator import OperatorClient, execution_children

SENDER_COLOURS = 8
"""Senders are drawn in one of this many colours (chosen by their id, so a sender keeps its colour)."""


def clip(text: str, max_bytes: int) -> str:
    """``text`` cut to ``max_bytes`` UTF-8 bytes, saying how much was left out."""
    raw = text.encode()
    if len(raw) <= max_bytes:
        return text
    return raw[:max_bytes].decode(errors="ignore") + f"… ({len(raw) - max_bytes} more bytes)"


def colour(sender_id: str) -> int:
    """The colour index of a sender."""
    return hashlib.sha256(sender_id.encode()).digest()[0] % SENDER_COLOURS


@dataclass(frozen=True)
class EnvelopeRow:
    """One envelope as the channel page draws it (every string is escaped by the template)."""

    seq: int
    at: str
    sender: str
    colour: int
    kind: str
    """"system" (an ag2.channel.* event), "text" (ag2.msg.text) or "event" (anything else)."""
    event_type: str
    text: str
    audience: str


def envelope_row(env: envelope_pb2.Envelope, names: Mapping[str, str], max_bytes: int) -> EnvelopeRow:
    """An envelope as a row, by event type: a channel event, a text message, or the event's data."""
    sender = names.get(env.sender_id, env.sender_id) or "hub"
    audience = ", ".join(names.get(a, a) for a in env.audience.agent_ids) if env.HasField("audience") else ""
    try:
        data = json.loads(env.event_data_json) if env.event_data_json else {}
    except ValueError:
        data = env.event_data_json
    kind, text = "event", ""
    if env.event_type.startswith("ag2.channel."):
        kind = "system"
        reason = data.get("reason", "") if isinstance(data, dict) else ""
        text = env.event_type.removeprefix("ag2.channel.") + (f" ({reason})" if reason else "")
    elif env.event_type == "ag2.msg.text" and isinstance(data, dict):
        kind, text = "text", str(data.get("text", ""))
    else:
        text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return EnvelopeRow(
        seq=env.seq,
        at=when(env.created_time) if env.HasField("created_time") else env.created_at.replace("T", " ")[:19],
        sender=sender,
        colour=colour(env.sender_id),
        kind=kind,
        event_type=env.event_type,
        text=clip(text, max_bytes),
        audience=audience,
    )


def participant_names(channel: channel_pb2.ChannelMetadata) -> dict[str, str]:
    """A channel's participants: agent id → name."""
    return {p.agent_id: p.name or p.agent_id for p in channel.participants}


def named(value: object, names: Mapping[str, str]) -> object:
    """A JSON value with every participant's agent id (as a string value or an object key) replaced by
    the participant's name: an adapter state's ``expected_next_speaker``, who spoke, and the like."""
    if isinstance(value, str):
        return names.get(value, value)
    if isinstance(value, list):
        return [named(v, names) for v in value]
    if isinstance(value, dict):
        return {str(names.get(k, k)): named(v, names) for k, v in value.items()}
    return value


def adapter_state_text(adapter_state_json: str, names: Mapping[str, str], max_bytes: int) -> str:
    """An adapter's state as the channel page shows it: JSON with participants by name, clipped."""
    if not adapter_state_json:
        return ""
    try:
        state = json.loads(adapter_state_json)
    except ValueError:
        return clip(adapter_state_json, max_bytes)
    return clip(json.dumps(named(state, names), ensure_ascii=False), max_bytes)


def is_live(channel: channel_pb2.ChannelMetadata) -> bool:
    """Whether a channel is pending or opened."""
    return channel.state in (channel_pb2.CHANNEL_STATE_PENDING, channel_pb2.CHANNEL_STATE_OPENED)


def turn_text(channel: channel_pb2.ChannelMetadata, expected_next: Sequence[str]) -> str:
    """Whose turn it is, by name ("anyone" for a live channel without expectations, "" once ended)."""
    names = participant_names(channel)
    if not is_live(channel):
        return ""
    return ", ".join(names.get(a, a) for a in expected_next) or "anyone"


def channel_turns(page: operator_pb2.OperatorServiceListChannelsResponse) -> dict[str, str]:
    """Whose turn it is in each live channel of a page (channel id → names), from the page's own
    ``turns`` (no call per row)."""
    return {
        c.channel_id: turn_text(c, page.turns[c.channel_id].expected_next if c.channel_id in page.turns else [])
        for c in page.channels
        if is_live(c)
    }


def wal_window(last_seq: int, before: int, page_size: int) -> tuple[int, int]:
    """The seqs (first, last) of the page of envelopes just before ``before`` (0 = the newest page)."""
    until = min(last_seq, before - 1) if before else last_seq
    return max(1, until - page_size + 1), until


async def newest_audit_id(client: OperatorClient, *, kind: str = "", subject_id: str = "") -> int:
    """The id of the newest audit record matching the filters (0 = none): :meth:`OperatorClient.newest_audit_id`."""
    return await client.newest_audit_id(kind=kind, subject_id=subject_id)


@dataclass(frozen=True)
class AuditRow:
    """One audit record as the audit page draws it."""

    audit_id: int
    at: str
    kind: str
    actor: str
    """The actor's name ("hub" for the hub's own records; the id when the hub knows no such agent)."""
    actor_id: str
    subject: str
    detail: str


def audit_row(record: hub_pb2.AuditRecord, max_bytes: int, names: Mapping[str, str]) -> AuditRow:
    """An audit record as a row, its actor named from ``names`` (agent id → name)."""
    return AuditRow(
        audit_id=record.audit_id,
        at=when(record.created_at),
        kind=record.kind,
        actor=names.get(record.actor_id, record.actor_id) or "hub",
        actor_id=record.actor_id,
        subject=record.subject_id,
        detail=clip(record.detail_json, max_bytes),
    )


@dataclass(frozen=True)
class CallNode:
    """One A2A execution and the executions it made."""

    execution_id: str
    caller: str
    target: str
    skill: str
    status: str
    channel_id: str
    started: str
    error: str
    children: list[CallNode]


def call_tree(executions: Sequence[a2a_pb2.Execution], names: Mapping[str, str]) -> list[CallNode]:
    """The executions nested under the ones that made them (roots: calls from outside any A2A call)."""
    children = execution_children(executions)

    def node(e: a2a_pb2.Execution) -> CallNode:
        return CallNode(
            execution_id=e.execution_id,
            caller=names.get(e.caller_id, e.caller_id),
            target=names.get(e.target_id, e.target_id),
            skill=e.skill,
            status=enum_name(a2a_pb2.InvocationStatus, e.status, "INVOCATION_STATUS_"),
            channel_id=e.channel_id,
            started=when(e.started_at),
            error=e.error,
            children=[node(c) for c in children.get(e.execution_id, [])],
        )

    return [node(e) for e in children.get("", [])]


async def agent_names(client: OperatorClient, agent_ids: Iterable[str]) -> dict[str, str]:
    """Names of these agent ids (an unknown id keeps its id), in one batched lookup."""
    ids = {a for a in agent_ids if a}
    known = await client.names(ids) if ids else {}
    return {a: known.get(a, a) for a in ids}


@dataclass(frozen=True)
class RecentCall:
    """An A2A call that ended, from the audit log (``a2a_invoked``)."""

    execution_id: str
    caller: str
    target: str
    status: str
    at: str


async def recent_calls(client: OperatorClient, page_size: int) -> list[RecentCall]:
    """The A2A calls among the newest ``page_size`` ``a2a_invoked`` audit ids, newest first."""
    newest = await newest_audit_id(client, kind="a2a_invoked")
    if not newest:
        return []
    records = await client.list_audit(kind="a2a_invoked", after_id=max(0, newest - page_size), limit=page_size)
    names = await agent_names(client, [a for r in records for a in (r.actor_id, r.subject_id)])
    calls = []
    for r in reversed(records):
        try:
            detail = json.loads(r.detail_json) if r.detail_json else {}
        except ValueError:
            continue
        if not isinstance(detail, dict) or not detail.get("execution_id"):
            continue
        calls.append(
            RecentCall(
                execution_id=str(detail["execution_id"]),
                caller=names.get(r.actor_id, r.actor_id),
                target=names.get(r.subject_id, r.subject_id),
                status=str(detail.get("status", "")).removeprefix("INVOCATION_STATUS_").lower(),
                at=when(r.created_at),
            )
        )
    return calls


CHANNEL_STATES = {channel_state(v): v for v in channel_pb2.ChannelState.values() if v}
"""Channel states by their short name (pending, opened, closed, expired)."""
