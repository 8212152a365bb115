"""The posts waiting to be forwarded to another replica are bounded in bytes per participant and
channel (hubsvc/forwarding.py ``MAX_QUEUED_BYTES``): past the bound the stream they came on waits.

The holder here is a real gRPC server speaking ReplicaService that holds every call until the
test lets it answer: a replica whose commits are slow. The forwarding side is the hub's own
:class:`~hubsvc.forwarding.Forwarder` over :class:`~hubsvc.replica_peers.ReplicaPeers`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest
from agentnet.v1 import connect_pb2, replica_pb2, replica_pb2_grpc

from hubsvc.core.placement import Placement
from hubsvc.forwarding import MAX_QUEUED_BYTES, Forwarder
from hubsvc.replica_peers import ReplicaPeers
from tests.eventually import assert_eventually
from tests.hubsvc.harness import make_envelope


class SlowHolder(replica_pb2_grpc.ReplicaServiceServicer):
    """Answers each ForwardPosts call (every post admitted) once ``release`` is set; counts the posts."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.received: list[str] = []

    async def ForwardPosts(
        self, request: replica_pb2.ForwardPostsRequest, context: grpc.aio.ServicerContext
    ) -> replica_pb2.ForwardPostsResponse:
        await self.release.wait()
        self.received += [p.request_id for p in request.posts]
        return replica_pb2.ForwardPostsResponse(
            results=[connect_pb2.PostResult(request_id=p.request_id, envelope=p.envelope) for p in request.posts]
        )


class ElsewherePlacement(Placement):
    """Every channel is held by the replica at ``address`` (what the lease map would say)."""

    def __init__(self, address: str) -> None:
        super().__init__(None, None, None)
        self._address = address

    def holds(self, channel_id: str) -> bool:
        return False

    def owner_address(self, channel_id: str) -> str | None:
        return self._address


@pytest.fixture
async def slow_holder() -> AsyncIterator[tuple[SlowHolder, str]]:
    server = grpc.aio.server()
    holder = SlowHolder()
    replica_pb2_grpc.add_ReplicaServiceServicer_to_server(holder, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield holder, f"127.0.0.1:{port}"
    holder.release.set()
    await server.stop(0)


async def test_a_participants_queue_of_forwards_is_bounded_in_bytes(slow_holder: tuple[SlowHolder, str]) -> None:
    holder, address = slow_holder
    peers = ReplicaPeers("key", timeout=30)
    forwarder = Forwarder(ElsewherePlacement(address), peers, refresh=0.2, ttl=1.0, max_batch=16)
    tasks: set[asyncio.Task[object]] = set()

    def spawn(coro: object, name: str) -> asyncio.Task[object]:
        task = asyncio.ensure_future(coro)  # type: ignore[arg-type]
        tasks.add(task)
        return task

    results: list[connect_pb2.PostResult] = []

    async def local(posts: list[connect_pb2.Post]) -> None:
        raise AssertionError("no post is admitted locally: the channel is held elsewhere")

    body = "x" * (256 * 1024)
    posts = [
        connect_pb2.Post(request_id=str(i), envelope=make_envelope("c1", "ag2.msg.text", {"text": body}))
        for i in range(24)  # about 6 MiB in all
    ]
    room = None
    for post in posts:
        forwarder.submit("alice", "c1", [post], results.append, local, spawn)
        room = asyncio.ensure_future(forwarder.room("alice", "c1"))
        await asyncio.sleep(0)
        if not room.done():
            break
    assert room is not None and not room.done(), "the queue took more than its bound without making the stream wait"
    queued_bytes = sum(p.ByteSize() for p in posts[: int(post.request_id) + 1])
    assert queued_bytes >= MAX_QUEUED_BYTES
    # Another participant's queue, or another channel's, is not held back by this one.
    await asyncio.wait_for(forwarder.room("bob", "c1"), 1)
    await asyncio.wait_for(forwarder.room("alice", "c2"), 1)

    holder.release.set()  # the holder answers: the queue drains and the stream may go on
    await asyncio.wait_for(room, 10)
    await assert_eventually(lambda: len(results) == int(post.request_id) + 1)
    assert [r.request_id for r in results] == [p.request_id for p in posts[: len(results)]]  # in order
    assert all(r.WhichOneof("result") == "envelope" for r in results), [r.error for r in results if r.error.reason]
    assert holder.received == [r.request_id for r in results]
    await asyncio.gather(*tasks)
    await peers.close()
