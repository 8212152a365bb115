"""``python -m bench.ag2_bench``: unmodified AG2 1.2.1 clients on AG2's own hub (released package, disk
store, its WebSocket link) vs the same clients through the AG2 gateway in front of our hub (durable
SQLite WAL), in one run. Same workloads (``bench/ag2_peer.py``): request/reply round trip, one-way
throughput (20,000 posts issued at once right after ``open()``), 8-way fan-out (as many deliveries).
Each server is its own process; the AG2 clients run in ``.venv-ag2`` (``make ag2-venv``). Prints the
figures, the ratios against DESIGN.md's targets (round trip no slower, throughput >= 2x), each server
process's CPU milliseconds per delivered envelope (steadier than rates on a busy machine), and whether
every workload's counts came out exact (every post answered, every envelope delivered once to every
receiver); counts that are not exact end the run with an error.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from bench import PEER_ENV

ROOT = Path(__file__).resolve().parents[1]
AG2_PYTHON = os.environ.get("AG2_PYTHON", str(ROOT / ".venv-ag2" / "bin" / "python"))
PEER = str(ROOT / "bench" / "ag2_peer.py")


def _start(cmd: list[str], marker: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str]:
    popen = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert popen.stdout is not None
    for line in popen.stdout:
        if marker in line:
            return popen, line
    raise RuntimeError(f"{cmd} did not start")


def _stop(popen: subprocess.Popen[str]) -> None:
    if popen.stdin is not None:
        popen.stdin.close()
    popen.terminate()
    try:
        popen.wait(15)
    except subprocess.TimeoutExpired:
        popen.kill()


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fanout_posts(count: int) -> int:
    """Posts of the 8-way fan-out for a throughput ``count``: as many deliveries in all (at least 8 posts)."""
    return max(count // 8, 8)


def expected_counts(iterations: int, count: int) -> dict[str, int]:
    """What every workload must count whatever the timings: each round trip's pong once, each post
    answered with its own envelope id, each envelope delivered once to each receiver."""
    fan = fanout_posts(count)
    return {
        "rtt_round_trips": iterations + 20,
        "rtt_pongs": iterations + 20,
        "rtt_duplicates": 0,
        "throughput_posted": count,
        "throughput_delivered": count,
        "throughput_duplicates": 0,
        "fanout8_posted": fan,
        "fanout8_delivered": fan * 8,
        "fanout8_duplicates": 0,
    }


def _deliveries(counts: dict[str, int]) -> int:
    """Envelopes delivered over all three workloads (round trip: ping + pong, warm-up rounds included)."""
    return counts["rtt_round_trips"] * 2 + counts["throughput_delivered"] + counts["fanout8_delivered"]


def _run(
    url: str, iterations: int, count: int, window: int, servers: dict[str, subprocess.Popen[str]]
) -> dict[str, Any]:
    """The three workloads against ``url``: their figures, each server process's CPU ms per delivered
    envelope (``cpu_ms_per_delivery_<name>``: less noisy than wall-clock rates on a shared machine),
    and the workloads' counts (``counts``)."""
    before = {name: _cpu_seconds(p.pid) for name, p in servers.items()}
    command = [AG2_PYTHON, PEER, "run", url, "--iterations", str(iterations), "--count", str(count)]
    out = subprocess.run(
        [*command, "--fanout-posts", str(fanout_posts(count)), "--window", str(window)],
        cwd=ROOT,
        env=PEER_ENV,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    report = json.loads(out.stdout.strip().splitlines()[-1])
    figures: dict[str, Any] = dict(report["figures"])
    for name, p in servers.items():
        used = _cpu_seconds(p.pid) - before[name]
        figures[f"cpu_ms_per_delivery_{name}"] = used * 1000 / _deliveries(report["counts"])
    figures["counts"] = report["counts"]
    return figures


@contextmanager
def _ag2_hub(tmp: str) -> Iterator[tuple[str, dict[str, subprocess.Popen[str]]]]:
    """AG2's own hub: its URL and its process (whose CPU the row reads)."""
    ag2_hub, line = _start([AG2_PYTHON, PEER, "serve", f"{tmp}/ag2-store"], "listening on", PEER_ENV)
    try:
        yield line.rsplit(" ", 1)[1].strip(), {"ag2_hub": ag2_hub}
    finally:
        _stop(ag2_hub)


@contextmanager
def _gateway_hub(tmp: str, embedded: bool) -> Iterator[tuple[str, dict[str, subprocess.Popen[str]]]]:
    """The AG2 gateway in front of our hub: its URL and the processes whose CPU the row reads (one
    ``python -m ag2embedded`` with ``embedded``, else the hub and the gateway each its own)."""
    gateway_flags = ["--port", "0", "--allow-none-auth", "--secret-file", f"{tmp}/gw.secret", "--log-level", "WARNING"]
    hub_flags = ["--port", "0", "--db", f"{tmp}/hub.db", "--log-level", "WARNING"]
    if embedded:
        both, line = _start(
            [sys.executable, "-m", "ag2embedded", *hub_flags, "--", *gateway_flags], "ag2gateway listening"
        )
        try:
            yield json.loads(line.removeprefix("ag2gateway listening "))["url"], {"gateway_and_hub": both}
        finally:
            _stop(both)
        return
    hub, line = _start([sys.executable, "-m", "hubsvc", *hub_flags], "listening on")
    try:
        target = line.rsplit(" ", 1)[1].strip()
        gateway, line = _start(
            [sys.executable, "-m", "ag2gateway", "--hub", target, *gateway_flags], "ag2gateway listening"
        )
        try:
            yield json.loads(line.removeprefix("ag2gateway listening "))["url"], {"gateway": gateway, "hub": hub}
        finally:
            _stop(gateway)
    finally:
        _stop(hub)


ROWS = ("ag2_hub", "gateway_hub")
RATIO_KEYS = ("rtt_p50_ms", "rtt_p99_ms", "throughput_per_s", "fanout8_deliveries_per_s")


def measure(iterations: int, count: int, window: int = 0, embedded: bool = False, rounds: int = 1) -> dict[str, Any]:
    """Both rows in one run, in ``rounds`` paired rounds: both servers start once, then each round runs
    the workloads against AG2's own hub and against the gateway in front of our hub (``embedded``: both
    in one process, ``python -m ag2embedded``; else each its own), alternating which goes first. Each
    row holds the median of its rounds' figures (its ``counts`` are the first round's); ``rounds``
    lists every round (with ``load_average``, the 1-minute load as it began), and ``ratios`` each
    figure's per-round ratio (gateway / AG2) and their median."""
    with tempfile.TemporaryDirectory(prefix="ag2-bench-") as tmp, ExitStack() as running:
        servers = {"ag2_hub": running.enter_context(_ag2_hub(tmp))}
        servers["gateway_hub"] = running.enter_context(_gateway_hub(tmp, embedded))
        per_round: list[dict[str, Any]] = []
        for index in range(rounds):
            paired: dict[str, Any] = {"load_average": os.getloadavg()[0]}
            for row in ROWS if index % 2 == 0 else ROWS[::-1]:
                url, processes = servers[row]
                paired[row] = _run(url, iterations, count, window, processes)
            per_round.append(paired)
    report: dict[str, Any] = {row: _median_row([r[row] for r in per_round]) for row in ROWS}
    ratios = {
        key: [r["gateway_hub"][key] / r["ag2_hub"][key] if r["ag2_hub"][key] else float("nan") for r in per_round]
        for key in RATIO_KEYS
    }
    report["ratios"] = {key: {"rounds": values, "median": statistics.median(values)} for key, values in ratios.items()}
    report["rounds"] = per_round
    return report


def _median_row(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One row over its rounds: each figure's median, the first round's counts."""
    row = {key: statistics.median(r[key] for r in rounds) for key in rounds[0] if key != "counts"}
    row["counts"] = rounds[0]["counts"]
    return row


def count_mismatches(r: dict[str, Any], iterations: int, count: int) -> list[str]:
    """Each round's counts that differ from :func:`expected_counts` (empty: every workload was exact)."""
    want = expected_counts(iterations, count)
    return [
        f"round {index}, {row}: {key} {figures['counts'].get(key)} (expected {value})"
        for index, paired in enumerate(r["rounds"])
        for row, figures in paired.items()
        if row in ROWS
        for key, value in want.items()
        if figures["counts"].get(key) != value
    ]


def print_report(r: dict[str, Any]) -> None:
    """The table and the ratios."""
    ag2, ours = r["ag2_hub"], r["gateway_hub"]
    print(f"{'workload (AG2 1.2.1 clients)':<34}{'AG2 hub':>14}{'gateway+hub':>14}   median ratio (target) rounds")
    for key, target in (
        ("rtt_p50_ms", "<= 1.0x"),
        ("rtt_p99_ms", ""),
        ("throughput_per_s", ">= 2.0x"),
        ("fanout8_deliveries_per_s", ""),
    ):
        ratio = r["ratios"][key]
        rounds = ", ".join(f"{x:.2f}" for x in ratio["rounds"]) if len(ratio["rounds"]) > 1 else ""
        verdict = f"({target})" if target else ""
        print(f"{key:<34}{ag2[key]:>14.1f}{ours[key]:>14.1f}   {ratio['median']:.2f}x {verdict} {rounds}".rstrip())
    if "cpu_ms_per_delivery_gateway_and_hub" in ours:
        ours_cpu, split = ours["cpu_ms_per_delivery_gateway_and_hub"], "(gateway and hub in one process)"
    else:
        ours_cpu = ours["cpu_ms_per_delivery_gateway"] + ours["cpu_ms_per_delivery_hub"]
        split = f"(gateway {ours['cpu_ms_per_delivery_gateway']:.3f} + hub {ours['cpu_ms_per_delivery_hub']:.3f})"
    print(f"{'cpu_ms_per_delivery':<34}{ag2['cpu_ms_per_delivery_ag2_hub']:>14.3f}{ours_cpu:>14.3f}   {split}")
    print("load average (1 min) as each round began: " + ", ".join(f"{p['load_average']:.1f}" for p in r["rounds"]))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ag2_bench", description=__doc__)
    parser.add_argument("--iterations", type=int, default=200, help="round trips measured (after 20 warm-up)")
    parser.add_argument("--count", type=int, default=20_000, help="envelopes of the throughput workload")
    parser.add_argument("--window", type=int, default=0, help="posts in flight (0: all of them at once)")
    parser.add_argument(
        "--embedded", action="store_true", help="run the gateway in the hub's process (python -m ag2embedded)"
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="paired rounds, alternating which hub goes first (medians reported)"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    if not Path(AG2_PYTHON).exists():
        sys.exit("the AG2 venv is missing: run `make ag2-venv`")
    report = measure(args.iterations, args.count, args.window, args.embedded, max(1, args.rounds))
    if args.json:
        print(json.dumps(report))
    else:
        print_report(report)
    wrong = count_mismatches(report, args.iterations, args.count)
    if wrong:
        sys.exit("counts not exact: " + "; ".join(wrong))
    if not args.json:
        print(f"counts exact on both hubs ({expected_counts(args.iterations, args.count)})")


if __name__ == "__main__":
    main()
