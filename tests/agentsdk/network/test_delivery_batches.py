"""The SDK's receive path with batched frames: a backlog arrives in batches, is handled in
order, and the acks of what was processed together go out in one Ack frame."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agentnet.v1 import connect_pb2, envelope_pb2

from agentsdk.network._acks import MAX_ENTRIES_PER_FRAME, AckCoalescer
from agentsdk.network._delivery import DeliveryStream
from agentsdk.transport import HubConnection
from tests.eventually import assert_eventually
from tests.hubsvc.harness import conversation, data_of, running_hub


async def test_acks_of_one_turn_go_out_in_one_frame() -> None:
    sent: list[connect_pb2.Ack] = []
    acks = AckCoalescer(sent.append)
    for seq in (1, 2, 3):
        acks.add("c1", seq)
    acks.add("c2", 9)
    assert sent == []  # held until the end of the turn, no longer
    await asyncio.sleep(0)
    assert [[(e.channel_id, e.seq) for e in a.entries] for a in sent] == [[("c1", 1), ("c1", 2), ("c1", 3), ("c2", 9)]]
    acks.add("c1", 4)
    await asyncio.sleep(0)
    assert len(sent) == 2 and [e.seq for e in sent[1].entries] == [4]
    for seq in range(MAX_ENTRIES_PER_FRAME + 1):
        acks.add("c3", seq)
    await asyncio.sleep(0)
    assert [len(a.entries) for a in sent[2:]] == [MAX_ENTRIES_PER_FRAME, 1]


async def test_a_backlog_in_batches_is_handled_in_order_and_acked(tmp_path: Path) -> None:
    async with running_hub(tmp_path / "hub.db") as hub:
        alice, bob, cid = await conversation(hub.target)
        await bob.disconnect()
        sent = [await alice.say(cid, f"m{i}") for i in range(40)]
        got: list[envelope_pb2.Envelope] = []

        async def dispatch(env: envelope_pb2.Envelope, size: int) -> None:
            if env.seq % 3 == 0:
                await asyncio.sleep(0)  # some handlers suspend: acks then go out as processing ends
            got.append(env)

        conn = HubConnection(hub.target)
        stream = DeliveryStream(conn, bob.credential, dispatch, max_batch=16)
        try:
            await stream.start()
            await assert_eventually(lambda: any(e.envelope_id == sent[-1].envelope_id for e in got))
            texts = [data_of(e)["text"] for e in got if e.event_type == "ag2.msg.text"]
            assert texts == [f"m{i}" for i in range(40)]
            # every ack reached the hub: its cursor for bob passed the whole backlog
            await assert_eventually(lambda: hub.core.sessions._sessions[bob.agent_id].cursor(cid) == sent[-1].seq)
            assert stream.cursors.snapshot().get(cid) == sent[-1].seq
        finally:
            await stream.stop()
            await conn.close()
        await alice.close()
        await bob.close()
