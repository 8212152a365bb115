"""How the ``agentnet`` command draws what it read: rich tables, envelopes (a line per event,
a colour per sender), the A2A call tree, and the JSON form every command prints with ``--json``."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from agentnet.v1 import a2a_pb2, channel_pb2, envelope_pb2, operator_pb2, task_pb2
from google.protobuf import json_format
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from agentsdk.operator import execution_children

SENDER_COLOURS = ("cyan", "magenta", "green", "yellow", "blue", "bright_red", "bright_cyan", "bright_magenta")
"""The colours senders are drawn in (a sender keeps its colour: it is chosen by its id)."""


def as_json(message: Message) -> dict[str, Any]:
    """A protobuf message as a JSON object (proto field names; enums by name; JSON text fields parsed)."""
    data = json_format.MessageToDict(message, preserving_proto_field_name=True)
    for key in list(data):
        if key.endswith("_json") and isinstance(data[key], str):
            try:
                data[key[: -len("_json")]] = json.loads(data[key]) if data[key] else None
            except ValueError:
                continue
            del data[key]
    return data


def to_json(value: Any) -> Any:
    """``value`` as JSON data: messages as :func:`as_json`, lists and dicts item by item."""
    if isinstance(value, Message):
        return as_json(value)
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    return value


def dumps(value: Any) -> str:
    """One line of JSON."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def enum_name(enum: Any, value: int, prefix: str) -> str:
    """An enum value's short name (``CHANNEL_STATE_OPENED`` → ``opened``)."""
    name: str = enum.Name(value)
    return name.removeprefix(prefix).lower()


def when(ts: Timestamp) -> str:
    """A timestamp as local-free UTC text ("" when unset)."""
    if not ts.seconds and not ts.nanos:
        return ""
    return datetime.fromtimestamp(ts.seconds + ts.nanos / 1e9, UTC).strftime("%Y-%m-%d %H:%M:%S")


def table(title: str, columns: Sequence[str], rows: Iterable[Sequence[str | Text]]) -> Table:
    """A rich table with these columns and rows."""
    out = Table(title=title, title_justify="left")
    for column in columns:
        out.add_column(column, overflow="fold")
    for row in rows:
        out.add_row(*row)
    return out


def channel_state(state: int) -> str:
    """A channel state's short name."""
    return enum_name(channel_pb2.ChannelState, state, "CHANNEL_STATE_")


def task_state(state: int) -> str:
    """A task state's short name."""
    return enum_name(task_pb2.TaskState, state, "TASK_STATE_")


def whose_turn(channel: channel_pb2.ChannelMetadata, expected_next: Sequence[str]) -> str:
    """Whose turn it is in a channel, by name where the channel knows it (its id otherwise): the expected
    next speakers; "anyone" in a live channel that expects no one; "" once it ended."""
    if channel.state not in (channel_pb2.CHANNEL_STATE_PENDING, channel_pb2.CHANNEL_STATE_OPENED):
        return ""
    names = {p.agent_id: p.name for p in channel.participants if p.name}
    return ", ".join(names.get(a, a) for a in expected_next) or "anyone"


def channels_table(
    channels: Iterable[channel_pb2.ChannelMetadata], turns: Mapping[str, Sequence[str]] | None = None
) -> Table:
    """Channels, one per row, with whose turn it is (``turns``: channel id → expected next speakers)."""
    turns = turns or {}
    return table(
        "channels",
        ["channel", "type", "state", "whose turn", "participants", "last seq", "created", "intent"],
        (
            [
                c.channel_id,
                c.type,
                channel_state(c.state),
                whose_turn(c, turns.get(c.channel_id, ())),
                ", ".join(p.name or p.agent_id for p in c.participants),
                str(c.last_seq),
                when(c.created_at),
                c.intent,
            ]
            for c in channels
        ),
    )


def field_rows(message: Message) -> list[list[str]]:
    """A message's fields as (name, value) rows; nested values as JSON."""
    return [[key, value if isinstance(value, str) else dumps(value)] for key, value in as_json(message).items()]


def channel_rows(described: Any) -> list[list[str]]:
    """An OperatorService DescribeChannel answer as rows: metadata, participants, whose turn, adapter state."""
    c: channel_pb2.ChannelMetadata = described.channel
    names = {p.agent_id: p.name or p.agent_id for p in c.participants}
    participants = ", ".join(
        f"{p.name or p.agent_id} ({enum_name(channel_pb2.ParticipantRole, p.role, 'PARTICIPANT_ROLE_')}"
        + (", acked)" if p.acked else ")")
        for p in c.participants
    )
    rows = [
        ["channel", c.channel_id],
        ["type", c.type],
        ["state", channel_state(c.state) + (f" ({c.close_reason})" if c.close_reason else "")],
        ["participants", participants],
        [
            "whose turn",
            ", ".join(names.get(a, a) for a in described.expected_next) or ("anyone" if described.live else ""),
        ],
        ["last seq", str(c.last_seq)],
        ["created", when(c.created_at)],
        ["intent", c.intent],
    ]
    if c.expires_at.seconds:
        rows.append(["expires", when(c.expires_at)])
    if c.closed_at.seconds:
        rows.append(["ended", when(c.closed_at)])
    if described.adapter_state_json:
        rows.append(["adapter state", described.adapter_state_json])
    return rows


def tasks_table(tasks: Iterable[task_pb2.TaskMetadata], names: Mapping[str, str]) -> Table:
    """Tasks, one per row (owners by name where ``names`` knows them)."""
    return table(
        "tasks",
        ["task", "title", "state", "owner", "channel", "created", "updated"],
        (
            [
                t.task_id,
                t.title,
                task_state(t.state),
                names.get(t.owner_id, t.owner_id),
                t.channel_id,
                when(t.created_at),
                when(t.updated_at),
            ]
            for t in tasks
        ),
    )


