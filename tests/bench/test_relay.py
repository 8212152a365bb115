"""The floor relay takes the frames bench clients send the hub: a BenchPeer packs its queued posts
into PostBatch frames because the relay's Welcome allows them, and every post is answered and
forwarded in order."""

from __future__ import annotations

import asyncio
import json

import grpc
from agentnet.v1 import envelope_pb2, hub_pb2_grpc

from bench.client import BenchPeer, text
from bench.relay import MAX_POST_BATCH, RelayServicer


async def test_posts_packed_for_the_relay_are_all_answered_and_forwarded_in_order() -> None:
    server = grpc.aio.server()
    hub_pb2_grpc.add_HubServiceServicer_to_server(RelayServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channels = [grpc.aio.insecure_channel(f"127.0.0.1:{port}") for _ in range(2)]
    sender, receiver = (BenchPeer(ch, name, max_batch=64) for ch, name in zip(channels, ("a", "b"), strict=True))
    try:
        await sender.connect(["c"])
        await receiver.connect(["c"])
        assert sender._out.limit == MAX_POST_BATCH
        got: list[envelope_pb2.Envelope] = []
        all_in = asyncio.Event()

        def on_delivery(env: envelope_pb2.Envelope) -> None:
            got.append(env)
            if len(got) == 300:
                all_in.set()

        receiver.on_delivery = on_delivery
        results = await asyncio.wait_for(
            asyncio.gather(*(sender.post_nowait(text("c", f"m{i}")) for i in range(300))), 10
        )
        assert [r.envelope.seq for r in results] == list(range(1, 301))
        await asyncio.wait_for(all_in.wait(), 10)
        assert [json.loads(e.event_data_json)["text"] for e in got] == [f"m{i}" for i in range(300)]
    finally:
        await sender.close()
        await receiver.close()
        for ch in channels:
            await ch.close()
        await server.stop(0)
