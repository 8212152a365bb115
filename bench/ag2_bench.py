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
import subprocess
import sys
import tempfile
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


def _embedded(tmp: str, iterations: int, count: int, window: int) -> dict[str, Any]:
    """The gateway and the hub in one process (``python -m ag2embedded``): its CPU is the row's."""
    flags = ["--port", "0", "--allow-none-auth", "--secret-file", f"{tmp}/gw.secret", "--log-level", "WARNING"]
    both, line = _start(
        [
            sys.executable,
            "-m",
            "ag2embedded",
            "--port",
            "0",
            "--db",
            f"{tmp}/hub.db",
            "--log-level",
            "WARNING",
            "--",
            *flags,
        ],
        "ag2gateway listening",
    )
    try:
        url = json.loads(line.removeprefix("ag2gateway listening "))["url"]
        return _run(url, iterations, count, window, {"gateway_and_hub": both})
    finally:
        _stop(both)


def measure(iterations: int, count: int, window: int = 0, embedded: bool = False) -> dict[str, Any]:
    """Both rows, in one run: AG2's own hub, then the gateway in front of our hub (``embedded``: both in
    one process, ``python -m ag2embedded``; else each its own)."""
    with tempfile.TemporaryDirectory(prefix="ag2-bench-") as tmp:
        ag2_hub, line = _start([AG2_PYTHON, PEER, "serve", f"{tmp}/ag2-store"], "listening on", PEER_ENV)
        try:
            ag2 = _run(line.rsplit(" ", 1)[1].strip(), iterations, count, window, {"ag2_hub": ag2_hub})
        finally:
            _stop(ag2_hub)
        if embedded:
            return {"ag2_hub": ag2, "gateway_hub": _embedded(tmp, iterations, count, window)}
        hub, line = _start(
            [sys.executable, "-m", "hubsvc", "--port", "0", "--db", f"{tmp}/hub.db", "--log-level", "WARNING"],
            "listening on",
        )
        try:
            target = line.rsplit(" ", 1)[1].strip()
            gateway, line = _start(
                [
                    sys.executable,
                    "-m",
                    "ag2gateway",
                    "--hub",
                    target,
                    "--port",
                    "0",
                    "--allow-none-auth",
                    "--secret-file",
                    f"{tmp}/gw.secret",
                    "--log-level",
                    "WARNING",
                ],
                "ag2gateway listening",
            )
            try:
                url = json.loads(line.removeprefix("ag2gateway listening "))["url"]
                ours = _run(url, iterations, count, window, {"gateway": gateway, "hub": hub})
            finally:
                _stop(gateway)
        finally:
            _stop(hub)
    return {"ag2_hub": ag2, "gateway_hub": ours}


def count_mismatches(r: dict[str, Any], iterations: int, count: int) -> list[str]:
    """Each row's counts that differ from :func:`expected_counts` (empty: every workload was exact)."""
    want = expected_counts(iterations, count)
    return [
        f"{row}: {key} {r[row]['counts'].get(key)} (expected {value})"
        for row in ("ag2_hub", "gateway_hub")
        for key, value in want.items()
        if r[row]["counts"].get(key) != value
    ]


def print_report(r: dict[str, Any]) -> None:
    """The table and the ratios."""
    ag2, ours = r["ag2_hub"], r["gateway_hub"]
    print(f"{'workload (AG2 1.2.1 clients)':<34}{'AG2 hub':>14}{'gateway+hub':>14}   ratio (target)")
    for key, target in (
        ("rtt_p50_ms", "<= 1.0x"),
        ("rtt_p99_ms", ""),
        ("throughput_per_s", ">= 2.0x"),
        ("fanout8_deliveries_per_s", ""),
    ):
        ratio = ours[key] / ag2[key] if ag2[key] else float("nan")
        print(f"{key:<34}{ag2[key]:>14.1f}{ours[key]:>14.1f}   {ratio:.2f}x {('(' + target + ')') if target else ''}")
    if "cpu_ms_per_delivery_gateway_and_hub" in ours:
        ours_cpu, split = ours["cpu_ms_per_delivery_gateway_and_hub"], "(gateway and hub in one process)"
    else:
        ours_cpu = ours["cpu_ms_per_delivery_gateway"] + ours["cpu_ms_per_delivery_hub"]
        split = f"(gateway {ours['cpu_ms_per_delivery_gateway']:.3f} + hub {ours['cpu_ms_per_delivery_hub']:.3f})"
    print(f"{'cpu_ms_per_delivery':<34}{ag2['cpu_ms_per_delivery_ag2_hub']:>14.3f}{ours_cpu:>14.3f}   {split}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ag2_bench", description=__doc__)
    parser.add_argument("--iterations", type=int, default=200, help="round trips measured (after 20 warm-up)")
    parser.add_argument("--count", type=int, default=20_000, help="envelopes of the throughput workload")
    parser.add_argument("--window", type=int, default=0, help="posts in flight (0: all of them at once)")
    parser.add_argument(
        "--embedded", action="store_true", help="run the gateway in the hub's process (python -m ag2embedded)"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    if not Path(AG2_PYTHON).exists():
        sys.exit("the AG2 venv is missing: run `make ag2-venv`")
    report = measure(args.iterations, args.count, args.window, args.embedded)
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
