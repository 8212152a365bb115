"""``bench/inprocess_bench.py`` at a tiny size: both paths run their round trips to the end and the
report prints; no timing is asserted."""

from __future__ import annotations

import pytest

from bench.inprocess_bench import PATHS, measure, print_report


async def test_both_paths_answer_every_round_trip(capsys: pytest.CaptureFixture[str]) -> None:
    report = await measure(iterations=20, rounds=2, warmup=5)
    assert [sorted(r) for r in report["rounds"]] == [sorted(PATHS)] * 2
    for path in PATHS:
        assert report[path]["p50_ms"] > 0 and report[path]["cpu_ms_per_round_trip"] > 0
    print_report(report)
    assert "in process" in capsys.readouterr().out
