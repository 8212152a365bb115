"""Sending what another replica holds to that replica (docs/scale-out.md "Channels divided among
the replicas").

With the channels divided among replicas, a post or a call that names a channel this replica does
not hold is refused inside the core with :class:`~netkernel.errors.PartitionMoved`; the servicer
then hands it here:

* **posts** (Connect frames, PostEnvelope, Say …) go to the holder through
  ``ReplicaService.ForwardPosts`` (:meth:`Forwarder.posts`), grouped by holder, in order;
* **any other unary call** is sent to the holder's ``HubService`` as it came, with the caller's
  own metadata (:meth:`Forwarder.call`): the holder authenticates the caller and answers
  exactly as if the client had called it, refusals included. The forwarded call carries
  ``x-agentnet-forwarded``: a replica that does not hold the channel either answers
  ``UNAVAILABLE`` (``partition_moved``) instead of forwarding again.

The holder is looked up in the lease map this replica reads each ownership round
(:class:`~hubsvc.core.placement.Placement`). While a partition moves (its old holder released it,
or died and its lease has not lapsed yet, and its new one has not taken it) the forward waits,
reading the map again, and one that reached a replica that no longer holds the channel, or none
at all, is sent again to the holder the map names then — until :meth:`Forwarder._deadline`.
"""

from __future__ import annotations

import asyncio
import functools
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from agentnet.v1 import connect_pb2
from google.protobuf import message_factory
from google.protobuf.descriptor import ServiceDescriptor

from hubsvc.core.placement import Placement, not_held
from hubsvc.replica_peers import REPLICA_KEY_HEADER, REPLICA_UNREACHABLE, ReplicaPeers
from netkernel.errors import PARTITION_MOVED, AgentNetError, Unavailable
from servicekit.boundary import error_detail

FORWARDED_HEADER = "x-agentnet-forwarded"
"""Metadata marking a call one replica forwarded to another (never forwarded again)."""
HOLDER_WAIT = 10.0
"""Seconds at least a forward keeps looking for the replica holding its channel (more with a long
``--replica-ttl``: twice it, plus two ownership rounds)."""
MAX_CALL_BYTES = 1024 * 1024
"""Bytes of posts one ForwardPosts call carries at most (a post larger than that goes alone): well
within the replicas' gRPC message limit."""
MAX_QUEUED_BYTES = 4 * 1024 * 1024
"""Bytes of one participant's posts into one channel that may wait to be forwarded; past it the
participant's stream is not read until they drain (gRPC's flow control holds the client back)."""
T = TypeVar("T")


Sink = Callable[[connect_pb2.PostResult], None]
"""Takes one forwarded post's result (into the stream it came on)."""
Local = Callable[[list[connect_pb2.Post]], Awaitable[None]]
"""Admits posts here after all (this replica holds their channel by now), answering them itself."""


class _Queue:
    """The posts of one participant into one channel waiting to be forwarded, sent in order: one
    ForwardPosts call at a time, each taking every post queued meanwhile (up to ``max_batch``)."""

    __slots__ = ("bytes", "items", "room", "running")

    def __init__(self) -> None:
        self.items: deque[tuple[connect_pb2.Post, Sink, int]] = deque()
        self.bytes = 0
        """The serialized size of the queued posts."""
        self.room = asyncio.Event()
        """Set while :attr:`bytes` is below :data:`MAX_QUEUED_BYTES`."""
        self.room.set()
        self.running = False


