"""The AG2 benchmark end to end at a tiny size: both rows are measured, every workload completes
(every envelope delivered) on AG2's own hub and through the gateway. No timing is asserted."""

from __future__ import annotations

import asyncio

import pytest

from bench.ag2_bench import measure
from tests.ag2gateway.conftest import AG2_PYTHON

pytestmark = pytest.mark.slow


async def test_tiny_run_measures_both_hubs() -> None:
    if not AG2_PYTHON.exists():
        pytest.fail("the AG2 venv is missing: run `make ag2-venv`")
    report = await asyncio.to_thread(measure, 5, 16)
    rates = {"rtt_p50_ms", "rtt_p99_ms", "throughput_per_s", "fanout8_deliveries_per_s"}
    processes = {"ag2_hub": ["ag2_hub"], "gateway_hub": ["gateway", "hub"]}  # whose CPU each row reads
    for row, names in processes.items():
        assert set(report[row]) == rates | {f"cpu_ms_per_delivery_{name}" for name in names}
        assert all(value > 0 for value in report[row].values())
