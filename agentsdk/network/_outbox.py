"""The writing side of a ``Connect`` stream: its outbox, with queued posts packed into PostBatch frames.

A client queues its frames (posts, acks, pings) in one :class:`Outbox`, which hands them to the
stream in the same order, except that posts queued back to back when the stream is ready to
write go out as one ``post_batch`` frame (at most ``limit`` posts, the hub's
``Welcome.max_post_batch``). It never waits to fill a batch: a post alone goes as a single Post,
and a hub that answered ``max_post_batch`` 0 (older than the field) only ever gets single Posts.
Frames of other kinds are never reordered against posts: an ack between two posts ends the batch.
A batch also holds at most :data:`MAX_BATCH_BYTES` of posts (a larger first post goes alone), so
many large posts queued at once never make a frame over the hub's gRPC message limit (16 MiB by
default), which would end the whole stream instead of refusing one post.

A post is queued either as a Post frame (:meth:`Outbox.put`) or as its request id and envelope
(:meth:`Outbox.post`): the envelope is then copied once, into the frame that is written, instead of
into a Post frame first and from there into the batch.

With :attr:`Outbox.carry` set (the hub reads acks in a PostBatch, ``Welcome.post_batch_ack``),
the acks pending when posts are written ride in their frame: a PostBatch, even of one post,
with ``ack`` set (:mod:`agentsdk.network._acks`).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeGuard

from agentnet.v1 import connect_pb2, envelope_pb2

from netkernel.errors import error_from_reason

Frame = connect_pb2.ConnectRequest

MAX_BATCH_BYTES = 4 * 1024 * 1024
"""Most bytes of posts packed into one PostBatch frame (its first post goes whatever its size)."""


_QueuedPost = tuple[str, envelope_pb2.Envelope]
"""A post queued by :meth:`Outbox.post`: its request id and its envelope (copied when written)."""
_Item = Frame | _QueuedPost | None


def _is_post(item: _Item) -> TypeGuard[Frame | _QueuedPost]:
    """Whether ``item`` is a post (queued by :meth:`Outbox.post`, or a Post frame)."""
    return isinstance(item, tuple) or (item is not None and item.WhichOneof("frame") == "post")


def _add_post(posts: Any, item: Frame | _QueuedPost) -> connect_pb2.Post:
    """Append the post ``item`` to the repeated field ``posts``; returns the appended Post."""
    post: connect_pb2.Post = posts.add()
    if isinstance(item, tuple):
        post.request_id = item[0]
        post.envelope.CopyFrom(item[1])
    else:
        post.CopyFrom(item.post)
    return post


def _single(post: Frame | _QueuedPost) -> Frame:
    """The post as a Post frame of its own."""
    if not isinstance(post, tuple):
        return post
    frame = Frame()
    single = frame.post
    single.request_id = post[0]
    single.envelope.CopyFrom(post[1])
    return frame


class Outbox:
    """Frames to write on one Connect stream; ``None`` queued ends the stream."""

    def __init__(self) -> None:
        self._items: deque[_Item] = deque()
        self._waiter: asyncio.Future[None] | None = None
        """Set while :meth:`next` waits for something to be queued."""
        self.limit = 0
        """Most posts per PostBatch frame (set from Welcome.max_post_batch; 0 or 1 = single Posts only)."""
        self.carry: Callable[[], connect_pb2.Ack | None] | None = None
        """Where the acks pending when posts are written come from, to ride in their PostBatch
        (None: acks go only in their own frames)."""

    def put(self, frame: Frame | None) -> None:
        """Queue ``frame`` (None: end the stream once everything before it is written)."""
        self._queue(frame)

    def post(self, request_id: str, envelope: envelope_pb2.Envelope) -> None:
        """Queue a post of ``envelope`` as request ``request_id``. The envelope is copied into the frame
        when it is written, so it must not change until then."""
        self._queue((request_id, envelope))

    def _queue(self, item: _Item) -> None:
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    async def next(self) -> Frame | None:
        """The next frame to write (queued posts packed), or None at the end."""
        items = self._items
        while not items:
            self._waiter = waiter = asyncio.get_running_loop().create_future()
            await waiter
        item = items.popleft()
        if item is None or (not isinstance(item, tuple) and item.WhichOneof("frame") != "post"):
            return item
        ack = self.carry() if self.carry is not None and self.limit > 0 else None
        if ack is None and (self.limit <= 1 or not items):
            return _single(item)
        return self.pack(item, ack)

    def pack(self, first: Frame | _QueuedPost, ack: connect_pb2.Ack | None = None) -> Frame:
        """The post ``first`` and the posts queued right behind it, as one frame (a PostBatch unless
        it is one post and no ``ack``), with ``ack`` riding in it if given."""
        frame = Frame()  # filled in place: PostBatch(posts=...) inside Frame(post_batch=...) copies each post twice
        batch = frame.post_batch
        posts = batch.posts
        size = _add_post(posts, first).ByteSize()
        count = 1
        items = self._items
        while count < self.limit and items and _is_post(items[0]):
            size += _add_post(posts, items[0]).ByteSize()
            if size > MAX_BATCH_BYTES:  # it starts the next frame
                del posts[-1]
                break
            items.popleft()
            count += 1
        if count == 1 and ack is None:
            return _single(first)
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
