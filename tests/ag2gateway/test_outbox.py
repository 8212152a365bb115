"""A connection's outbound frames: written at once when nothing is ahead of them, else queued in order
for the writer; a client that does not read holds them back; a client gone closes the outbox."""

from __future__ import annotations

import asyncio

from websockets.exceptions import ConnectionClosedError

from ag2gateway.outbox import Outbox
from tests.eventually import assert_eventually


class Client:
    """What a WebSocket does with the frames: keeps them, or holds them while it is not reading."""

    def __init__(self) -> None:
        self.read: list[bytes] = []
        self.reading = asyncio.Event()
        self.reading.set()
        self.gone = False

    async def send(self, frame: bytes) -> None:
        if self.gone:
            raise ConnectionClosedError(None, None)
        await self.reading.wait()
        self.read.append(frame)


async def test_a_frame_with_nothing_ahead_of_it_is_written_in_the_callers_turn() -> None:
    client = Client()
    box = Outbox(100, client.send)
    writer = asyncio.create_task(box.run())
    try:
        await box.put(b"a")
        assert client.read == [b"a"]  # no hand-over to the writer task
        await box.put(b"b")
        assert client.read == [b"a", b"b"] and box.queued_bytes == 0
    finally:
        box.close()
        await writer


async def test_frames_put_while_one_is_being_written_queue_and_go_in_order() -> None:
    client = Client()
    client.reading.clear()  # the client does not read: the write of the first frame waits
    box = Outbox(4, client.send)
    writer = asyncio.create_task(box.run())
    try:
        first = asyncio.create_task(box.put(b"1"))
        await asyncio.sleep(0)
        assert not first.done()  # its caller waits with it, as it would for a full queue
        await box.put(b"22")
        await box.put(b"33")  # 2 + 2 bytes queued: at the limit
        fourth = asyncio.create_task(box.put(b"4"))
        await asyncio.sleep(0)
        assert not fourth.done() and box.queued_bytes == 4
        client.reading.set()
        await first
        await fourth
        await assert_eventually(lambda: client.read == [b"1", b"22", b"33", b"4"])
        assert box.queued_bytes == 0
    finally:
        box.close()
        await writer


async def test_a_client_gone_closes_the_outbox_and_releases_its_writers() -> None:
    client = Client()
    box = Outbox(100, client.send)
    writer = asyncio.create_task(box.run())
    await box.put(b"a")
    client.gone = True
    await box.put(b"b")  # the write fails: the outbox closes, nothing raises to the caller
    assert box.closed
    await asyncio.wait_for(writer, 5)  # the writer task ends with it
    await box.put(b"c")  # dropped
    assert client.read == [b"a"] and box.queued_bytes == 0


async def test_a_frame_the_socket_takes_at_once_is_written_without_waiting_else_by_send() -> None:
    client = Client()
    taken: list[bytes] = []
    can = True

    def send_now(frame: bytes) -> bool:
        if can:
            taken.append(frame)
        return can

    box = Outbox(100, client.send, send_now)
    writer = asyncio.create_task(box.run())
    try:
        await box.put(b"a")
        assert taken == [b"a"] and client.read == []
        can = False  # e.g. the socket's write buffer is full: the frame goes by send, which waits for it
        await box.put(b"b")
        assert taken == [b"a"] and client.read == [b"b"]
    finally:
        box.close()
        await writer
