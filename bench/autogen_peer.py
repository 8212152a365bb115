"""The AutoGen peer: the same three network workloads on AutoGen's gRPC worker
runtime (autogen-ext[grpc]); it persists nothing. Runs in its own environment
(.venv-autogen, made by `make bench`) because AutoGen pins other gRPC/protobuf
versions than ours. Prints one JSON line with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

from autogen_core import (
    AgentId,
    MessageContext,
    RoutedAgent,
    TopicId,
    TypeSubscription,
    message_handler,
    try_get_known_serializers_for_type,
)
from autogen_ext.runtimes.grpc import GrpcWorkerAgentRuntime, GrpcWorkerAgentRuntimeHost


@dataclass
class Msg:
    """A chat-turn-sized message."""

    body: str


class Counter:
    """Counts deliveries and fires when the expected number arrived."""

    def __init__(self) -> None:
        self.remaining = 0
        self.done: asyncio.Future[None] | None = None

    def expect(self, n: int) -> asyncio.Future[None]:
        self.remaining = n
        self.done = asyncio.get_running_loop().create_future()
        return self.done

    def hit(self) -> None:
        self.remaining -= 1
        if self.remaining == 0 and self.done is not None and not self.done.done():
            self.done.set_result(None)


COUNTER = Counter()


class Echo(RoutedAgent):
    """Answers every message (request/reply)."""

    def __init__(self) -> None:
        super().__init__("echo")

    @message_handler
    async def on_msg(self, message: Msg, ctx: MessageContext) -> Msg:
        return Msg("pong")


class Sink(RoutedAgent):
    """Counts published messages."""

    def __init__(self) -> None:
        super().__init__("sink")

    @message_handler
    async def on_msg(self, message: Msg, ctx: MessageContext) -> None:
        COUNTER.hit()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def worker(address: str) -> GrpcWorkerAgentRuntime:
    runtime = GrpcWorkerAgentRuntime(host_address=address)
    runtime.add_message_serializer(try_get_known_serializers_for_type(Msg))
    await runtime.start()
    return runtime


async def bench(address: str, iterations: int, count: int) -> dict[str, object]:
    out: dict[str, object] = {}
    sender = await worker(address)
    echo = await worker(address)
    await Echo.register(echo, "echo", lambda: Echo())
    samples = []
    for i in range(iterations + min(200, iterations)):
        t0 = time.perf_counter()
        await sender.send_message(Msg("ping"), AgentId("echo", "default"))
        if i >= min(200, iterations):
            samples.append(time.perf_counter() - t0)
    samples.sort()
    out["rtt"] = {"p50_ms": statistics.median(samples) * 1000, "p99_ms": samples[int(len(samples) * 0.99) - 1] * 1000}

    sinks = [await worker(address) for _ in range(8)]
    for i, rt in enumerate(sinks):
        await Sink.register(rt, f"sink{i}", lambda: Sink())
    await sinks[0].add_subscription(TypeSubscription(topic_type="one", agent_type="sink0"))
    for i, rt in enumerate(sinks):
        await rt.add_subscription(TypeSubscription(topic_type="fan", agent_type=f"sink{i}"))
    await asyncio.sleep(1.0)

    done = COUNTER.expect(count)
    t0 = time.perf_counter()
    for i in range(count):
        await sender.publish_message(Msg(f"m{i}"), TopicId("one", "default"))
    await asyncio.wait_for(done, 600)
    out["throughput"] = count / (time.perf_counter() - t0)

    fan = max(1, count // 4)
    done = COUNTER.expect(fan * 8)
    t0 = time.perf_counter()
    for i in range(fan):
        await sender.publish_message(Msg(f"f{i}"), TopicId("fan", "default"))
    await asyncio.wait_for(done, 600)
    out["fanout"] = fan * 8 / (time.perf_counter() - t0)

    for rt in [sender, echo, *sinks]:
        await rt.stop()
    return out


async def serve(address: str) -> None:
    host = GrpcWorkerAgentRuntimeHost(address=address)
    host.start()
    print("ready", flush=True)
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--serve", help="run only the host at this address")
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--count", type=int, default=20000)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(args.serve))
        return
    address = f"127.0.0.1:{free_port()}"
    host = subprocess.Popen(
        [sys.executable, __file__, "--serve", address], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert host.stdout is not None
        host.stdout.readline()
        print(json.dumps(asyncio.run(bench(address, args.iterations, args.count))))
    finally:
        host.terminate()
        host.wait(10)


if __name__ == "__main__":
    main()