class Forwarder:
    """Posts and calls for channels other replicas hold, sent to those replicas."""

    def __init__(
        self, placement: Placement, peers: ReplicaPeers, *, refresh: float, ttl: float, max_batch: int
    ) -> None:
        self._placement = placement
        self._peers = peers
        self._refresh = refresh
        self._ttl = ttl
        self._max_batch = max(1, max_batch)
        self._queues: dict[tuple[str, str], _Queue] = {}
        """(agent id, channel id) → its posts waiting to be forwarded (present while some are)."""

    def submit(
        self,
        agent_id: str,
        channel_id: str,
        posts: Sequence[connect_pb2.Post],
        sink: Sink,
        local: Local,
        spawn: Callable[[Any, str], asyncio.Task[Any]],
    ) -> None:
        """Forward ``agent_id``'s ``posts`` into ``channel_id`` to its holder after the ones this
        participant queued there before (a stream's posts into a channel are admitted in order);
        each result goes to ``sink``; ``local`` admits them here if this replica holds the channel
        by the time they are sent."""
        key = (agent_id, channel_id)
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = _Queue()
        for post in posts:
            size = post.ByteSize()
            queue.items.append((post, sink, size))
            queue.bytes += size
        if queue.bytes >= MAX_QUEUED_BYTES:
            queue.room.clear()
        if not queue.running:
            queue.running = True
            spawn(self._drain(key, queue, local), "forward-posts")

    async def room(self, agent_id: str, channel_id: str) -> None:
        """Wait while ``agent_id``'s posts waiting to be forwarded into ``channel_id`` take
        :data:`MAX_QUEUED_BYTES` or more (the stream they came on is read no further meanwhile)."""
        queue = self._queues.get((agent_id, channel_id))
        if queue is not None:
            await queue.room.wait()

    async def _drain(self, key: tuple[str, str], queue: _Queue, local: Local) -> None:
        """Send the queue's posts, a batch at a time, until it is empty."""
        agent_id, channel_id = key
        try:
            while queue.items:
                batch = [queue.items.popleft()]
                size = batch[0][2]
                while queue.items and len(batch) < self._max_batch and size + queue.items[0][2] <= MAX_CALL_BYTES:
                    batch.append(queue.items.popleft())
                    size += batch[-1][2]
                queue.bytes -= size
                if queue.bytes < MAX_QUEUED_BYTES:
                    queue.room.set()
                posts = [post for post, _, _ in batch]
                try:
                    results = await self.posts(agent_id, channel_id, posts)
                except AgentNetError as err:
                    failed = error_detail(err)
                    results = [connect_pb2.PostResult(request_id=p.request_id, error=failed) for p in posts]
                for (_, sink, _), result in zip(batch, results, strict=True):
                    if result is not None:
                        sink(result)
                here = [post for post, result in zip(posts, results, strict=True) if result is None]
                if here:
                    await local(here)
        finally:
            queue.running = False
            if self._queues.get(key) is queue and not queue.items:
                del self._queues[key]

    async def holder(self, channel_id: str, deadline: float, *, stale: bool = False) -> str | None:
        """The address of the replica holding ``channel_id`` (None: this replica holds it now). With
        ``stale`` the lease map is read again first (after a pause when the last read is what failed).
        Waits while no replica holds it, until the loop time ``deadline`` (then PartitionMoved)."""
        placement = self._placement
        loop = asyncio.get_running_loop()
        if stale:
            await asyncio.sleep(self._refresh / 2)
            await placement.read()
        while True:
            if placement.holds(channel_id):
                return None
            address = placement.owner_address(channel_id)
            if address is not None:
                return address
            if loop.time() >= deadline:
                raise not_held(channel_id)
            await asyncio.sleep(min(self._refresh / 2, max(0.0, deadline - loop.time())))
            await placement.read()

    def _deadline(self) -> float:
        """When a forward starting now gives up waiting for a holder: a dead holder's leases lapse
        within ``--replica-ttl``, and the next ownership round of a survivor takes them."""
        return asyncio.get_running_loop().time() + max(HOLDER_WAIT, 2 * self._ttl + 2 * self._refresh)

    async def _to_holder(
        self, channel_id: str, send: Callable[[str], Awaitable[T]], deadline: float, *, stale: bool = False
    ) -> T | None:
        """``send(address)`` to the replica holding ``channel_id`` — again to the next holder the lease map
        names while the one tried does not hold the channel or does not answer, until ``deadline`` —
        and its answer; None when this replica holds the channel (nothing was sent then)."""
        while True:
            address = await self.holder(channel_id, deadline, stale=stale)
            if address is None:
                return None
            try:
                return await send(address)
            except Unavailable as err:
                if not _retryable(err) or asyncio.get_running_loop().time() >= deadline:
                    raise
                stale = True

    async def posts(
        self, agent_id: str, channel_id: str, posts: Sequence[connect_pb2.Post]
    ) -> list[connect_pb2.PostResult | None]:
        """Have the holder of ``channel_id`` admit ``posts`` (all into that channel) for ``agent_id``;
        their results, in order — None for a post to admit here after all (this replica holds the
        channel by now).

        A holder that no longer holds the channel, or does not answer (it died: its leases lapse
        and a survivor takes them), is replaced by the one the lease map names next, until the
        forward's deadline; only the posts it did not take are sent again. With its idempotency key
        (the SDK and the bridges set one) a post a dead holder had admitted is then answered as the
        duplicate."""
        deadline = self._deadline()
        results: list[connect_pb2.PostResult | None] = [None] * len(posts)
        pending = list(range(len(posts)))
        stale = False
        while pending:
            batch = [posts[i] for i in pending]
            got = await self._to_holder(
                channel_id, functools.partial(self._forward, agent_id, batch), deadline, stale=stale
            )
            if got is None:
                break  # held here now: the rest is admitted here
            late = asyncio.get_running_loop().time() >= deadline
            moved = []
            for i, result in zip(pending, got, strict=True):
                if _moved(result) and not late:
                    moved.append(i)  # that replica no longer holds it: to the next holder
                else:
                    results[i] = result
            pending, stale = moved, True
        return results

    async def _forward(
        self, agent_id: str, posts: list[connect_pb2.Post], address: str
    ) -> list[connect_pb2.PostResult]:
        """``posts`` sent to the replica at ``address`` (:meth:`ReplicaPeers.forward`)."""
        return await self._peers.forward(address, agent_id, posts)

    async def call(
        self,
        service: ServiceDescriptor,
        method: str,
        request: Any,
        metadata: Sequence[tuple[str, str | bytes]],
        channel_id: str,
        time_remaining: float | None,
    ) -> Any:
        """Send the unary call ``method`` of ``service`` (HubService, OperatorService) to the holder of
        ``channel_id`` with the caller's ``metadata``, within the caller's own deadline
        (``time_remaining`` seconds; None: the caller set none, so neither does the forward — a call
        such as Delegate may wait long for its answer); its response (its refusal raised as the same
        domain error). None when this replica holds the channel now (serve it here). Sent again to
        the next holder as :meth:`posts`."""
        output = message_factory.GetMessageClass(service.methods_by_name[method].output_type)
        dropped = (FORWARDED_HEADER, REPLICA_KEY_HEADER, "grpc-timeout")  # the key is the forwarder's to add
        forwarded = [(k, v) for k, v in metadata if k.lower() not in dropped]
        forwarded.append((FORWARDED_HEADER, "1"))
        path = f"/{service.full_name}/{method}"
        loop = asyncio.get_running_loop()
        ends = None if time_remaining is None else loop.time() + time_remaining

        def send(address: str) -> Awaitable[Any]:
            left = None if ends is None else max(0.001, ends - loop.time())  # a retry gets what is left
            return self._peers.call_unary(address, path, request, output, forwarded, left)

        return await self._to_holder(channel_id, send, self._deadline())


def _retryable(err: Unavailable) -> bool:
    """A forward that reached no holder of the channel: it moved, or its holder did not answer."""
    return err.metadata.get("cause") in (PARTITION_MOVED, REPLICA_UNREACHABLE)


def _moved(result: connect_pb2.PostResult) -> bool:
    """Whether a forwarded post was refused because that replica no longer holds its channel."""
    return result.WhichOneof("result") == "error" and result.error.metadata.get("cause") == PARTITION_MOVED
