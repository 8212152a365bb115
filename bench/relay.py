"""The floor: a minimal grpc.aio bidi relay speaking the same Connect frames as the
hub, with no WAL, no registry, no rules and no acks — the most a Python gRPC hub can do.

A session joins every channel named in its Hello cursors; a post is stamped with a
seq, answered with a PostResult and forwarded to every other member of its channel.
Like the hub, its Welcome says it takes ``post_batch`` frames of up to ``MAX_POST_BATCH``
posts (each handled as a single post), so clients send it the frames they send the hub.
A session whose Hello sets ``max_batch`` gets what is queued for it packed into
``batch`` frames the way the hub packs them (post results first, at most
``max_batch`` entries and ``MAX_BATCH_BYTES``, never waiting to fill one).
Run: ``python -m bench.relay --port 0``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
from collections.abc import AsyncIterator
from typing import Any

import grpc
from agentnet.v1 import connect_pb2, hub_pb2_grpc

SERVER_OPTIONS = [
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
]


MAX_BATCH_BYTES = 1024 * 1024
"""The hub's default --max-batch-bytes."""
MAX_POST_BATCH = 256
"""Welcome.max_post_batch: the hub's default --max-batch."""


def pack(
    first: connect_pb2.ConnectResponse, queue: asyncio.Queue[connect_pb2.ConnectResponse], limit: int
) -> tuple[connect_pb2.ConnectResponse, connect_pb2.ConnectResponse | None]:
    """``first`` plus whatever else is queued now, as one frame of at most ``limit`` entries and
    ``MAX_BATCH_BYTES``; also returns the frame taken that did not fit (it goes first next time)."""
    if queue.empty() or limit <= 1:
        return first, None
    results: list[connect_pb2.PostResult] = []
    deliveries: list[connect_pb2.Delivery] = []
    frame, carry = first, None
    count = total = 0
    while True:
        size = frame.ByteSize()
        if count and total + size > MAX_BATCH_BYTES:
            carry = frame
            break
        if frame.WhichOneof("frame") == "post_result":
            results.append(frame.post_result)
        else:
            deliveries.append(frame.delivery)
        count += 1
        total += size
        if count >= limit or queue.empty():
            break
        frame = queue.get_nowait()
    if count == 1:
        return first, carry
    return connect_pb2.ConnectResponse(batch=connect_pb2.Batch(post_results=results, deliveries=deliveries)), carry


class RelayServicer(hub_pb2_grpc.HubServiceServicer):
    """Connect only."""

    def __init__(self) -> None:
        self.members: dict[str, dict[str, asyncio.Queue[connect_pb2.ConnectResponse]]] = {}
        self.seqs: dict[str, itertools.count[int]] = {}

    async def Connect(
        self, request_iterator: AsyncIterator[connect_pb2.ConnectRequest], context: Any
    ) -> AsyncIterator[connect_pb2.ConnectResponse]:
        first = await anext(aiter(request_iterator))
        me = first.hello.credential
        max_batch = first.hello.max_batch
        queue: asyncio.Queue[connect_pb2.ConnectResponse] = asyncio.Queue()
        for channel_id in first.hello.cursors:
            self.members.setdefault(channel_id, {})[me] = queue
            self.seqs.setdefault(channel_id, itertools.count(1))

        def relay(post: connect_pb2.Post) -> None:
            env = post.envelope
            env.sender_id = me
            env.seq = next(self.seqs[env.channel_id])
            result = connect_pb2.PostResult(request_id=post.request_id, envelope=env)
            queue.put_nowait(connect_pb2.ConnectResponse(post_result=result))
            delivery = connect_pb2.ConnectResponse(delivery=connect_pb2.Delivery(envelope=env))
            for who, q in self.members[env.channel_id].items():
                if who != me:
                    q.put_nowait(delivery)

        async def read() -> None:
            async for frame in request_iterator:
                kind = frame.WhichOneof("frame")
                if kind == "post":
                    relay(frame.post)
                elif kind == "post_batch":
                    for post in frame.post_batch.posts:
                        relay(post)

        reader = asyncio.create_task(read())
        try:
            yield connect_pb2.ConnectResponse(welcome=connect_pb2.Welcome(agent_id=me, max_post_batch=MAX_POST_BATCH))
            carry: connect_pb2.ConnectResponse | None = None
            while True:
                frame, carry = pack(carry if carry is not None else await queue.get(), queue, max_batch)
                yield frame
        finally:
            reader.cancel()
            for members in self.members.values():
                members.pop(me, None)


async def serve(port: int) -> None:
    """Serve the relay until cancelled."""
    server = grpc.aio.server(options=SERVER_OPTIONS)
    hub_pb2_grpc.add_HubServiceServicer_to_server(RelayServicer(), server)
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print(f"relay listening on 127.0.0.1:{bound}", flush=True)
    await server.wait_for_termination()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    asyncio.run(serve(parser.parse_args().port))
