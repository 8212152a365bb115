"""Inbound messages are handled in the turn they are read, and in the order they were sent: one that has
to wait holds back the ones after it (and, past a backlog, the reading of its socket)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import orjson
from websockets.asyncio.client import connect

from ag2gateway.connection import MAX_BACKLOG, Connection
from ag2gateway.outbox import Outbox
from tests.ag2gateway.conftest import Net
from tests.eventually import assert_eventually

PING = json.dumps({"kind": "ping"})


async def test_a_message_in_fragments_or_in_a_binary_frame_is_read_whole(net: Net) -> None:
    async with connect(net.gateway.url) as ws:
        await ws.send(iter(['{"kind":', ' "ping"}']))  # two frames: a text frame and its continuation
        assert json.loads(await ws.recv()) == {"kind": "pong"}
        await ws.send(PING.encode())  # a binary frame
        assert json.loads(await ws.recv()) == {"kind": "pong"}


async def test_messages_sent_behind_one_that_waits_are_answered_after_it_in_order(net: Net) -> None:
    hello = {"kind": "hello", "name": "nobody-here", "auth_scheme": "api_key", "auth_claim": {"token": "t" * 20}}
    async with connect(net.gateway.url) as ws:
        # The hello waits for the hub; the frames behind it are read meanwhile and must not overtake it.
        await ws.send(json.dumps(hello))
        for _ in range(3):
            await ws.send(PING)
        await ws.send("not json")
        answers = [json.loads(await asyncio.wait_for(ws.recv(), 10)) for _ in range(5)]
    assert answers[0]["kind"] == "error" and answers[0]["code"] in ("not_found", "auth_failed")
    assert answers[1:4] == [{"kind": "pong"}] * 3
    assert answers[4]["kind"] == "error" and answers[4]["code"] == "protocol_error"


async def test_a_backlog_stops_reading_the_socket_until_it_drains() -> None:
    sent: list[bytes] = []
    reading = asyncio.Event()  # the client does not read: the first pong's write waits

    async def send(frame: bytes) -> None:
        await reading.wait()
        sent.append(frame)

    def send_now(frame: bytes) -> bool:
        if reading.is_set():
            sent.append(frame)
        return reading.is_set()

    calls: list[str] = []
    box = Outbox(64, send, send_now)
    writer = asyncio.create_task(box.run())
    hub: Any = None
    conn = Connection(
        hub,
        hub,
        box,
        max_in_flight_requests=4,
        pause=lambda: calls.append("pause"),
        resume=lambda: calls.append("resume"),
    )
    try:
        for i in range(MAX_BACKLOG + 3):
            conn.feed(orjson.dumps({"kind": "ping", "n": i}))
        assert calls == ["pause"]  # the first pong waits for its write; 16 more waiting behind it
        reading.set()
        await assert_eventually(lambda: len(sent) == MAX_BACKLOG + 3)
        assert calls == ["pause", "resume"]
        assert all(json.loads(frame) == {"kind": "pong"} for frame in sent)
        conn.feed(PING.encode())  # nothing waits any more: handled as read
        assert len(sent) == MAX_BACKLOG + 4
    finally:
        box.close()
        await writer


class _Transport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(data)


async def test_frames_sent_while_held_go_to_the_socket_in_one_write() -> None:
    from websockets.frames import Frame
    from websockets.protocol import Protocol, Side, State

    from ag2gateway.server import _Writer

    ws: Any = type("Ws", (), {})()
    ws.protocol = Protocol(Side.SERVER, state=State.OPEN)
    ws.transport, ws.paused, ws.send_in_progress = _Transport(), False, None
    writer = _Writer(ws)
    assert writer.send_now(b'{"n":1}')
    assert len(ws.transport.writes) == 1  # nothing held: written at once
    writer.hold()
    assert writer.send_now(b'{"n":2}') and writer.send_now(b'{"n":3}')
    assert len(ws.transport.writes) == 1
    writer.release()
    assert len(ws.transport.writes) == 2  # both frames, one write
    reader = Protocol(Side.CLIENT, state=State.OPEN)
    reader.receive_data(b"".join(ws.transport.writes))
    frames = [f for f in reader.events_received() if isinstance(f, Frame)]
    assert [bytes(f.data) for f in frames] == [b'{"n":1}', b'{"n":2}', b'{"n":3}']
    ws.paused = True  # the write buffer is full: the caller sends it by ws.send, which waits
    assert not writer.send_now(b'{"n":4}')


async def test_a_create_channel_beyond_the_opening_limit_is_refused_at_once() -> None:
    sent: list[bytes] = []

    async def send(frame: bytes) -> None:
        sent.append(frame)

    def send_now(frame: bytes) -> bool:
        sent.append(frame)
        return True

    box = Outbox(1 << 20, send, send_now)
    hub: Any = None  # refused before any hub call
    conn = Connection(hub, hub, box, max_in_flight_requests=4, max_opening=0)
    request = {"kind": "request", "request_id": "r1", "op": "create_channel", "params": {"creator_id": "x"}}
    conn.feed(orjson.dumps(request))
    [answer] = [json.loads(frame) for frame in sent]
    assert (answer["request_id"], answer["ok"], answer["error_code"]) == ("r1", False, "protocol_error")
    assert "0 channels are already being opened on this connection" in answer["error_message"]
    box.close()
