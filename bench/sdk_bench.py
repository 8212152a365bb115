"""The SDK path: the hub benchmark's workloads written as a new user writes them with the public SDK.

``bench/hub_bench.py`` measures the hub with its lean client (:mod:`bench.client`); these are the
same workloads through ``agentsdk.network`` (run by ``hub_bench`` beside the lean client's rows,
``--sdk`` / ``--no-sdk``):

* **round trip**: two ``register_human`` clients in a conversation; A ``await channel.send("ping")``,
  B answers from its ``on_envelope`` callback with ``channel.send``; latency from A's send to A's
  callback seeing the answer;
* **one-way throughput**: ``channel.send`` with ``window`` sends in flight (each its own task),
  the receiver counting in a plain-function ``on_envelope`` callback; again with the receiver
  keeping its cursors in a ``JsonFileCursorStore`` (what an agent run with a ``credential_file``
  does: its file is replaced as its cursor moves);
* **8-way fan-out**: a discussion of 9, the opener posting a custom event type with
  ``post_envelope``, the 8 others counting in their callbacks;
* **agent handler turn**: an :class:`agentsdk.Agent` (``ScriptedConfig``: no model is called)
  registered with ``HubClient.register`` and a handler of its own that answers every text with
  ``client.send``; the asker is the lean client, so the round trip minus the lean client's own
  (lean asker, lean answerer) is what the SDK's handler turn adds on the answering side;
* **AgentView reads**: ``AgentView.describe_channel`` (``agentsdk/operator.py``) calls one after
  the other against the raw stub's ``DescribeChannel`` with the same credential.

Every client registers and connects through its own ``HubClient`` (its own gRPC connection), as
each lean peer has its own channel. Defaults are the SDK's (pull queue on, tracing off).
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

import grpc
from agentnet.v1 import envelope_pb2, hub_pb2, hub_pb2_grpc

from agentsdk import Agent, ScriptedConfig
from agentsdk.network import (
    EV_CHANNEL_INVITE,
    EV_TEXT,
    AgentClient,
    Channel,
    Envelope,
    HubClient,
    HumanClient,
    JsonFileCursorStore,
    Passport,
)
from agentsdk.operator import AgentView
from bench.client import BenchPeer, register, text
from bench.timing import percentiles, timed_round_trips

__all__ = ["SdkSetup", "agent_turns", "agent_view_reads", "run_sdk", "sdk_one_way", "sdk_round_trips"]


_RUNS = itertools.count()
"""Numbers the identities' names, so the workloads may run again against the same hub."""


def unique(name: str) -> str:
    """``name`` with a suffix no earlier workload of this process used (names are unique on a hub)."""
    return f"{name}-{next(_RUNS)}"


@dataclass
class SdkSetup:
    """SDK clients sharing one channel (``clients[0]`` opened it)."""

    clients: list[HumanClient]
    channel: Channel
    stack: AsyncExitStack = field(default_factory=AsyncExitStack)

    async def close(self) -> None:
        """Disconnect every client and close their connections."""
        await self.stack.aclose()


async def setup_sdk(target: str, n: int, channel_type: str, tag: str, *, cursor_files: bool = False) -> SdkSetup:
    """``n`` ``register_human`` clients, each through its own HubClient; the first opens a channel
    of ``channel_type`` to the others (their invites auto-acked) and waits until it is OPENED.
    ``cursor_files``: the others keep their cursors in a ``JsonFileCursorStore`` each (in a
    directory removed with the setup)."""
    stack = AsyncExitStack()
    clients = []
    tag = unique(tag)
    files = stack.enter_context(tempfile.TemporaryDirectory()) if cursor_files else None
    for i in range(n):
        hc = await stack.enter_async_context(HubClient.connect(target))
        store = JsonFileCursorStore(f"{files}/{tag}-{i}.cursors.json") if files is not None and i else None
        clients.append(await hc.register_human(Passport(name=f"{tag}-{i}", kind="human"), cursor_store=store))
    channel = await clients[0].open(type=channel_type, target=[c.agent_id for c in clients[1:]])
    return SdkSetup(clients, channel, stack)


