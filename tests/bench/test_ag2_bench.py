"""The AG2 benchmark end to end at a tiny size, in its real shape: unmodified AG2 clients against AG2's
own hub and against the gateway in front of ours, in one run, the one-way and fan-out posts all issued
at once right after ``open()``. Asserts what happened (every round trip answered, every post answered
with its own id, every envelope delivered exactly once to every receiver), never a timing."""

from __future__ import annotations

import asyncio
import statistics

import pytest

from bench.ag2_bench import count_mismatches, expected_counts, measure
from tests.ag2gateway.conftest import AG2_PYTHON

pytestmark = pytest.mark.slow


async def test_tiny_run_counts_exact_on_both_hubs() -> None:
    if not AG2_PYTHON.exists():
        pytest.fail("the AG2 venv is missing: run `make ag2-venv`")
    iterations, count = 3, 96  # 96 posts in flight at once: more than the gateway's 64 request slots
    report = await asyncio.to_thread(measure, iterations, count, 0, False, 2)  # two paired rounds
    figures = {"rtt_p50_ms", "rtt_p99_ms", "throughput_per_s", "fanout8_deliveries_per_s"}
    processes = {"ag2_hub": ["ag2_hub"], "gateway_hub": ["gateway", "hub"]}  # whose CPU each row reads
    assert len(report["rounds"]) == 2
    assert all(paired["load_average"] >= 0 for paired in report["rounds"])  # the load each round began at
    for row, names in processes.items():
        assert set(report[row]) == figures | {f"cpu_ms_per_delivery_{name}" for name in names} | {"counts"}
        for paired in report["rounds"]:
            assert paired[row]["counts"] == expected_counts(iterations, count)
        assert report[row]["rtt_p50_ms"] == statistics.median(p[row]["rtt_p50_ms"] for p in report["rounds"])
    for key in figures:
        ratios = report["ratios"][key]
        assert len(ratios["rounds"]) == 2 and ratios["median"] == statistics.median(ratios["rounds"])
    assert expected_counts(iterations, count)["fanout8_delivered"] == 96  # 12 posts to 8 receivers
    assert count_mismatches(report, iterations, count) == []


async def test_tiny_run_counts_exact_with_the_gateway_in_the_hubs_process() -> None:
    """``--embedded``: the gateway row served by one ``python -m ag2embedded`` process, whose CPU it reads."""
    if not AG2_PYTHON.exists():
        pytest.fail("the AG2 venv is missing: run `make ag2-venv`")
    iterations, count = 3, 96
    report = await asyncio.to_thread(measure, iterations, count, 0, True)
    assert "cpu_ms_per_delivery_gateway_and_hub" in report["gateway_hub"]
    assert report["gateway_hub"]["counts"] == expected_counts(iterations, count)
    assert count_mismatches(report, iterations, count) == []
