"""The scale-out benchmark (bench/scale_bench.py) end to end at a tiny size, against real replicas on a
real redis-server: every text reaches its recipient exactly once and the report has every figure.
Its delivery check refuses a run that lost, repeated or misrouted a text. No timing is asserted."""

from __future__ import annotations

import argparse

import pytest

from bench.scale_bench import DeliveryError, check_deliveries, main_async, print_report, summarize

PAIRS, TEXTS = 2, 4


@pytest.mark.slow
async def test_tiny_run_delivers_every_text_once_and_reports_every_replica(capsys: pytest.CaptureFixture[str]) -> None:
    # The channels divided among the replicas, as the bench runs them by default (--partitions).
    args = argparse.Namespace(
        pairs=PAIRS,
        texts=TEXTS,
        replicas="1,2",
        rounds=1,
        timeout=60.0,
        partitions=8,
        stay=False,
        control=True,
        spread=False,
    )
    report = await main_async(args)

    # The control of 2: two lone hubs side by side, a pair on each (both its members there).
    assert [(run["replicas"], run.get("control_of")) for run in report["runs"]] == [(1, None), (2, None), (2, 2)]
    control = report["runs"][2]
    assert control["live_channels"] == [1] * PAIRS and control["redirects"] == 0
    for run in report["runs"]:
        n = run["replicas"]
        assert run["delivered"] == PAIRS * TEXTS  # check_deliveries passed: each exactly once
        assert run["seconds"] > 0 and run["texts_per_s"] > 0
        assert 0 < run["text_latency"]["p50_ms"] <= run["text_latency"]["p99_ms"]
        for key in ("replica_cpu_s", "setup_cpu_s", "live_channels", "rss_growth_kb", "rss_kb", "streams"):
            assert len(run[key]) == n, key
        assert all(cpu >= 0 for cpu in run["replica_cpu_s"]) and run["cpu_s"] == sum(run["replica_cpu_s"])
        assert all(kb > 0 for kb in run["rss_kb"])
        assert sum(run["live_channels"]) == PAIRS  # divided (from a settled start): each channel held once
    one, two = report["summary"]
    assert one["replicas"] == 1 and one["live_met"] is None and one["cpu_target"] is None
    assert two["replicas"] == 2 and isinstance(two["live_met"], bool)
    assert one["control_ratio"] is None
    if control["cpu_s"] > 0:  # a tiny run may spend less than a clock tick
        assert two["control_ratio"] == pytest.approx(two["cpu_s"] / control["cpu_s"])
    else:
        assert two["control_ratio"] is None

    print_report(report)
    out = capsys.readouterr().out
    assert out.count(f"delivered {PAIRS * TEXTS} texts exactly once") == 3
    assert "(control: 2 lone hubs side by side)" in out
    assert "live channels ~1/2 each" in out


@pytest.mark.slow
async def test_on_a_spread_cluster_redis_is_summed_over_the_masters_and_shown_for_the_global_slot(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = argparse.Namespace(
        pairs=PAIRS, texts=TEXTS, replicas="1,2", rounds=1, timeout=60.0, partitions=8, stay=False, control=True,
        spread=True,
    )  # fmt: skip
    report = await main_async(args)
    assert [(run["replicas"], run.get("control_of")) for run in report["runs"]] == [(1, None), (2, None)]
    for run in report["runs"]:
        assert run["delivered"] == PAIRS * TEXTS and sum(run["live_channels"]) == PAIRS
        assert 0 <= run["redis_global_cpu_s"] <= run["redis_cpu_s"] + 1e-9  # one of the masters (sums of ticks)
    print_report(report)
    out = capsys.readouterr().out
    assert "a 3-master Redis Cluster, ?spread=1" in out
    assert out.count("the global slot's master") == 2 and "lone hubs side by side" not in out


def test_the_delivery_check_refuses_a_lost_a_repeated_or_a_misrouted_text() -> None:
    check_deliveries([[1, 1, 1], [1, 1, 1]], misrouted=0, errors=[])
    with pytest.raises(DeliveryError, match="pair 1: 1 of 3 texts missing, 0 delivered more than once"):
        check_deliveries([[1, 1, 1], [1, 0, 1]], misrouted=0, errors=[])
    with pytest.raises(DeliveryError, match="pair 0: 0 of 3 texts missing, 1 delivered more than once"):
        check_deliveries([[1, 2, 1]], misrouted=0, errors=[])
    with pytest.raises(DeliveryError, match="2 texts reached a member who should not"):
        check_deliveries([[1, 1]], misrouted=2, errors=[])
    with pytest.raises(DeliveryError, match="pair 0, text 1: Unavailable"):
        check_deliveries([[1, 1]], misrouted=0, errors=["pair 0, text 1: Unavailable: the hub went away"])


def test_the_summary_compares_each_round_with_its_own_single_replica_run() -> None:
    def run(round_no: int, n: int, cpu: float, live: list[int], control_of: int | None = None) -> dict[str, object]:
        return {
            "round": round_no,
            "replicas": n,
            "cpu_s": cpu,
            "delivered": 6000,
            "texts_per_s": 100.0,
            "live_channels": live,
            "control_of": control_of,
        }

    runs = [
        run(0, 1, 2.0, [30]),
        run(0, 3, 2.2, [9, 10, 11]),  # 1.1x, a third each: both met
        run(0, 5, 6.0, [30] * 5),  # 3x, every channel everywhere: neither met
        run(1, 1, 4.0, [30]),
        run(1, 3, 5.6, [8, 12, 10]),  # 1.4x
        run(1, 5, 12.0, [30] * 5),
        run(0, 3, 2.0, [10] * 3, control_of=3),  # three lone hubs: the divided 2.2 s is 1.1x theirs
        run(1, 3, 4.0, [10] * 3, control_of=3),  # 5.6 s: 1.4x
    ]
    one, three, five = summarize(runs, pairs=30)  # the controls are not rows of their own
    assert one["cpu_ratio"] == 1.0 and one["cpu_met"] is None and one["live_met"] is None
    assert three["cpu_ratio"] == pytest.approx(1.25) and three["cpu_met"] is True  # median of 1.1x and 1.4x
    assert three["live_max"] == 12 and three["live_total"] == 30 and three["live_met"] is True
    assert three["control_ratio"] == pytest.approx(1.25)  # median of the rounds' 1.1x and 1.4x
    assert five["control_ratio"] is None  # no control run for 5
    assert five["cpu_ratio"] == pytest.approx(3.0) and five["cpu_met"] is False
    assert five["live_total"] == 150 and five["live_met"] is False
