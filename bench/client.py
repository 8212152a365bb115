"""A lean Connect-stream participant for benchmarks (hub and floor relay alike)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable

import grpc
from agentnet.v1 import connect_pb2, envelope_pb2, hub_pb2, hub_pb2_grpc, identity_pb2

from agentsdk.network._acks import ACK_DELAY, AckCoalescer
from agentsdk.network._outbox import Outbox

OnDelivery = Callable[[envelope_pb2.Envelope], None]


class BenchPeer:
    """One participant: a Connect stream with pipelined posts; asks for batched frames of up to
    ``max_batch`` entries (0 = one per frame) and acks and posts the way the SDK does: a delivery is
    acked once handled, the acks of one event-loop turn go together, riding with the next post
    within a few milliseconds where the hub reads them there
    (:class:`agentsdk.network._acks.AckCoalescer`), and the posts queued together go in one
    PostBatch frame when the Welcome's ``max_post_batch`` allows
    (:class:`agentsdk.network._outbox.Outbox`)."""

    def __init__(self, channel: grpc.aio.Channel, credential: str, agent_id: str = "", max_batch: int = 0) -> None:
        self.stub = hub_pb2_grpc.HubServiceStub(channel)
        self.credential = credential
        self.agent_id = agent_id
        self.metadata = (("authorization", f"Bearer {credential}"),)
        self.on_delivery: OnDelivery = lambda env: None
        self.ack = True
        self.max_batch = max_batch
        self._out = Outbox()
        self._acks = AckCoalescer(lambda ack: self._out.put(connect_pb2.ConnectRequest(ack=ack)), flush_at=256)
        self._results: dict[str, asyncio.Future[connect_pb2.PostResult]] = {}
        self._ids = itertools.count()
        self._task: asyncio.Task[None] | None = None
        self._call: grpc.aio.StreamStreamCall[connect_pb2.ConnectRequest, connect_pb2.ConnectResponse] | None = None

    async def connect(self, channels: list[str] | None = None) -> None:
        """Open the stream (``channels`` become Hello cursors: the relay joins them)."""
        self._out.put(
            connect_pb2.ConnectRequest(
                hello=connect_pb2.Hello(
                    credential=self.credential, cursors={c: 0 for c in channels or []}, max_batch=self.max_batch
                )
            )
        )

        self._call = self.stub.Connect(self._out.frames())
        welcomed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def deliver(deliveries: list[connect_pb2.Delivery]) -> None:
            for d in deliveries:
                self.on_delivery(d.envelope)
                if self.ack:
                    self._acks.add(d.envelope.channel_id, d.envelope.seq)

        def resolve(result: connect_pb2.PostResult) -> None:
            fut = self._results.pop(result.request_id, None)
            if fut is not None:
                fut.set_result(result)

        async def read() -> None:
            assert self._call is not None
            async for frame in self._call:
                kind = frame.WhichOneof("frame")
                if kind == "delivery":
                    deliver([frame.delivery])
                elif kind == "batch":
                    for result in frame.batch.post_results:
                        resolve(result)
                    if frame.batch.deliveries:
                        deliver(list(frame.batch.deliveries))
                elif kind == "post_result":
                    resolve(frame.post_result)
                elif kind == "welcome" and not welcomed.done():
                    self._out.limit = frame.welcome.max_post_batch
                    if frame.welcome.post_batch_ack:
                        self._out.carry = self._acks.take
                        self._acks.delay = ACK_DELAY
                    welcomed.set_result(None)

        self._task = asyncio.create_task(read())
        await asyncio.wait_for(welcomed, 30)

    def post_nowait(self, env: envelope_pb2.Envelope) -> asyncio.Future[connect_pb2.PostResult]:
        """Queue a post; the future resolves with its PostResult."""
        request_id = str(next(self._ids))
        fut: asyncio.Future[connect_pb2.PostResult] = asyncio.get_running_loop().create_future()
        self._results[request_id] = fut
        self._out.put(connect_pb2.ConnectRequest(post=connect_pb2.Post(request_id=request_id, envelope=env)))
        return fut

    async def close(self) -> None:
        """Cancel the stream."""
        if self._call is not None:
            self._call.cancel()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


async def register(channel: grpc.aio.Channel, name: str) -> tuple[str, str]:
    """Register on a real hub; returns (agent_id, credential)."""
    stub = hub_pb2_grpc.HubServiceStub(channel)
    resp = await stub.Register(hub_pb2.RegisterRequest(passport=identity_pb2.Passport(name=name)))
    return resp.agent.agent_id, resp.credential


def text(channel_id: str, body: str, event_type: str = "ag2.msg.text") -> envelope_pb2.Envelope:
    """A small envelope like an agent's chat turn."""
    return envelope_pb2.Envelope(
        channel_id=channel_id, event_type=event_type, event_data_json='{"text":"' + body + '"}'
    )
