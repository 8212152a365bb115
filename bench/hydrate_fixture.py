"""Builds a large hub database directly through the storage layer and times hydrate.

Every channel is live and its WAL is what the hub itself would have written: the
invites (each to its target), the acks, "opened", then the channel's traffic. ``types``
names the channel types the channels take in turn: the default is two-agent
conversations of text; ``MIXED`` adds three-agent round-robin discussions (one text in
seven addressed to a single participant), three-agent workflows (routed packets, a
context update in every tenth) and consulting channels waiting for their reply (a
consulting channel ends with its reply, so a live one holds four envelopes).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentnet.v1 import channel_pb2, envelope_pb2, identity_pb2

from hubsvc.adapters import get_adapter
from hubsvc.adapters.base import ChannelSpec
from hubsvc.core.hub import HubCore
from hubsvc.core.util import iso_z, new_id, to_timestamp
from hubsvc.storage import AgentRow, ChannelRow, SqliteHubStore, WalRow, Writes

PER_CHANNEL = 1000
CONVERSATION = ("conversation",)
MIXED = ("conversation", "discussion", "workflow", "consulting")
_MEMBERS = {"conversation": 2, "discussion": 3, "workflow": 3, "consulting": 2}
_KNOBS: dict[str, dict[str, Any]] = {
    "workflow": {
        "transitions": [{"condition": {"type": "always"}, "target": {"type": "round_robin"}}],
        "max_turns": 1_000_000,
        "context": {"stage": "draft"},
    }
}


def _traffic(kind: str, spec: ChannelSpec, seq: int) -> tuple[str, str, str, list[str] | None]:
    """(sender, event type, event_data JSON, audience) of the post the channel stamps ``seq``."""
    parts = spec.participants
    turn = seq - 1
    sender = parts[turn % len(parts)]
    text = f"message number {seq} of a long conversation"
    if kind == "workflow":
        data: dict[str, Any] = {"routing": {"tool_called": None}, "body": text}
        if turn % 10 == 9:
            data["context_updates"] = {"set": {"stage": f"step {turn}"}}
        return sender, "ag2.packet", json.dumps(data, separators=(",", ":")), None
    audience = [parts[(turn + 1) % len(parts)]] if kind == "discussion" and turn % 7 == 6 else None
    return sender, "ag2.msg.text", json.dumps({"text": text}, separators=(",", ":")), audience


async def build(path: Path, envelopes: int, types: Sequence[str] = CONVERSATION) -> None:
    """A WAL of ``envelopes`` envelopes in live channels of ``types`` (taken in turn), up to PER_CHANNEL each."""
    store = SqliteHubStore(path)
    await store.open()
    agents = [(new_id(), name) for name in ("alice", "bob", "carol")]
    rows_a = []
    for agent_id, name in agents:
        record = identity_pb2.AgentRecord(agent_id=agent_id, passport=identity_pb2.Passport(name=name, kind=1))
        rows_a.append(AgentRow(agent_id, name, "x", record.SerializeToString()))
    await store.commit(Writes(agents=rows_a))
    now = time.time()
    created = iso_z(now)
    written = 0
    index = 0
    while written < envelopes:
        kind = types[index % len(types)]
        index += 1
        cid = new_id()
        members = agents[: _MEMBERS[kind]]
        spec = ChannelSpec(
            channel_id=cid,
            type=kind,
            initiator=members[0][0],
            participants=tuple(a for a, _ in members),
            names=dict(members),
            knobs=_KNOBS.get(kind, {}),
        )
        knobs = get_adapter(kind).validate_create(spec)
        meta = channel_pb2.ChannelMetadata(
            channel_id=cid,
            type=kind,
            state=channel_pb2.CHANNEL_STATE_OPENED,
            knobs_json=json.dumps(knobs, separators=(",", ":")),
        )
        for i, (agent_id, name) in enumerate(members):
            role = channel_pb2.PARTICIPANT_ROLE_INITIATOR if i == 0 else channel_pb2.PARTICIPANT_ROLE_TARGET
            meta.participants.add(agent_id=agent_id, name=name, role=role, acked=True)
        meta.created_at.CopyFrom(to_timestamp(now))
        targets = spec.participants[1:]
        posts: list[tuple[str, str, str, list[str] | None]] = [
            *(("hub", "ag2.channel.invite", "{}", [t]) for t in targets),
            *((t, "ag2.channel.invite_ack", "{}", None) for t in targets),
            ("hub", "ag2.channel.opened", "{}", None),
        ]
        # A consulting channel ends with its reply: a live one holds the question at most.
        limit = min(len(posts) + 1 if kind == "consulting" else PER_CHANNEL, envelopes - written)
        while len(posts) < limit:
            posts.append(_traffic(kind, spec, len(posts) + 1))
        rows = []
        for seq, (sender, etype, data, audience) in enumerate(posts[:limit], 1):
            env = envelope_pb2.Envelope(
                channel_id=cid,
                sender_id=sender,
                event_type=etype,
                event_data_json=data,
                envelope_id=new_id(),
                created_at=created,
                seq=seq,
                priority=envelope_pb2.PRIORITY_NORMAL,
            )
            if audience is not None:
                env.audience.agent_ids.extend(audience)
            rows.append(WalRow(cid, seq, env.envelope_id, sender, etype, None, None, created, env.SerializeToString()))
        meta.last_seq = len(rows)
        written += len(rows)
        await store.commit(Writes(wal=rows, channels=[ChannelRow(cid, True, meta.SerializeToString())]))
    await store.close()


async def measure(path: Path) -> dict[str, Any]:
    """Open a hub on the database and time its hydrate."""
    core = HubCore(SqliteHubStore(path))
    await core.store.open()
    await core.registry.load()
    t0 = time.perf_counter()
    folded = await core.hydrate()
    seconds = time.perf_counter() - t0
    await core.store.close()
    return {"envelopes": folded, "seconds": seconds, "rate": folded / seconds if seconds else 0.0}
