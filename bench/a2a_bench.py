"""A2A benchmark: what an agent-to-agent call costs on the hub, against a plain consultation.

One hub process (durable SQLite WAL) on loopback. The callee is a lean Connect-stream
participant that accepts invites and answers every question at once, so the figures
are the hub's own cost. Workloads, in one run:

* ``InvokeAgent`` sequential latency p50/p99 (discovery checks, an execution recorded
  twice, a call token, a consulting channel, the reply);
* ``Delegate`` sequential latency p50/p99: the same consulting channel without A2A —
  the baseline the A2A overhead is measured against;
* ``InvokeAgent`` throughput with ``--concurrency`` calls in flight.

Run: ``python -m bench.a2a_bench`` (``make bench`` runs it too). Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from agentnet.v1 import a2a_pb2, envelope_pb2, hub_pb2, hub_pb2_grpc, identity_pb2

from bench.client import BenchPeer, text
from bench.hub_bench import start


async def _register(stub: hub_pb2_grpc.HubServiceStub, name: str, *, a2a: bool) -> tuple[str, str]:
    request = hub_pb2.RegisterRequest(passport=identity_pb2.Passport(name=name))
    if a2a:
        request.a2a.CopyFrom(a2a_pb2.A2ASettings(enabled=True, skills=["echo"]))
    response = await stub.Register(request)
    return response.agent.agent_id, response.credential


def _answer_everything(callee: BenchPeer) -> None:
    """Accept every invite and answer every question with a one-word reply."""

    def on_delivery(env: envelope_pb2.Envelope) -> None:
        if env.event_type == "ag2.channel.invite":
            callee.post_nowait(text(env.channel_id, "", "ag2.channel.invite_ack"))
        elif env.event_type == "ag2.msg.text":
            callee.post_nowait(text(env.channel_id, "done"))

    callee.on_delivery = on_delivery


async def _latencies(call: Callable[[], Awaitable[Any]], iterations: int, warmup: int) -> dict[str, float]:
    samples = []
    for i in range(warmup + iterations):
        started = time.perf_counter()
        await call()
        if i >= warmup:
            samples.append(time.perf_counter() - started)
    samples.sort()
    return {
        "p50_ms": statistics.median(samples) * 1000,
        "p99_ms": samples[min(len(samples) - 1, int(len(samples) * 0.99))] * 1000,
    }


async def _throughput(call: Callable[[], Awaitable[Any]], total: int, concurrency: int) -> float:
    remaining = iter(range(total))

    async def worker() -> None:
        for _ in remaining:
            await call()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return total / (time.perf_counter() - started)


async def run(iterations: int, concurrency: int, total: int) -> dict[str, Any]:
    """Measure against a fresh hub process; returns the figures."""
    with tempfile.TemporaryDirectory(prefix="a2a-bench-") as data:
        proc = start(["hubsvc", "--port", "0", "--data-dir", data, "--log-level", "WARNING"])
        try:
            async with (
                grpc.aio.insecure_channel(proc.target) as caller_ch,
                grpc.aio.insecure_channel(proc.target) as callee_ch,
            ):
                stub = hub_pb2_grpc.HubServiceStub(caller_ch)
                callee_id, callee_cred = await _register(hub_pb2_grpc.HubServiceStub(callee_ch), "callee", a2a=True)
                _, caller_cred = await _register(stub, "caller", a2a=False)
                callee = BenchPeer(callee_ch, callee_cred, callee_id)
                await callee.connect()
                _answer_everything(callee)
                auth = (("authorization", f"Bearer {caller_cred}"),)

                async def invoke() -> None:
                    response = await stub.InvokeAgent(
                        hub_pb2.InvokeAgentRequest(agent_id=callee_id, message="go", timeout_seconds=30), metadata=auth
                    )
                    if response.status != a2a_pb2.INVOCATION_STATUS_COMPLETED:
                        raise RuntimeError(f"call failed: {response.error}")

                async def delegate() -> None:
                    await stub.Delegate(
                        hub_pb2.DelegateRequest(target=callee_id, prompt="go", timeout_seconds=30), metadata=auth
                    )

                warmup = max(5, iterations // 10)
                result = {
                    "invoke": await _latencies(invoke, iterations, warmup),
                    "delegate": await _latencies(delegate, iterations, warmup),
                    "invoke_per_s": await _throughput(invoke, total, concurrency),
                    "concurrency": concurrency,
                    "hub_rss_kb": proc.rss_kb(),
                }
                await callee.close()
                return result
        finally:
            proc.stop()


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200, help="sequential calls per latency figure")
    parser.add_argument("--concurrency", type=int, default=16, help="calls in flight for the throughput figure")
    parser.add_argument("--total", type=int, default=400, help="calls for the throughput figure")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    r = asyncio.run(run(args.iterations, args.concurrency, args.total))
    if args.json:
        print(json.dumps(r, indent=2))
        return
    inv, dlg = r["invoke"], r["delegate"]
    print(f"{'':<30}{'p50':>10}{'p99':>10}")
    print(f"{'InvokeAgent (A2A)':<30}{inv['p50_ms']:>8.2f}ms{inv['p99_ms']:>8.2f}ms")
    print(f"{'Delegate (same channel, no A2A)':<30}{dlg['p50_ms']:>8.2f}ms{dlg['p99_ms']:>8.2f}ms")
    print(f"A2A overhead p50: {inv['p50_ms'] / dlg['p50_ms']:.2f}x a plain consultation")
    print(f"InvokeAgent throughput: {r['invoke_per_s']:.0f} calls/s with {r['concurrency']} in flight")
    print(f"hub RSS after the run: {r['hub_rss_kb'] / 1024:.1f} MiB")


if __name__ == "__main__":
    main()
