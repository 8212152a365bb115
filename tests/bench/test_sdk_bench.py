"""The SDK workloads of the hub benchmark (bench/sdk_bench.py) at a tiny size against a real hub.

Behaviour only: each workload runs to its end (every envelope reaches every receiver's callback,
every question gets its answer) and reports its figures; the report prints them beside the lean
client's with their ratios. No timing is asserted."""

from __future__ import annotations

import pytest

from agentsdk.network import Hub
from bench.hub_bench import print_sdk
from bench.sdk_bench import run_sdk

pytestmark = pytest.mark.slow


async def test_every_sdk_workload_runs_to_its_end_on_a_real_hub() -> None:
    async with Hub.open() as hub:
        figures: dict[str, object] = {}
        for workload in (
            "rtt",
            "rtt_long",
            "agent_turn",
            "agent_view",
            "throughput",
            "throughput_cursor_file",
            "fanout",
        ):
            figures |= await run_sdk(
                hub.target, workload, iterations=20, count=200, window=64, long_conversation=4200
            )  # 4,200 posts: past the hub's window of 4,096 recent keys
    rtt, turn, view = figures["rtt"], figures["agent_turn"], figures["agent_view"]
    assert isinstance(rtt, dict) and 0 < rtt["p50_ms"] <= rtt["p99_ms"]
    assert isinstance(figures["rtt_long"], dict) and 0 < figures["rtt_long"]["p50_ms"] <= figures["rtt_long"]["p99_ms"]
    assert isinstance(turn, dict) and 0 < turn["p50_ms"] <= turn["p99_ms"]
    assert isinstance(view, dict) and view["raw_p50_ms"] > 0 and view["view_p50_ms"] > 0
    assert isinstance(figures["throughput"], float) and figures["throughput"] > 0
    assert isinstance(figures["throughput_cursor_file"], float) and figures["throughput_cursor_file"] > 0
    assert isinstance(figures["fanout"], float) and figures["fanout"] > 0


def test_the_sdk_rows_print_beside_the_lean_clients_with_their_ratios(capsys: pytest.CaptureFixture[str]) -> None:
    rtt = {"p50_ms": 1.0, "p99_ms": 2.0}
    report = {
        "floor": {"rtt": rtt, "throughput": 4000.0, "fanout": 9000.0},
        "hub": {"rtt": {"p50_ms": 1.2, "p99_ms": 2.4}, "throughput": 3000.0, "fanout": 8000.0},
        "sdk": {
            "rtt": {"p50_ms": 1.5, "p99_ms": 3.0},
            "rtt_long": {"p50_ms": 1.65, "p99_ms": 3.0},
            "throughput": 2400.0,
            "throughput_cursor_file": 1800.0,
            "fanout": 6000.0,
            "agent_turn": {"p50_ms": 1.4, "p99_ms": 2.6},
            "agent_view": {"raw_p50_ms": 0.5, "view_p50_ms": 0.6},
        },
        "autogen": {"rtt": rtt, "throughput": 1200.0, "fanout": 2000.0},
    }
    print_sdk(report)
    out = capsys.readouterr().out
    assert "SDK/floor 1.50x (<= 1.5x)" in out
    assert "SDK/lean 0.80x (>= 0.8x), SDK/autogen 2.00x (>= 1.5x)" in out
    assert "SDK/autogen 3.00x (>= 2.0x)" in out
    assert "turn - lean round trip +0.200 ms (<= 0.3 ms)" in out
    assert "AgentView/raw stub 1.20x" in out
    assert "one-way, receiver with cursor file" in out and "with/without the file 0.75x" in out
    assert "round trip p50, 10,000 posts in" in out and "long/fresh channel 1.10x" in out
    report.pop("sdk")
    print_sdk(report)  # --no-sdk: no rows
    assert capsys.readouterr().out == ""
