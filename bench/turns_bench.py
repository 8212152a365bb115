"""Turns benchmark: the network's real job. ``agents`` SDK agents in ``channels`` concurrent
``discussion`` channels (``agents / channels`` members each, strict round robin, so every
member speaks in turn), each channel running ``turns`` turns through the SDK's default
handler against a model that answers at once, on a real hub with its durable WAL.

Processes: the hub (``python -m hubsvc``, as ``bench/hub_bench.py`` starts it), the model
(``bench/turns_model.py``: a local OpenAI-compatible server the real ``openai`` client talks
HTTP to), and ``--agent-processes`` agents processes (``bench/turns_agents.py``), each hosting
its share of the channels' agents behind one ``HubClient``. This process only coordinates.

Figures (docs: bench/README.md):
* envelopes/s end to end: every envelope the channels' WALs hold (turns and lifecycle:
  invites, acks, opened, closed) / the wall time from the moment the agents processes are
  told to open their channels to the moment the last one saw its last channel close; turn
  envelopes/s counts the turns alone;
* turn latency p50/p99: for each turn after the first, the hub's admission time of that
  turn's envelope minus the admission time of the turn before it in the same channel
  (read back from the WAL: one clock, the hub's). It spans the previous envelope's durable
  commit, its delivery, the next speaker's default handler (CanSend, DescribeChannel,
  ReadWal, the model call) and its post up to admission;
* hub RSS at the end (all agents still connected), and each agents process's RSS.
Run: ``python -m bench.turns_bench --help``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.hub_bench import ROOT, Proc, start


def split(channels: int, processes: int) -> list[tuple[int, int]]:
    """(first channel, count) for each agents process: contiguous, as even as possible."""
    processes = max(1, min(processes, channels))
    base, extra = divmod(channels, processes)
    out, first = [], 0
    for p in range(processes):
        count = base + (1 if p < extra else 0)
        out.append((first, count))
        first += count
    return out


def percentile(samples: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank) of ``samples``."""
    ordered = sorted(samples)
    return ordered[max(0, min(len(ordered) - 1, int(len(ordered) * q + 0.5) - 1))]


def rss_kb(pid: int) -> int:
    """Resident set size of a process in KiB."""
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith("VmRSS:"):
            return int(row.split()[1])
    return 0


def tail(log: Path) -> str:
    """The end of an agents process's stderr."""
    return log.read_text()[-3000:] if log.exists() else ""


async def expect(proc: asyncio.subprocess.Process, what: str, log: Path) -> str:
    """The next stdout line of an agents process, which must start with ``what``."""
    assert proc.stdout is not None
    raw = await proc.stdout.readline()
    text = raw.decode().strip()
    if not text.startswith(what):
        raise RuntimeError(f"agents process {proc.pid}: expected {what!r}, got {text!r}\n{tail(log)}")
    return text


