"""Builds a large hub database directly through the storage layer and times hydrate."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from agentnet.v1 import channel_pb2, envelope_pb2, identity_pb2

from hubsvc.core.hub import HubCore
from hubsvc.core.util import iso_z, new_id, to_timestamp
from hubsvc.storage import AgentRow, ChannelRow, SqliteHubStore, WalRow, Writes

PER_CHANNEL = 1000


async def build(path: Path, envelopes: int) -> None:
    """A WAL of ``envelopes`` EV_TEXT envelopes in live conversation channels of two agents."""
    store = SqliteHubStore(path)
    await store.open()
    a, b = new_id(), new_id()
    agents = []
    for agent_id, name in ((a, "alice"), (b, "bob")):
        record = identity_pb2.AgentRecord(agent_id=agent_id, passport=identity_pb2.Passport(name=name, kind=1))
        agents.append(AgentRow(agent_id, name, "x", record.SerializeToString()))
    await store.commit(Writes(agents=agents))
    now = time.time()
    created = iso_z(now)
    channels = (envelopes + PER_CHANNEL - 1) // PER_CHANNEL
    written = 0
    for _ in range(channels):
        cid = new_id()
        meta = channel_pb2.ChannelMetadata(channel_id=cid, type="conversation", state=channel_pb2.CHANNEL_STATE_OPENED)
        meta.participants.add(agent_id=a, name="alice", role=channel_pb2.PARTICIPANT_ROLE_INITIATOR, acked=True)
        meta.participants.add(agent_id=b, name="bob", role=channel_pb2.PARTICIPANT_ROLE_TARGET, acked=True)
        meta.created_at.CopyFrom(to_timestamp(now))
        rows = []
        lifecycle = [
            ("hub", "ag2.channel.invite", [b]),
            (b, "ag2.channel.invite_ack", None),
            ("hub", "ag2.channel.opened", None),
        ]
        n = min(PER_CHANNEL, envelopes - written)
        for seq in range(1, n + 1):
            if seq <= len(lifecycle):
                sender, etype, audience = lifecycle[seq - 1]
                data = "{}"
            else:
                sender, etype, audience = (a if seq % 2 else b), "ag2.msg.text", None
                data = f'{{"text":"message number {seq} of a long conversation"}}'
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
        meta.last_seq = n
        written += n
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
