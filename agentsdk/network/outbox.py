"""The writing side of a ``Connect`` stream: its outbox, with queued posts packed into PostBatch frames.

A client queues its frames (posts, acks, pings) on one :class:`asyncio.Queue`; :class:`Outbox`
hands them to the stream in the same order, except that Post frames queued back to back when the
stream is ready to write go out as one ``post_batch`` frame (at most ``limit`` posts, the hub's
``Welcome.max_post_batch``). It never waits to fill a batch: a post alone goes as a single Post,
and a hub that answered ``max_post_batch`` 0 (older than the field) only ever gets single Posts.
Frames of other kinds are never reordered against posts: an ack between two posts ends the batch.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from agentnet.v1 import connect_pb2

Frame = connect_pb2.ConnectRequest


class Outbox:
    """Frames to write on one Connect stream; ``None`` in the queue ends the stream."""

    def __init__(self, queue: asyncio.Queue[Frame | None] | None = None) -> None:
        self.queue: asyncio.Queue[Frame | None] = queue if queue is not None else asyncio.Queue()
        self.limit = 0
        """Most posts per PostBatch frame (set from Welcome.max_post_batch; 0 or 1 = single Posts only)."""
        self._held: list[Frame | None] = []
        """The item taken from the queue that ended a batch (written next)."""

    def put(self, frame: Frame | None) -> None:
        """Queue ``frame`` (None: end the stream once everything before it is written)."""
        self.queue.put_nowait(frame)

    async def next(self) -> Frame | None:
        """The next frame to write (queued posts packed), or None at the end."""
        item = self._held.pop() if self._held else await self.queue.get()
        if item is None or self.limit <= 1 or item.WhichOneof("frame") != "post" or self.queue.empty():
            return item
        return self.pack(item)

    def pack(self, first: Frame) -> Frame:
        """``first`` (a Post frame) and the Post frames queued right behind it, as one frame."""
        posts = [first.post]
        queue = self.queue
        while len(posts) < self.limit and not queue.empty():
            item = queue.get_nowait()
            if item is None or item.WhichOneof("frame") != "post":
                self._held.append(item)
                break
            posts.append(item.post)
        if len(posts) == 1:
            return first
        return Frame(post_batch=connect_pb2.PostBatch(posts=posts))

    async def frames(self) -> AsyncIterator[Frame]:
        """The frames to write, until None is queued (the request iterator of a Connect call)."""
        while (frame := await self.next()) is not None:
            yield frame