def summarise(records: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    """Throughput and latency figures from the channels' WAL records."""
    latencies: list[float] = []
    for r in records:
        times = [t for _sender, t in r["turns"]]
        latencies.extend(b - a for a, b in itertools.pairwise(times))
    envelopes = sum(r["envelopes"] for r in records)
    turns = sum(len(r["turns"]) for r in records)
    return {
        "seconds": seconds,
        "envelopes": envelopes,
        "turns": turns,
        "envelopes_per_s": envelopes / seconds,
        "turns_per_s": turns / seconds,
        "turn_latency_samples": len(latencies),
        "turn_latency_p50_ms": statistics.median(latencies) * 1000 if latencies else 0.0,
        "turn_latency_p99_ms": percentile(latencies, 0.99) * 1000 if latencies else 0.0,
        "turn_latency_min_ms": min(latencies) * 1000 if latencies else 0.0,
    }


async def py_spy(pid: int, out: Path, native: bool) -> asyncio.subprocess.Process:
    """Start sampling ``pid`` with py-spy (raw collapsed stacks to ``out``; stopped with SIGINT)."""
    exe = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if exe is None:
        raise SystemExit("--py-spy needs py-spy: pip install py-spy")
    # py-spy cannot unwind native frames without pausing the process; python frames are sampled without pausing.
    mode = ["--native"] if native else ["--nonblocking"]
    args = ["record", "--pid", str(pid), *mode, "--rate", "100", "--format", "raw", "--output", str(out)]
    with out.with_suffix(".log").open("wb") as log:
        return await asyncio.create_subprocess_exec(exe, *args, stdout=log, stderr=log)


async def run(
    *,
    agents: int,
    channels: int,
    turns: int,
    agent_processes: int,
    workdir: Path,
    timeout: float = 600.0,
    profile_dir: Path | None = None,
    profile_native: bool = False,
) -> dict[str, Any]:
    """Run the workload once, with the hub's database in ``workdir``; returns the report.

    With ``profile_dir``, py-spy samples the hub and every agents process from ``go`` to ``done``
    (``hub.raw``, ``agents-<i>.raw``: collapsed stacks, one per line with its sample count)."""
    if channels < 1 or agents % channels or agents // channels < 2:
        raise SystemExit(f"--agents ({agents}) must be a multiple of --channels ({channels}), at least 2 per channel")
    if turns < 2:
        raise SystemExit(f"--turns ({turns}) must be at least 2 (the seed is turn 1)")
    size = agents // channels
    hub = start(["hubsvc", "--port", "0", "--db", str(workdir / "hub.db"), "--log-level", "WARNING"])
    model: Proc | None = None
    procs: list[tuple[asyncio.subprocess.Process, Path]] = []
    try:
        model = start(["bench.turns_model"])
        for i, (first, count) in enumerate(split(channels, agent_processes)):
            log = workdir / f"agents-{i}.log"
            with log.open("wb") as err:
                proc = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "bench.turns_agents",
                    "--hub",
                    hub.target,
                    "--model",
                    f"http://{model.target}/v1",
                    "--first-channel",
                    str(first),
                    "--channels",
                    str(count),
                    "--size",
                    str(size),
                    "--turns",
                    str(turns),
                    "--timeout",
                    str(timeout),
                    cwd=ROOT,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=err,
                    limit=64 * 1024 * 1024,
                )
            procs.append((proc, log))
        for proc, log in procs:
            await asyncio.wait_for(expect(proc, "ready", log), timeout)
        spies: list[asyncio.subprocess.Process] = []
        if profile_dir is not None:
            spies.append(await py_spy(hub.popen.pid, profile_dir / "hub.raw", profile_native))
            for i, (proc, _log) in enumerate(procs):
                spies.append(await py_spy(proc.pid, profile_dir / f"agents-{i}.raw", profile_native))
            await asyncio.sleep(1.0)  # py-spy attaches asynchronously; let it start sampling before the clock
        t0 = time.perf_counter()
        for proc, _log in procs:
            assert proc.stdin is not None
            proc.stdin.write(b"go\n")
            await proc.stdin.drain()
        for proc, log in procs:
            await asyncio.wait_for(expect(proc, "done", log), timeout)
        seconds = time.perf_counter() - t0
        for spy in spies:
            if spy.returncode is None:
                spy.send_signal(signal.SIGINT)
            if await spy.wait() not in (0, -signal.SIGINT):
                print(f"py-spy {spy.pid} failed (exit {spy.returncode})", file=sys.stderr)
        hub_rss = hub.rss_kb()
        agents_rss = [rss_kb(proc.pid) for proc, _log in procs]
        records: list[dict[str, Any]] = []
        for proc, log in procs:
            records.extend(json.loads(await asyncio.wait_for(expect(proc, "{", log), timeout))["channels"])
            await proc.wait()
    finally:
        for proc, _log in procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        if model is not None:
            model.stop()
        hub.stop()
    return {
        "agents": agents,
        "channels": channels,
        "turns_per_channel": turns,
        "agents_per_channel": size,
        "agent_processes": len(procs),
        **summarise(records, seconds),
        "hub_rss_kb": hub_rss,
        "agents_rss_kb": agents_rss,
        "channel_records": records,
    }


def print_report(r: dict[str, Any]) -> None:
    """The human-readable figures."""
    print(
        f"\n== turns benchmark: {r['agents']} agents in {r['channels']} concurrent discussion channels "
        f"of {r['agents_per_channel']}, {r['turns_per_channel']} turns each; "
        f"{r['agent_processes']} agents process(es); hub durable WAL =="
    )
    print(f"{'wall time (first open → last close)':<40}{r['seconds']:>12.2f} s")
    print(f"{'envelopes/s end to end (all in WAL)':<40}{r['envelopes_per_s']:>12.0f}   ({r['envelopes']} envelopes)")
    print(f"{'turn envelopes/s':<40}{r['turns_per_s']:>12.0f}   ({r['turns']} turns)")
    print(f"{'turn latency p50':<40}{r['turn_latency_p50_ms']:>12.2f} ms")
    print(f"{'turn latency p99':<40}{r['turn_latency_p99_ms']:>12.2f} ms   ({r['turn_latency_samples']} turns)")
    print(f"{'hub RSS at the end':<40}{r['hub_rss_kb'] / 1024:>12.1f} MiB")
    print(f"{'agents process RSS':<40}{', '.join(f'{k / 1024:.1f}' for k in r['agents_rss_kb']):>12} MiB")


def main() -> None:
    """Parse the flags, run once, print."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=100, help="SDK agents in all (a multiple of --channels)")
    parser.add_argument("--channels", type=int, default=25, help="concurrent discussion channels")
    parser.add_argument("--turns", type=int, default=40, help="turns per channel, the opener's seed included")
    parser.add_argument("--agent-processes", type=int, default=1, help="processes hosting the agents")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds before the run is abandoned")
    parser.add_argument("--json", action="store_true", help="print the raw JSON report too (with per-channel records)")
    parser.add_argument(
        "--py-spy", type=Path, metavar="DIR", help="profile the hub and the agents processes during the run into DIR"
    )
    parser.add_argument(
        "--py-spy-native",
        action="store_true",
        help="with --py-spy: include native (C) frames (py-spy then pauses each process per sample: slower run)",
    )
    args = parser.parse_args()
    if args.py_spy is not None:
        args.py_spy.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        report = asyncio.run(
            run(
                agents=args.agents,
                channels=args.channels,
                turns=args.turns,
                agent_processes=args.agent_processes,
                workdir=Path(tmp),
                timeout=args.timeout,
                profile_dir=args.py_spy,
                profile_native=args.py_spy_native,
            )
        )
    print_report(report)
    if args.json:
        print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
