"""One connection's outbound frames, bounded in bytes.

Everything the gateway sends a client (responses, notifies, errors) waits here until the WebSocket
writer takes it. ``put`` waits while more than ``limit`` bytes are queued, so a client that stops
reading stops its hub Connect streams from being read (the hub then holds, and eventually ends,
those streams under its own per-stream byte budget; nothing is lost: undelivered envelopes are not
acked and are replayed on the next attach). A single frame larger than the limit still goes out,
alone.
"""

from __future__ import annotations

import asyncio
from collections import deque


class Outbox:
    """A FIFO of encoded frames holding at most ``limit`` bytes (one oversized frame at a time)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._frames: deque[bytes] = deque()
        self._bytes = 0
        self._changed = asyncio.Condition()
        self._closed = False

    @property
    def queued_bytes(self) -> int:
        """Bytes waiting to be written."""
        return self._bytes

    async def put(self, frame: bytes) -> None:
        """Queue ``frame``, waiting while the queue is over its limit (dropped once closed)."""
        async with self._changed:
            await self._changed.wait_for(
                lambda: self._closed or self._bytes == 0 or self._bytes + len(frame) <= self.limit
            )
            if self._closed:
                return
            self._frames.append(frame)
            self._bytes += len(frame)
            self._changed.notify_all()

    async def get(self) -> bytes | None:
        """The next frame (None once closed)."""
        async with self._changed:
            await self._changed.wait_for(lambda: self._closed or bool(self._frames))
            if not self._frames:
                return None
            frame = self._frames.popleft()
            self._bytes -= len(frame)
            self._changed.notify_all()
            return frame

    async def close(self) -> None:
        """Stop: waiting puts and gets return."""
        async with self._changed:
            self._closed = True
            self._frames.clear()
            self._bytes = 0
            self._changed.notify_all()
