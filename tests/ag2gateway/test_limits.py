"""Every buffer a client can fill is bounded: inbound frame size, outbound bytes queued per connection."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

from ag2gateway.outbox import Outbox
from ag2gateway.server import start_gateway
from tests.ag2gateway.conftest import Net


async def test_a_frame_over_the_limit_closes_the_connection_with_1009(net: Net) -> None:
    small = await start_gateway(replace(net.options, max_frame_bytes=4096), net.hub_channel)
    try:
        await net.ag2("url", url=small.url)
        ping = json.dumps({"kind": "ping"})
        answers = await net.ag2("raw", frames=[ping, json.dumps({"kind": "ping", "pad": "x" * 8192}), ping])
        assert answers == [{"kind": "pong"}, {"closed": 1009}]  # "message too big"; nothing after it is read
    finally:
        await small.stop()


async def test_the_outbox_holds_at_most_its_limit_in_bytes() -> None:
    box = Outbox(limit=10)
    await box.put(b"12345678")
    blocked = asyncio.create_task(box.put(b"abcdef"))  # 8 + 6 > 10: waits for the writer
    await asyncio.sleep(0)
    assert not blocked.done() and box.queued_bytes == 8
    assert await box.get() == b"12345678"
    await blocked
    assert box.queued_bytes == 6
    big = asyncio.create_task(box.put(b"y" * 50))  # larger than the limit: goes alone, once the box is empty
    await asyncio.sleep(0)
    assert not big.done()
    assert await box.get() == b"abcdef"
    await big
    assert box.queued_bytes == 50


async def _extensions(url: str) -> list[str]:
    """The WebSocket extensions the gateway agreed to with a client that offers per-message deflate."""
    from websockets.asyncio.client import connect

    async with connect(url, compression="deflate") as ws:
        await ws.send(json.dumps({"kind": "ping"}))
        assert json.loads(await ws.recv()) == {"kind": "pong"}
        return [extension.name for extension in ws.protocol.extensions]


async def test_per_message_deflate_is_declined_unless_turned_on(net: Net) -> None:
    """A client's deflate offer (AG2's WsLink makes it) is declined by default; --ws-compression accepts it."""
    assert await _extensions(net.gateway.url) == []
    compressing = await start_gateway(replace(net.options, ws_compression=True), net.hub_channel)
    try:
        assert await _extensions(compressing.url) == ["permessage-deflate"]
    finally:
        await compressing.stop()
