"""Hub benchmark: the hub (durable WAL, separate process) vs the raw-gRPC floor relay
vs AutoGen's gRPC worker runtime, in one run, on loopback.

Workloads: request/reply round trip p50/p99, one-way throughput in a conversation
channel, 8-way fan-out deliveries/s, hydrate rate of a large WAL, and RSS per idle
connected agent. Every figure is measured here, in this run; nothing is assumed.
Run: ``make bench`` (or ``python -m bench.hub_bench --help``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from agentnet.v1 import envelope_pb2, hub_pb2

from bench import PEER_ENV
from bench.client import BenchPeer, register, text
from bench.sdk_bench import LONG_CONVERSATION, run_sdk
from bench.timing import timed_round_trips
from localprocs.redis_server import RedisServer, start_redis_server
from localprocs.replicas import replicas

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Proc:
    """A server subprocess."""

    popen: subprocess.Popen[str]
    target: str

    def rss_kb(self) -> int:
        """Resident set size of the process in KiB."""
        for line in Path(f"/proc/{self.popen.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def stop(self) -> None:
        self.popen.terminate()
        try:
            self.popen.wait(15)
        except subprocess.TimeoutExpired:
            self.popen.kill()


def start(args: list[str]) -> Proc:
    """Start ``python -m <args>`` and wait for its "listening on host:port" line."""
    popen = subprocess.Popen(
        [sys.executable, "-m", *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert popen.stdout is not None
    for line in popen.stdout:
        if "listening on" in line:
            return Proc(popen, line.rsplit(" ", 1)[1].strip())
    raise RuntimeError(f"{args} did not start")


@dataclass
class Setup:
    """Connected peers sharing one channel."""

    peers: list[BenchPeer]
    channel_id: str
    grpc_channels: list[grpc.aio.Channel] = field(default_factory=list)

    async def close(self) -> None:
        for p in self.peers:
            await p.close()
        for c in self.grpc_channels:
            await c.close()


async def setup_hub(target: str | Sequence[str], n: int, channel_type: str, tag: str, max_batch: int = 0) -> Setup:
    """Register ``n`` agents, connect each on its own connection, open a channel, ack invites.

    ``target`` is one hub, or one per agent (agent ``i`` registers and connects at ``target[i]``;
    the first agent opens the channel on its hub)."""
    targets = [target] * n if isinstance(target, str) else list(target)
    chans = [grpc.aio.insecure_channel(t) for t in targets]
    peers = []
    for i, ch in enumerate(chans):
        agent_id, cred = await register(ch, f"{tag}-{i}")
        peers.append(BenchPeer(ch, cred, agent_id, max_batch=max_batch))
    for p in peers:
        await p.connect()
    opened = asyncio.get_running_loop().create_future()

    def watch_opener(env: envelope_pb2.Envelope) -> None:
        if env.event_type == "ag2.channel.opened" and not opened.done():
            opened.set_result(None)

    peers[0].on_delivery = watch_opener
    for p in peers[1:]:
        p.on_delivery = lambda env, p=p: (
            p.post_nowait(text(env.channel_id, "", "ag2.channel.invite_ack"))
            if env.event_type == "ag2.channel.invite"
            else None
        )
    resp = await peers[0].stub.OpenChannel(
        hub_pb2.OpenChannelRequest(type=channel_type, targets=[p.agent_id for p in peers[1:]]),
        metadata=peers[0].metadata,
    )
    await asyncio.wait_for(opened, 30)
    for p in peers:
        p.on_delivery = lambda env: None
    return Setup(peers, resp.channel.channel_id, chans)


async def setup_relay(target: str, n: int, max_batch: int = 0) -> Setup:
    """``n`` peers on the floor relay, all joined to one channel."""
    chans = [grpc.aio.insecure_channel(target) for _ in range(n)]
    peers = [BenchPeer(ch, f"peer-{i}", max_batch=max_batch) for i, ch in enumerate(chans)]
    for p in peers:
        await p.connect(["c1"])
    return Setup(peers, "c1", chans)


async def round_trips(s: Setup, iterations: int, warmup: int) -> dict[str, float]:
    """A asks, B answers on receipt; latency from A's post to A's receipt of the answer."""
    a, b = s.peers[0], s.peers[1]
    waiting: list[asyncio.Future[None]] = []
    b.on_delivery = lambda env: b.post_nowait(text(s.channel_id, "pong")) if env.event_type == "ag2.msg.text" else None

    def a_got(env: envelope_pb2.Envelope) -> None:
        if env.event_type == "ag2.msg.text" and waiting and not waiting[0].done():
            waiting.pop(0).set_result(None)

    a.on_delivery = a_got
    return await timed_round_trips(lambda: a.post_nowait(text(s.channel_id, "ping")), waiting, iterations, warmup)


async def one_way(s: Setup, count: int, window: int, event_type: str = "ag2.msg.text") -> float:
    """Sender posts ``count`` envelopes with ``window`` outstanding; every other peer counts
    deliveries; returns deliveries per second until the last receiver has all of them."""
    sender, receivers = s.peers[0], s.peers[1:]
    done = asyncio.get_running_loop().create_future()
    remaining = [count * len(receivers)]

    def got(env: envelope_pb2.Envelope) -> None:
        if env.event_type == event_type:
            remaining[0] -= 1
            if remaining[0] == 0 and not done.done():
                done.set_result(None)

    for r in receivers:
        r.on_delivery = got
    sem = asyncio.Semaphore(window)
    t0 = time.perf_counter()
    for i in range(count):
        await sem.acquire()
        fut = sender.post_nowait(text(s.channel_id, f"m{i}", event_type))
        fut.add_done_callback(lambda _f: sem.release())
    await asyncio.wait_for(done, 300)
    return count * len(receivers) / (time.perf_counter() - t0)


async def idle_rss_per_agent(agents: int) -> dict[str, float]:
    """Hub RSS growth per idle connected agent (each with its own Connect stream)."""
    with tempfile.TemporaryDirectory() as tmp:
        hub = start(["hubsvc", "--port", "0", "--db", f"{tmp}/hub.db", "--log-level", "WARNING"])
        chans = [grpc.aio.insecure_channel(hub.target) for _ in range(max(1, agents // 50))]
        try:
            creds = [await register(chans[i % len(chans)], f"idle-{i}") for i in range(agents)]
            await asyncio.sleep(1.0)
            before = hub.rss_kb()
            peers = [BenchPeer(chans[i % len(chans)], cred, aid) for i, (aid, cred) in enumerate(creds)]
            await asyncio.gather(*(p.connect() for p in peers))
            await asyncio.sleep(3.0)
            after = hub.rss_kb()
            for p in peers:
                await p.close()
        finally:
            for c in chans:
                await c.close()
            hub.stop()
    return {"kb_per_agent": (after - before) / agents, "rss_before_kb": before, "rss_after_kb": after}


def hydrate_rate(envelopes: int, mix: str = "conversation") -> dict[str, float]:
    """Write a WAL of ``envelopes`` envelopes (up to 1000 per channel) straight to SQLite, then time HubCore.hydrate.

    ``mix``: "conversation" (two-agent text channels) or "mixed" (every channel type in turn;
    see bench/hydrate_fixture.py)."""
    types = {"conversation": "CONVERSATION", "mixed": "MIXED"}[mix]
    code = f"""
