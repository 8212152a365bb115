"""The SDK's delivery queues are bounded in bytes: a stream whose handlers fall behind stops
reading (backpressure) instead of queueing without end, drops nothing, and its handlers can
still post while it waits."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from agentnet.v1 import envelope_pb2

from agentsdk.network._delivery import DeliveryStream
from agentsdk.transport import HubConnection
from netkernel.errors import InvalidArgument
from tests.eventually import assert_eventually
from tests.hubsvc.harness import conversation, data_of, make_envelope, running_hub

BUDGET = 8 * 1024
TEXT = "y" * 1024


async def test_a_stream_behind_its_budget_stops_reading_and_drops_nothing(tmp_path: Path) -> None:
    async with running_hub(tmp_path / "hub.db") as hub:
        alice, bob, cid = await conversation(hub.target)
        await bob.disconnect()
        release = asyncio.Event()
        got: list[str] = []
        conn = HubConnection(hub.target, max_queued_delivery_bytes=BUDGET)
        stream: DeliveryStream

        async def dispatch(env: envelope_pb2.Envelope, size: int) -> None:
            if env.event_type != "ag2.msg.text":
                return
            await release.wait()
            text = data_of(env)["text"]
            # A reply from the handler while the stream may be paused: it must not wait on unread frames.
            await stream.post(make_envelope(cid, "ag2.msg.text", {"text": f"re {text[:4]}"}), timeout=10)
            got.append(text)

        stream = DeliveryStream(conn, bob.credential, dispatch)
        try:
            await stream.start()
            for i in range(40):
                await alice.say(cid, f"m{i:02d} {TEXT}")
            largest = max(len(f"m{i:02d} {TEXT}") for i in range(40)) + 512  # one delivery, framing included
            await assert_eventually(lambda: stream.paused)
            assert 0 < stream.queued_bytes <= BUDGET + largest
            release.set()
            await assert_eventually(lambda: len(got) == 40)
            assert [t[:3] for t in got] == [f"m{i:02d}" for i in range(40)]
            replies = [
                e
                for e in await hub.core.read_wal(alice.agent_id, cid)
                if e.sender_id == bob.agent_id and e.event_type == "ag2.msg.text"
            ]
            assert len(replies) == 40
            assert stream.queued_bytes == 0 and not stream.paused
        finally:
            await stream.stop()
            await conn.close()
        await alice.close()
        await bob.close()


def test_the_budget_must_be_positive() -> None:
    with pytest.raises(InvalidArgument, match="max_queued_delivery_bytes"):
        HubConnection("127.0.0.1:1", max_queued_delivery_bytes=0)