def task_rows(t: task_pb2.TaskMetadata, names: Mapping[str, str]) -> list[list[str]]:
    """One task as (field, value) rows: its state by name, its owner by name, times as UTC text."""
    rows = [
        ["task", t.task_id],
        ["title", t.title],
        ["state", task_state(t.state) + (" (cancel requested)" if t.cancel_requested else "")],
        [
            "owner",
            f"{names[t.owner_id]} ({t.owner_id})" if names.get(t.owner_id, t.owner_id) != t.owner_id else t.owner_id,
        ],
        ["channel", t.channel_id],
        ["created", when(t.created_at)],
        ["updated", when(t.updated_at)],
    ]
    optional = [
        ("expires", when(t.expires_at)),
        ("progress", t.progress_json),
        ("result", t.result_json),
        ("error", t.error),
        ("cancel reason", t.cancel_reason),
    ]
    return rows + [[k, v] for k, v in optional if v]


def sender_style(sender_id: str) -> str:
    """The colour a sender is drawn in."""
    digest = hashlib.sha256(sender_id.encode()).digest()
    return SENDER_COLOURS[digest[0] % len(SENDER_COLOURS)]


def envelope_line(env: envelope_pb2.Envelope, names: Mapping[str, str]) -> Text:
    """One envelope as a line: seq, sender in its colour, then what it says by event type."""
    sender = names.get(env.sender_id, env.sender_id) or "hub"
    line = Text(f"{env.seq:>6} ", style="dim")
    try:
        data = json.loads(env.event_data_json) if env.event_data_json else {}
    except ValueError:
        data = env.event_data_json
    if env.event_type.startswith("ag2.channel."):
        event = env.event_type.removeprefix("ag2.channel.")
        reason = data.get("reason", "") if isinstance(data, dict) else ""
        line.append(f"── {event}", style="italic dim")
        line.append(f" by {sender}" if env.sender_id else "", style="italic dim")
        line.append(f" ({reason})" if reason else "", style="italic dim")
        return line
    line.append(sender, style=f"bold {sender_style(env.sender_id)}")
    if env.HasField("audience") and env.audience.agent_ids:
        line.append(" → " + ", ".join(names.get(a, a) for a in env.audience.agent_ids), style="dim")
    if env.event_type == "ag2.msg.text" and isinstance(data, dict):
        line.append(": ")
        line.append(str(data.get("text", "")))
        return line
    line.append(f" [{escape(env.event_type)}] ", style="dim")
    line.append(dumps(data) if not isinstance(data, str) else data)
    return line


def call_tree(executions: Sequence[a2a_pb2.Execution], names: Mapping[str, str], title: str) -> Tree:
    """An A2A call tree: each execution under the one that made it."""
    children = execution_children(executions)
    tree = Tree(Text(title, style="bold"))

    def label(e: a2a_pb2.Execution) -> Text:
        status = enum_name(a2a_pb2.InvocationStatus, e.status, "INVOCATION_STATUS_")
        style = {"completed": "green", "failed": "red", "running": "yellow"}.get(status, "")
        text = Text(f"{names.get(e.caller_id, e.caller_id)} → {names.get(e.target_id, e.target_id)}")
        text.append(f"  {status}", style=style)
        text.append(f"  {e.execution_id}", style="dim")
        if e.skill:
            text.append(f"  skill={e.skill}", style="dim")
        if e.error:
            text.append(f"  {e.error}", style="red")
        return text

    def add(node: Tree, parent: str) -> None:
        for e in children.get(parent, []):
            add(node.add(label(e)), e.execution_id)

    add(tree, "")
    return tree


def _bytes(n: int) -> str:
    """``n`` bytes for a person (KiB, MiB, GiB)."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def partition_rows(st: operator_pb2.GetStatusResponse) -> list[list[str]]:
    """The status rows of how the replicas divide the channels (none when every replica holds all)."""
    if not st.HasField("partitions"):
        return []
    p = st.partitions
    replicas = {o.replica_id for o in p.owners}
    return [
        ["partitions", f"{len(p.held)} of {p.count} held here; {len(replicas)} replicas hold {len(p.owners)}"],
        ["channels followed", str(p.followed_channels)],
    ]


def retention_rows(r: operator_pb2.RetentionStatus) -> list[list[str]]:
    """The status rows of what the hub keeps of ended channels and how big its store is."""
    keep = "everything (no --retain-ended)" if not r.retain_ended_seconds else f"{r.retain_ended_seconds:g} s"
    if r.retain_ended_by_type:
        by_type = ", ".join(f"{t} {s:g} s" if s else f"{t} forever" for t, s in sorted(r.retain_ended_by_type.items()))
        keep += f" (policy: {by_type})"
    sweep = f"{when(r.last_sweep_at)} UTC, purged {r.last_sweep_purged}" if r.HasField("last_sweep_at") else "none yet"
    if r.retain_audit_seconds and r.HasField("last_sweep_at"):
        sweep += f" channels and {r.last_sweep_audit_purged} audit records"
    audit = f"{r.retain_audit_seconds:g} s" if r.retain_audit_seconds else "everything (no --retain-audit)"
    return [
        ["retention of ended channels", keep + (f", archived to {r.archive_dir}" if r.archive_dir else "")],
        ["retention of audit records", audit],
        [
            "ended channels kept",
            f"{r.ended_channels_kept if r.ended_channels_kept >= 0 else 'not counted'} ({r.channels_purged} purged)",
        ],
        ["last retention sweep", sweep],
        ["store size", _bytes(r.store_size_bytes) if r.store_size_bytes >= 0 else "unknown"],
    ]
