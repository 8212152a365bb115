"""The round-trip timing every benchmark's workloads share: one ping at a time, each timed until
the answer's future is resolved, and the p50 / p99 of the samples."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from typing import Any


def percentiles(samples: list[float]) -> dict[str, float]:
    """p50 / p99 in milliseconds of ``samples`` (seconds)."""
    samples = sorted(samples)
    return {
        "p50_ms": statistics.median(samples) * 1000,
        "p99_ms": samples[max(0, int(len(samples) * 0.99) - 1)] * 1000,
    }


async def timed_round_trips(
    ping: Callable[[], Any],
    waiting: list[asyncio.Future[None]],
    iterations: int,
    warmup: int,
) -> dict[str, float]:
    """Call ``ping`` ``warmup + iterations`` times, one after the other; each time a new future is
    appended to ``waiting`` first, and the answer's handler resolves it (popping it). A ``ping``
    that returns a coroutine (the SDK's ``send``) is awaited; whatever else it returns (the lean
    client's post future) is not. Returns the percentiles of the last ``iterations`` round trips."""
    samples = []
    loop = asyncio.get_running_loop()
    for i in range(warmup + iterations):
        fut = loop.create_future()
        waiting.append(fut)
        t0 = time.perf_counter()
        sent = ping()
        if asyncio.iscoroutine(sent):
            await sent
        await asyncio.wait_for(fut, 30)
        if i >= warmup:
            samples.append(time.perf_counter() - t0)
    return percentiles(samples)
