"""One connection's outbound frames, bounded in bytes, and their writer.

Everything the gateway sends a client (responses, notifies, errors) goes through here. A frame put
while nothing is queued or being written goes to the WebSocket at once, in the caller's turn
(no hand-over to the writer task: one event-loop turn less per notify and per response); the rest
queue, in order, for :meth:`Outbox.run`, the connection's writer task. ``put`` waits while more than
``limit`` bytes are queued, or while its own frame waits for the client to read (the WebSocket's
write buffer is full), so a client that stops reading stops its hub Connect streams from being read
(the hub then holds, and eventually ends, those streams under its own per-stream byte budget;
nothing is lost: undelivered envelopes are not acked and are replayed on the next attach). A single
frame larger than the limit still goes out, alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable

from websockets.exceptions import ConnectionClosed

log = logging.getLogger(__name__)

Send = Callable[[bytes], Awaitable[None]]
"""Writes one frame to the client (waits while its write buffer is full); raises once it is closed."""
SendNow = Callable[[bytes], bool]
"""Writes one frame to the client without waiting, if it can (False: it cannot now, :data:`Send` it)."""


class Outbox:
    """A FIFO of encoded frames holding at most ``limit`` bytes (one oversized frame at a time),
    written by ``send`` (None: only :meth:`get` takes them, as in tests), or by ``send_now`` when that can
    write a frame at once (the common case: no coroutine to run per frame)."""

    def __init__(self, limit: int, send: Send | None = None, send_now: SendNow | None = None) -> None:
        self.limit = limit
        self._send = send
        self._send_now = send_now
        self._frames: deque[bytes] = deque()
        self._bytes = 0
        self._writing = False
        """A frame is being written (by a ``put`` at once, or by :meth:`run`): the next ones queue."""
        self._getter: asyncio.Future[None] | None = None
        self._putters: deque[asyncio.Future[None]] = deque()
        self._closed = False

    @property
    def queued_bytes(self) -> int:
        """Bytes waiting to be written."""
        return self._bytes

    @property
    def closed(self) -> bool:
        """Closed: frames put now are dropped."""
        return self._closed

    def put_now(self, frame: bytes) -> bool:
        """Write ``frame`` at once if nothing is ahead of it and the socket takes it without waiting
        (True; also once closed: dropped); False: nothing was done, :meth:`put` it."""
        if self._closed:
            return True
        if self._send_now is None or self._writing or self._frames:
            return False
        return self._send_now(frame)

    async def put(self, frame: bytes) -> None:
        """Send ``frame`` now if nothing is ahead of it, else queue it, waiting while the queue is over
        its limit (dropped once closed)."""
        if self._closed:
            return
        if self._send is not None and not self._writing and not self._frames:
            if self._send_now is None or not self._send_now(frame):
                await self._write(frame)
            return
        while self._bytes and self._bytes + len(frame) > self.limit:
            waiter = asyncio.get_running_loop().create_future()
            self._putters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._putters:
                    self._putters.remove(waiter)
            if self._closed:
                return
        self._frames.append(frame)
        self._bytes += len(frame)
        self._wake_getter()

    async def get(self) -> bytes | None:
        """The next queued frame, once no frame is being written (None once closed)."""
        while not self._frames or self._writing:
            if self._closed:
                return None
            self._getter = asyncio.get_running_loop().create_future()
            try:
                await self._getter
            finally:
                self._getter = None
        if self._closed:
            return None
        frame = self._frames.popleft()
        self._bytes -= len(frame)
        self._wake_putters()
        return frame

    async def run(self) -> None:
        """Write the queued frames until the outbox is closed, or writing fails (then it closes)."""
        try:
            while (frame := await self.get()) is not None:
                if self._send_now is None or not self._send_now(frame):
                    await self._write(frame)
        finally:
            # Nothing will drain the outbox any more: release ops and deliveries waiting to queue into it,
            # so the connection's read loop (which may wait for a free op slot) ends and cleans up.
            self.close()

    async def _write(self, frame: bytes) -> None:
        assert self._send is not None
        self._writing = True
        try:
            await self._send(frame)
        except ConnectionClosed:  # the client is gone: nothing more will be written
            self.close()
        except Exception:
            log.exception("writing to the client failed; closing its outbox")
            self.close()
        finally:
            self._writing = False
            if self._frames:
                self._wake_getter()

    def _wake_getter(self) -> None:
        if self._getter is not None and not self._getter.done():
            self._getter.set_result(None)

    def _wake_putters(self) -> None:
        for waiter in self._putters:
            if not waiter.done():
                waiter.set_result(None)

    def close(self) -> None:
        """Stop: queued frames are dropped, waiting puts and gets return."""
        self._closed = True
        self._frames.clear()
        self._bytes = 0
        self._wake_getter()
        self._wake_putters()