import asyncio, json, time
from pathlib import Path
from bench.hydrate_fixture import build, measure, {types}
async def main():
    path = Path({tempfile.mkdtemp()!r}) / "hub.db"
    await build(path, {envelopes}, {types})
    print(json.dumps(await measure(path)))
asyncio.run(main())
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def autogen(agents_python: str | None, iterations: int, count: int) -> dict[str, Any] | None:
    """Run the AutoGen peer benchmark in its own environment (its gRPC/protobuf pins differ from ours)."""
    if not agents_python or not Path(agents_python).exists():
        return None
    out = subprocess.run(
        [
            agents_python,
            str(ROOT / "bench" / "autogen_peer.py"),
            "--iterations",
            str(iterations),
            "--count",
            str(count),
        ],
        cwd=ROOT,
        env=PEER_ENV,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if out.returncode != 0:
        print(out.stderr[-2000:], file=sys.stderr)
        return None
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


WORKLOADS = ("rtt", "throughput", "fanout")
"""The network workloads, in the order they run."""
SDK_WORKLOADS = {
    "rtt": ("rtt", "rtt_long", "agent_turn", "agent_view"),
    "throughput": ("throughput", "throughput_cursor_file"),
    "fanout": ("fanout",),
}
"""The SDK workloads (:mod:`bench.sdk_bench`) run right after each network workload's floor and hub rows."""


async def run_remote(
    kind: str,
    proc: Proc,
    iterations: int,
    count: int,
    window: int,
    max_batch: int,
    workloads: Sequence[str] = WORKLOADS,
    round_no: int = 0,
) -> dict[str, Any]:
    """The network ``workloads`` against the hub or the relay (clients ask both for the same batches);
    ``round_no`` keeps a later round's agent names apart from an earlier one's on the same hub."""
    results: dict[str, Any] = {}

    async def build(n: int, channel_type: str, tag: str) -> Setup:
        if kind == "hub":
            return await setup_hub(proc.target, n, channel_type, tag, max_batch)
        return await setup_relay(proc.target, n, max_batch)

    if "rtt" in workloads:
        s = await build(2, "conversation", f"rtt{round_no}")
        results["rtt"] = await round_trips(s, iterations, warmup=min(200, iterations))
        await s.close()
    if "throughput" in workloads:
        s = await build(2, "conversation", f"tput{round_no}")
        results["throughput"] = await one_way(s, count, window)
        await s.close()
    if "fanout" in workloads:
        s = await build(9, "discussion", f"fan{round_no}")
        results["fanout"] = await one_way(s, max(1, count // 4), window, event_type="bench.tick")
        await s.close()
    return results


REDIS_ARGS = ("--appendonly", "yes", "--appendfsync", "everysec")
"""The benchmark's Redis: the AOF on, fsynced once a second, which keeps what the SQLite hub's
default ``--synchronous NORMAL`` keeps (nothing acknowledged lost when a process dies; up to about
a second on power loss). docs/scale-out.md has the table."""


def start_bench_redis(directory: Path) -> RedisServer:
    """A redis-server of the benchmark's own (loopback, a free port, its AOF in ``directory``)."""
    return start_redis_server(directory, REDIS_ARGS)


async def redis_hub(
    redis: RedisServer, tmp: str, iterations: int, count: int, window: int, max_batch: int
) -> dict[str, Any]:
    """Round trip and one-way throughput against one hub replica on Redis (DB 0, emptied first),
    with the same workload code as the SQLite hub's rows."""
    redis.flush(0)
    hub = start(
        ["hubsvc", "--port", "0", "--store", redis.url(0), "--data-dir", f"{tmp}/redis-hub", "--log-level", "WARNING"]
    )
    try:
        return await run_remote("hub", hub, iterations, count, window, max_batch, ("rtt", "throughput"))
    finally:
        hub.stop()


async def spread_one_way(
    targets: Sequence[str], channels: int, count: int, window: int, max_batch: int, *, colocated: bool
) -> float:
    """``channels`` two-agent conversations over the hubs ``targets``: channel ``k``'s sender on
    hub ``k mod n``, its receiver on the next hub (``colocated``: on the same hub). Every sender
    posts ``count // channels`` envelopes with ``window // channels`` outstanding, all at once;
    returns total deliveries per second (until the last receiver has all of its channel's)."""
    n = len(targets)
    setups = []
    for k in range(channels):
        pair = [targets[k % n], targets[k % n if colocated else (k + 1) % n]]
        try:
            setups.append(await setup_hub(pair, 2, "conversation", f"spread{n}-{k}", max_batch))
        except (TimeoutError, grpc.aio.AioRpcError) as exc:
            raise RuntimeError(
                f"conversation {k} did not open with its agents on {pair}: across replicas this workload needs "
                "cross-replica delivery (--replicas-colocated runs without it)"
            ) from exc
    per_channel, per_window = max(1, count // channels), max(1, window // channels)
    try:
        t0 = time.perf_counter()
        await asyncio.gather(*(one_way(s, per_channel, per_window) for s in setups))
        return per_channel * channels / (time.perf_counter() - t0)
    finally:
        for s in setups:
            await s.close()


async def replica_scaling(
    redis: RedisServer, tmp: str, n: int, channels: int, count: int, window: int, max_batch: int, colocated: bool
) -> dict[str, Any]:
    """Total deliveries/s of the same load (:func:`spread_one_way`) on ``n`` replicas and on one,
    each on a freshly emptied Redis DB. Across replicas (``colocated=False``) this needs
    cross-replica delivery; ``colocated=True`` keeps each channel on one replica."""
    result: dict[str, Any] = {"replicas": n, "channels": channels, "colocated": colocated}
    for label, size in (("one", 1), ("many", n)):
        redis.flush(0)
        with replicas(
            redis.url(0), Path(tmp) / f"replicas-{size}", size, extra_args=["--log-level", "WARNING"]
        ) as hubs:
            result[label] = await spread_one_way(hubs.targets, channels, count, window, max_batch, colocated=colocated)
    return result


def median_of(rounds: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Each figure of ``rounds`` (reports of the same shape, nested dicts of numbers) as its median."""
    first = rounds[0]
    return {
        key: median_of([r[key] for r in rounds])
        if isinstance(value, dict)
        else statistics.median(r[key] for r in rounds)
        for key, value in first.items()
    }


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "n/a"


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        relay = start(["bench.relay", "--port", "0"])
        hub = start(["hubsvc", "--port", "0", "--db", f"{tmp}/hub.db", "--log-level", "WARNING"])
        try:
            # Each workload on both systems (and through the SDK) before the next one: the benchmark's
            # client process is then in the same state for all (not fresh for the floor and, for the hub,
            # aged by the floor's 60,000 deliveries of the heavier workloads). ``--rounds`` repeats that
            # with a share of the iterations and envelopes each, and every figure is the median of its
            # rounds: a slow spell of the machine lands on one round of each system, not on one system.
            rounds: dict[str, list[dict[str, Any]]] = {"floor": [], "hub": [], "sdk": []}
            iterations, count = max(1, args.iterations // args.rounds), max(1, args.count // args.rounds)
            for round_no in range(args.rounds):
                this: dict[str, dict[str, Any]] = {name: {} for name in rounds}
                for workload in WORKLOADS:
                    for name, kind, proc in (("floor", "relay", relay), ("hub", "hub", hub)):
                        this[name] |= await run_remote(
                            kind, proc, iterations, count, args.window, args.max_batch, (workload,), round_no
                        )
                    for sdk_workload in SDK_WORKLOADS[workload] if args.sdk else ():
                        this["sdk"] |= await run_sdk(hub.target, sdk_workload, iterations, count, args.window)
                for name, results in this.items():
                    rounds[name].append(results)
            report["floor"], report["hub"] = median_of(rounds["floor"]), median_of(rounds["hub"])
            if args.sdk:
                report["sdk"] = median_of(rounds["sdk"])
        finally:
            relay.stop()
            hub.stop()
        if args.redis or args.replicas:
            redis = start_bench_redis(Path(tmp) / "redis")
            try:
                if args.redis:
                    report["redis_hub"] = await redis_hub(
                        redis, tmp, args.iterations, args.count, args.window, args.max_batch
                    )
                if args.replicas:
                    report["replicas"] = await replica_scaling(
                        redis,
                        tmp,
                        args.replicas,
                        args.replica_channels,
                        args.count,
                        args.window,
                        args.max_batch,
                        args.replicas_colocated,
                    )
            finally:
                redis.stop()
    report["autogen"] = autogen(args.autogen_python, args.iterations, args.count)
    report["hydrate"] = hydrate_rate(args.hydrate_envelopes, args.hydrate_mix)
    report["hydrate"]["mix"] = args.hydrate_mix
    report["idle"] = await idle_rss_per_agent(args.idle_agents)
    return report


def print_report(r: dict[str, Any]) -> None:
    floor, hub, ag = r["floor"], r["hub"], r.get("autogen")
    print("\n== hub benchmark (loopback; hub and floor relay as separate processes) ==")
    print(f"{'workload':<34}{'floor':>14}{'hub':>14}{'autogen':>14}   ratios (target)")
    rt = f"  hub/floor p50 {ratio(hub['rtt']['p50_ms'], floor['rtt']['p50_ms'])} (<= 1.5x)"
    agv = f"{ag['rtt']['p50_ms']:>12.3f}ms" if ag else f"{'n/a':>14}"
    print(f"{'round trip p50':<34}{floor['rtt']['p50_ms']:>12.3f}ms{hub['rtt']['p50_ms']:>12.3f}ms{agv}{rt}")
    agv = f"{ag['rtt']['p99_ms']:>12.3f}ms" if ag else f"{'n/a':>14}"
    print(f"{'round trip p99':<34}{floor['rtt']['p99_ms']:>12.3f}ms{hub['rtt']['p99_ms']:>12.3f}ms{agv}")
    for key, label, floor_target, ag_target in (
        ("throughput", "one-way throughput (msg/s)", 0.6, 1.5),
        ("fanout", "8-way fan-out (deliveries/s)", 0.5, 2.0),
    ):
        agv = f"{ag[key]:>14.0f}" if ag else f"{'n/a':>14}"
        extra = f", hub/autogen {ratio(hub[key], ag[key])} (>= {ag_target}x)" if ag else ""
        print(
            f"{label:<34}{floor[key]:>14.0f}{hub[key]:>14.0f}{agv}"
            f"   hub/floor {ratio(hub[key], floor[key])} (>= {floor_target}x){extra}"
        )
    print_sdk(r)
    print_redis(r)
    h = r["hydrate"]
    label = f"hydrate ({h.get('mix', 'conversation')})"
    print(f"{label:<34}{h['envelopes']:>10} envelopes in {h['seconds']:.2f}s = {h['rate']:.0f}/s (>= 200000/s)")
    i = r["idle"]
    print(f"{'idle connected agent RSS':<34}{i['kb_per_agent']:>10.1f} KB/agent at {args_idle(r)} agents (<= 30 KB)")
    if ag is None:
        print("autogen: not measured (run `make bench`, which installs autogen-ext[grpc] in .venv-autogen)")


def print_sdk(r: dict[str, Any]) -> None:
    """The SDK rows (:mod:`bench.sdk_bench`) beside the lean client's, with their ratios and targets."""
    sdk, floor, hub, ag = r.get("sdk"), r["floor"], r["hub"], r.get("autogen")
    if sdk is None:
        return
    print(f"\n{'SDK path (agentsdk.network)':<34}{'floor':>14}{'lean client':>14}{'SDK':>14}   ratios (target)")
    for q in ("p50", "p99"):
        key = f"{q}_ms"
        note = f"   SDK/floor {ratio(sdk['rtt'][key], floor['rtt'][key])}"
        note += " (<= 1.5x)" if q == "p50" else ""
        note += f", SDK/lean {ratio(sdk['rtt'][key], hub['rtt'][key])}"
        values = f"{floor['rtt'][key]:>12.3f}ms{hub['rtt'][key]:>12.3f}ms{sdk['rtt'][key]:>12.3f}ms"
        print(f"{'round trip ' + q:<34}{values}{note}")
    long = sdk["rtt_long"]
    for q in ("p50", "p99"):
        key = f"{q}_ms"
        print(
            f"{'round trip ' + q + ', ' + format(LONG_CONVERSATION, ',') + ' posts in':<34}{'':>28}"
            f"{long[key]:>12.3f}ms   long/fresh channel {ratio(long[key], sdk['rtt'][key])}"
        )
    for key, label, lean_target, ag_target in (
        ("throughput", "one-way throughput (msg/s)", " (>= 0.8x)", 1.5),
        ("fanout", "8-way fan-out (deliveries/s)", "", 2.0),
    ):
        note = f"   SDK/lean {ratio(sdk[key], hub[key])}{lean_target}"
        note += f", SDK/autogen {ratio(sdk[key], ag[key])} (>= {ag_target}x)" if ag else ""
        print(f"{label:<34}{floor[key]:>14.0f}{hub[key]:>14.0f}{sdk[key]:>14.0f}{note}")
        if key == "throughput" and "throughput_cursor_file" in sdk:
            files = sdk["throughput_cursor_file"]
            note = f"   with/without the file {ratio(files, sdk[key])}"
            print(f"{'one-way, receiver with cursor file':<34}{'':>28}{files:>14.0f}{note}")
    turn = sdk["agent_turn"]
    for q in ("p50", "p99"):
        key = f"{q}_ms"
        extra = turn[key] - hub["rtt"][key]
        target = " (<= 0.3 ms)" if q == "p50" else ""
        print(
            f"{'agent handler turn ' + q:<34}{'':>14}{hub['rtt'][key]:>12.3f}ms{turn[key]:>12.3f}ms"
            f"   turn - lean round trip {extra:+.3f} ms{target}"
        )
    view = sdk["agent_view"]
    print(
        f"{'AgentView.describe_channel p50':<34}{'':>14}{view['raw_p50_ms']:>12.3f}ms{view['view_p50_ms']:>12.3f}ms"
        f"   AgentView/raw stub {ratio(view['view_p50_ms'], view['raw_p50_ms'])}"
    )
    if not ag:
        print("  (SDK/autogen: autogen not measured)")


def print_redis(r: dict[str, Any]) -> None:
    """The Redis rows: one replica on Redis against the SQLite hub above, and replica scaling."""
    red, hub = r.get("redis_hub"), r["hub"]
    if red is not None:
        print(f"\n{'hub on Redis vs hub on SQLite':<34}{'sqlite':>14}{'redis':>14}   redis/sqlite")
        for label, a, b in (
            ("round trip p50", hub["rtt"]["p50_ms"], red["rtt"]["p50_ms"]),
            ("round trip p99", hub["rtt"]["p99_ms"], red["rtt"]["p99_ms"]),
        ):
            print(f"{label:<34}{a:>12.3f}ms{b:>12.3f}ms   {ratio(b, a)}")
        a, b = hub["throughput"], red["throughput"]
        print(f"{'one-way throughput (msg/s)':<34}{a:>14.0f}{b:>14.0f}   {ratio(b, a)}")
    rep = r.get("replicas")
    if rep is not None:
        where = "each channel on one replica" if rep["colocated"] else "each channel's two agents on two replicas"
        label = f"{rep['replicas']} replicas vs 1 (deliveries/s)"
        print(f"{label:<34}{rep['one']:>14.0f}{rep['many']:>14.0f}   {ratio(rep['many'], rep['one'])}")
        print(f"  ({rep['channels']} conversations, {where}; same total load on both)")


def args_idle(r: dict[str, Any]) -> int:
    return int(r.get("idle_agents", 0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=2000, help="round trips to time")
    parser.add_argument("--count", type=int, default=20000, help="envelopes for the throughput run")
    parser.add_argument("--window", type=int, default=512, help="outstanding posts")
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="rounds of the floor / hub / SDK workloads, taken in turn, each with 1/N of --iterations and "
        "--count; every figure is the median of its rounds",
    )
    parser.add_argument(
        "--max-batch",
        type=int,
        default=256,
        help="Hello.max_batch of every hub and floor client (0 = one post result or delivery per frame)",
    )
    parser.add_argument("--hydrate-envelopes", type=int, default=1_000_000)
    parser.add_argument(
        "--hydrate-mix",
        choices=("conversation", "mixed"),
        default="conversation",
        help="channels of the hydrate WAL: two-agent conversations, or every channel type in turn",
    )
    parser.add_argument("--idle-agents", type=int, default=1000)
    parser.add_argument(
        "--autogen-python", default=os.environ.get("AUTOGEN_PYTHON", str(ROOT / ".venv-autogen" / "bin" / "python"))
    )
    parser.add_argument(
        "--redis",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also measure one hub replica on Redis (a redis-server the benchmark starts) against the SQLite hub",
    )
    parser.add_argument(
        "--replicas",
        type=int,
        default=3,
        help="also measure N hub replicas against one on the same total load, each channel's two agents on "
        "two replicas (0 = off)",
    )
    parser.add_argument("--replica-channels", type=int, default=12, help="conversations of the --replicas workload")
    parser.add_argument(
        "--replicas-colocated",
        action="store_true",
        help="put both agents of each --replicas channel on the same replica (runs without cross-replica delivery)",
    )
    parser.add_argument(
        "--sdk",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run the workloads through the public SDK (bench/sdk_bench.py) against the same hub",
    )
    parser.add_argument("--json", action="store_true", help="print the raw JSON report too")
    args = parser.parse_args()
    report = asyncio.run(main_async(args))
    report["idle_agents"] = args.idle_agents
    print_report(report)
    if args.json:
        print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
