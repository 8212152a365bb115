"""kill -9 of the hub under a steady stream of posts loses and duplicates nothing."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import pytest
from agentnet.v1 import hub_pb2

from hubsvc.adapters import get_adapter
from hubsvc.adapters.base import ChannelSpec
from netkernel.wire import envelope_from_wire
from tests.hubsvc.harness import EV_TEXT, Participant, collect, conversation, make_envelope
from tests.procs import ROOT, start_service

pytestmark = pytest.mark.slow


async def test_sigkill_under_load_loses_no_acknowledged_envelope(tmp_path: Path) -> None:
    db = tmp_path / "hub.db"
    hub = start_service("hubsvc", ["--db", str(db), "--data-dir", str(tmp_path)], cwd=ROOT)
    alice, bob, cid = await conversation(hub.target)

    acknowledged: dict[str, int] = {}
    stop = asyncio.Event()
    enough = asyncio.Event()

    async def writer(n: int) -> None:
        i = 0
        while not stop.is_set():
            try:
                wire = await alice.say(cid, f"w{n}-{i}")
            except Exception:
                return  # the hub died mid-post: that post was never acknowledged
            acknowledged[wire.envelope_id] = wire.seq
            if len(acknowledged) >= 400:
                enough.set()
            i += 1

    writers = [asyncio.create_task(writer(n)) for n in range(8)]
    bob_seen: dict[int, str] = {}

    async def reader() -> None:
        while True:
            env = await bob.next_of("ag2.msg.text", timeout=30)
            bob_seen[env.seq] = env.envelope_id

    reading = asyncio.create_task(reader())
    await asyncio.wait_for(enough.wait(), 60)
    hub.terminate(signal.SIGKILL)
    stop.set()
    await asyncio.gather(*writers, return_exceptions=True)
    reading.cancel()
    await asyncio.gather(reading, return_exceptions=True)
    for p in (alice, bob):
        await p.close()

    restarted = start_service("hubsvc", ["--db", str(db), "--data-dir", str(tmp_path)], cwd=ROOT)
    try:
        alice2 = Participant(restarted.target, alice.record, alice.credential)
        bob2 = Participant(restarted.target, bob.record, bob.credential)
        # bob sees every envelope of this channel (the invite was addressed to him).
        wal = [
            item.envelope
            for item in await collect(bob2.stub.ReadWal(hub_pb2.ReadWalRequest(channel_id=cid), metadata=bob2.metadata))
        ]
        ids = [w.envelope_id for w in wal]
        assert len(ids) == len(set(ids)), "an envelope was duplicated in the WAL"
        assert [w.seq for w in wal] == list(range(1, len(wal) + 1)), "seqs must stay contiguous"
        by_id = {w.envelope_id: w.seq for w in wal}
        missing = [eid for eid in acknowledged if eid not in by_id]
        assert not missing, f"{len(missing)} acknowledged envelopes lost"
        assert all(by_id[eid] == seq for eid, seq in acknowledged.items())

        # Channel state after hydrate equals a fresh fold of the surviving WAL.
        desc = await alice2.rpc("DescribeChannel", hub_pb2.DescribeChannelRequest(channel_id=cid))
        meta = desc.channel
        spec = ChannelSpec(
            channel_id=cid,
            type=meta.type,
            initiator=meta.participants[0].agent_id,
            participants=tuple(p.agent_id for p in meta.participants),
            names={p.agent_id: p.name for p in meta.participants},
            knobs=json.loads(meta.knobs_json or "{}"),
        )
        adapter = get_adapter(meta.type)
        state = adapter.initial_state(spec)
        for w in wal:
            state = adapter.fold(spec, state, envelope_from_wire(w))
        assert json.loads(desc.adapter_state_json) == adapter.state_json(state)
        assert meta.last_seq == len(wal)

        # bob resumes from what it processed: every envelope it had not processed arrives, once.
        processed = 0
        while processed + 1 in bob_seen or (processed + 1 <= len(wal) and wal[processed].event_type != "ag2.msg.text"):
            processed += 1
        await bob2.connect(cursors={cid: processed})
        texts_after = sum(1 for w in wal if w.seq > processed and w.event_type == "ag2.msg.text")
        got = [await bob2.next_of("ag2.msg.text", timeout=15) for _ in range(texts_after)]
        assert [g.seq for g in got] == [w.seq for w in wal if w.seq > processed and w.event_type == "ag2.msg.text"]
        marker = await alice2.rpc(
            "PostEnvelope", hub_pb2.PostEnvelopeRequest(envelope=make_envelope(cid, "myapp.marker"))
        )  # delivered after any repeat would be
        repeats = [e for e in await bob2.until(marker.envelope.envelope_id, timeout=15) if e.event_type == EV_TEXT]
        assert repeats == []
        for p in (alice2, bob2):
            await p.close()
    finally:
        assert restarted.terminate(signal.SIGTERM) == 0