async def sdk_round_trips(s: SdkSetup, iterations: int, warmup: int) -> dict[str, float]:
    """A sends, B's callback answers; latency from A's ``send`` to A's callback seeing the answer."""
    a, b = s.clients
    waiting: list[asyncio.Future[None]] = []

    async def answer(env: Envelope) -> None:
        if env.event_type == EV_TEXT and env.sender_id == a.agent_id:
            await b.send(env.channel_id, "pong")

    def got(env: Envelope) -> None:
        if env.event_type == EV_TEXT and env.sender_id == b.agent_id and waiting and not waiting[0].done():
            waiting.pop(0).set_result(None)

    b.on_envelope(answer)
    a.on_envelope(got)
    return await timed_round_trips(lambda: s.channel.send("ping"), waiting, iterations, warmup)


async def sdk_one_way(s: SdkSetup, count: int, window: int, event_type: str = EV_TEXT) -> float:
    """The opener sends ``count`` envelopes, ``window`` in flight (``channel.send`` for texts,
    ``post_envelope`` for another event type); every other client counts them in its callback.
    Returns deliveries per second until the last receiver has all of them."""
    sender, receivers = s.clients[0], s.clients[1:]
    done = asyncio.get_running_loop().create_future()
    remaining = [count * len(receivers)]

    def got(env: Envelope) -> None:
        if env.event_type == event_type:
            remaining[0] -= 1
            if remaining[0] == 0 and not done.done():
                done.set_result(None)

    for r in receivers:
        r.on_envelope(got)
    channel_id = s.channel.channel_id
    post: Callable[[int], Any]
    if event_type == EV_TEXT:
        post = lambda i: s.channel.send(f"m{i}")  # noqa: E731
    else:
        post = lambda i: sender.post_envelope(  # noqa: E731
            Envelope(channel_id, sender.agent_id, None, event_type, {"text": f"m{i}"})
        )
    sem = asyncio.Semaphore(window)
    tasks: set[asyncio.Task[Any]] = set()

    def finished(task: asyncio.Task[Any]) -> None:
        tasks.discard(task)
        sem.release()
        if not task.cancelled() and task.exception() is not None and not done.done():
            done.set_exception(task.exception())  # type: ignore[arg-type]

    t0 = time.perf_counter()
    for i in range(count):
        await sem.acquire()
        task = asyncio.create_task(post(i))
        tasks.add(task)
        task.add_done_callback(finished)
    await asyncio.wait_for(done, 300)
    return count * len(receivers) / (time.perf_counter() - t0)


async def agent_turns(target: str, iterations: int, warmup: int) -> dict[str, float]:
    """The lean client asks an SDK Agent (``HubClient.register``, a handler of its own answering each
    text with ``client.send``; no model call) in a conversation; round trip p50/p99."""
    async with HubClient.connect(target) as hc:
        agent = Agent(unique("bench-responder"), config=ScriptedConfig([]))
        responder: AgentClient | None = None

        async def handle(env: Envelope) -> None:
            assert responder is not None
            if env.event_type == EV_CHANNEL_INVITE:
                await responder.ack_invite(env.channel_id)
            elif env.event_type == EV_TEXT:
                await responder.send(env.channel_id, "pong")

        responder = await hc.register(agent, on_envelope=handle)
        grpc_channel = grpc.aio.insecure_channel(target)
        agent_id, credential = await register(grpc_channel, unique("bench-asker"))
        asker = BenchPeer(grpc_channel, credential, agent_id, max_batch=256)
        await asker.connect()
        try:
            opened = asyncio.get_running_loop().create_future()
            waiting: list[asyncio.Future[None]] = []

            def on_delivery(env: envelope_pb2.Envelope) -> None:
                if env.event_type == "ag2.channel.opened" and not opened.done():
                    opened.set_result(None)
                elif env.event_type == EV_TEXT and waiting and not waiting[0].done():
                    waiting.pop(0).set_result(None)

            asker.on_delivery = on_delivery
            resp = await asker.stub.OpenChannel(
                hub_pb2.OpenChannelRequest(type="conversation", targets=[responder.agent_id]), metadata=asker.metadata
            )
            await asyncio.wait_for(opened, 30)
            channel_id = resp.channel.channel_id
            return await timed_round_trips(
                lambda: asker.post_nowait(text(channel_id, "ping")), waiting, iterations, warmup
            )
        finally:
            await asker.close()
            await grpc_channel.close()


