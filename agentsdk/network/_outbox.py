"""The writing side of a ``Connect`` stream: its outbox, with queued posts packed into PostBatch frames.

A client queues its frames (posts, acks, pings) on one :class:`asyncio.Queue`; :class:`Outbox`
hands them to the stream in the same order, except that Post frames queued back to back when the
stream is ready to write go out as one ``post_batch`` frame (at most ``limit`` posts, the hub's
``Welcome.max_post_batch``). It never waits to fill a batch: a post alone goes as a single Post,
and a hub that answered ``max_post_batch`` 0 (older than the field) only ever gets single Posts.
Frames of other kinds are never reordered against posts: an ack between two posts ends the batch.
A batch also holds at most :data:`MAX_BATCH_BYTES` of posts (a larger first post goes alone), so
many large posts queued at once never make a frame over the hub's gRPC message limit (16 MiB by
default), which would end the whole stream instead of refusing one post.

With :attr:`Outbox.carry` set (the hub reads acks in a PostBatch, ``Welcome.post_batch_ack``),
the acks pending when posts are written ride in their frame: a PostBatch, even of one post,
with ``ack`` set (:mod:`agentsdk.network._acks`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from agentnet.v1 import connect_pb2, envelope_pb2

from netkernel.errors import error_from_reason

Frame = connect_pb2.ConnectRequest

MAX_BATCH_BYTES = 4 * 1024 * 1024
"""Most bytes of posts packed into one PostBatch frame (its first post goes whatever its size)."""


class Outbox:
    """Frames to write on one Connect stream; ``None`` in the queue ends the stream."""

    def __init__(self, queue: asyncio.Queue[Frame | None] | None = None) -> None:
        self.queue: asyncio.Queue[Frame | None] = queue if queue is not None else asyncio.Queue()
        self.limit = 0
        """Most posts per PostBatch frame (set from Welcome.max_post_batch; 0 or 1 = single Posts only)."""
        self.carry: Callable[[], connect_pb2.Ack | None] | None = None
        """Where the acks pending when posts are written come from, to ride in their PostBatch
        (None: acks go only in their own frames)."""
        self._held: list[Frame | None] = []
        """The item taken from the queue that ended a batch (written next)."""

    def put(self, frame: Frame | None) -> None:
        """Queue ``frame`` (None: end the stream once everything before it is written)."""
        self.queue.put_nowait(frame)

    async def next(self) -> Frame | None:
        """The next frame to write (queued posts packed), or None at the end."""
        item = self._held.pop() if self._held else await self.queue.get()
        if item is None or item.WhichOneof("frame") != "post":
            return item
        ack = self.carry() if self.carry is not None and self.limit > 0 else None
        if ack is None and (self.limit <= 1 or self.queue.empty()):
            return item
        return self.pack(item, ack)

    def pack(self, first: Frame, ack: connect_pb2.Ack | None = None) -> Frame:
        """``first`` (a Post frame) and the Post frames queued right behind it, as one frame, with
        ``ack`` riding in it if given."""
        posts = [first.post]
        size = first.post.ByteSize()
        queue = self.queue
        while len(posts) < self.limit and not queue.empty():
            item = queue.get_nowait()
            if item is None or item.WhichOneof("frame") != "post":
                self._held.append(item)
                break
            size += item.post.ByteSize()
            if size > MAX_BATCH_BYTES:  # it starts the next frame
                self._held.append(item)
                break
            posts.append(item.post)
        if len(posts) == 1 and ack is None:
            return first
        frame = Frame()  # filled in place: PostBatch(posts=...) inside Frame(post_batch=...) copies each post twice
        batch = frame.post_batch
        batch.posts.extend(posts)
        if ack is not None:
            batch.ack.CopyFrom(ack)
        return frame

    async def frames(self) -> AsyncIterator[Frame]:
        """The frames to write, until None is queued (the request iterator of a Connect call)."""
        while (frame := await self.next()) is not None:
            yield frame


def posted_envelope(result: connect_pb2.PostResult) -> envelope_pb2.Envelope:
    """The envelope a post's ``PostResult`` says the hub committed; the hub's domain error when it
    refused the post."""
    if result.WhichOneof("result") == "error":
        e = result.error
        raise error_from_reason(e.reason, e.message, dict(e.metadata), code=e.code)
    return result.envelope