async def agent_view_reads(target: str, iterations: int) -> dict[str, float]:
    """``AgentView.describe_channel`` one call after the other against the raw stub's
    ``DescribeChannel`` (same credential, same channel, alternating blocks); p50 of each in ms."""
    async with HubClient.connect(target) as hc:
        a = await hc.register_human(Passport(name=unique("view-a"), kind="human"))
        b = await hc.register_human(Passport(name=unique("view-b"), kind="human"))
        channel = await a.open(type="conversation", target=b.agent_id)
        await channel.send("hello")
        raw_channel = grpc.aio.insecure_channel(target)
        stub = hub_pb2_grpc.HubServiceStub(raw_channel)
        metadata = (("authorization", f"Bearer {a.credential}"),)
        request = hub_pb2.DescribeChannelRequest(channel_id=channel.channel_id)
        view = AgentView(target, a.credential)
        raw: list[float] = []
        sdk: list[float] = []
        try:
            for block in range(2 * max(1, iterations // 100)):
                for _ in range(min(100, iterations)):
                    t0 = time.perf_counter()
                    if block % 2:
                        await view.describe_channel(channel.channel_id)
                        sdk.append(time.perf_counter() - t0)
                    else:
                        await stub.DescribeChannel(request, metadata=metadata)
                        raw.append(time.perf_counter() - t0)
        finally:
            await view.close()
            await raw_channel.close()
    return {"raw_p50_ms": percentiles(raw)["p50_ms"], "view_p50_ms": percentiles(sdk)["p50_ms"]}


LONG_CONVERSATION = 10_000
"""Posts sent into the channel before "rtt_long" times its round trips: more keyed posts than the
hub's window of recent idempotency keys holds (4,096), so new keys are checked against its filter of
forgotten ones (docs/operations.md, "Idempotency is exact")."""


async def run_sdk(
    target: str, workload: str, iterations: int, count: int, window: int, long_conversation: int = LONG_CONVERSATION
) -> dict[str, Any]:
    """One of the SDK workloads against the hub at ``target``: "rtt", "throughput", "fanout" (as
    :data:`bench.hub_bench.WORKLOADS` names them), "rtt_long" (round trips in a channel that already
    holds ``long_conversation`` posts), "throughput_cursor_file" (one-way to a receiver keeping its
    cursors in a file), "agent_turn" or "agent_view"."""
    if workload == "agent_turn":
        return {workload: await agent_turns(target, iterations, warmup=min(200, iterations))}
    if workload == "agent_view":
        return {workload: await agent_view_reads(target, max(100, iterations // 4))}
    channel_type, n = ("discussion", 9) if workload == "fanout" else ("conversation", 2)
    s = await setup_sdk(target, n, channel_type, f"sdk-{workload}", cursor_files=workload == "throughput_cursor_file")
    try:
        if workload == "rtt_long":
            await sdk_one_way(s, long_conversation, window)
        if workload in ("rtt", "rtt_long"):
            return {workload: await sdk_round_trips(s, iterations, warmup=min(200, iterations))}
        if workload in ("throughput", "throughput_cursor_file"):
            return {workload: await sdk_one_way(s, count, window)}
        return {workload: await sdk_one_way(s, max(1, count // 4), window, event_type="bench.tick")}
    finally:
        await s.close()
