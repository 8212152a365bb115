"""Scale-out benchmark: does adding hub replicas divide the work? (issue 39; bench/README.md)

One redis-server (the AOF on, as :mod:`bench.hub_bench` runs it) and, in turn, 1, 3 and 5 hub
replicas on it (``--replicas``), each run on a freshly emptied Redis DB. The workload, through the
public SDK (``HubClient.connect``, ``register_human``): ``--pairs`` pairs of people, each pair in a
conversation channel of its own with its two members connected to two different replicas (pair
``k``: replica ``k mod N`` and the next one), ``--texts`` texts per channel in alternating turns
(each member answers the other's text from its ``on_envelope`` callback), all pairs at once. With
the channels divided, the SDK follows the hub's Redirects (docs/scale-out.md "Session steering"):
a member's stream moves to the replica holding its channel once texts reach it from there, so the
run shows what steering leaves of the cross-replica cost; ``--stay`` keeps every stream where it
connected (every post through a non-holder is forwarded, every delivery there is remote).

Per run it prints the CPU seconds the replica processes spent on the texts (``/proc/<pid>/stat``
utime + stime, read after every channel is open and again once the last text arrived: start-up,
hydrate, registrations and channel openings are left out) summed over the replicas and against one
replica, each replica's share, each replica's live channels held in memory (its
``agentnet_hub_live_channels`` gauge, hubsvc/metrics.py), each replica's RSS growth since it
started, the streams moved by a Redirect and those open on each replica at the end, and texts/s;
then the targets of issue 39 with met / not met.

Unless ``--no-control``, each round also runs a control for every N above one: N lone hubs side
by side, each on a Redis DB of its own with 1/N of the pairs (both members of a pair on the same
hub), so as many processes share the machine's cores as in the divided run and each carries the
same load, with nothing divided. Divided CPU against the control's is what dividing the channels
costs (forwarding, notices, steering, a replica's share of leases and feeds); divided CPU against
one replica carrying every pair also holds what a process gains from a heavier load (bigger commit
groups, fewer wake-ups per text) and what N processes lose sharing the cores.

With ``--spread`` the replicas keep their state on a three-master Redis Cluster with the channels
spread over the shards (``?spread=1``, docs/scale-out.md "Channels spread over the shards") instead:
Redis's CPU is then summed over the masters and shown for the master of the hub's global slot (where
every bundle's global part runs) on its own; there is no control (a Cluster has one database).

Every text is checked: each must reach the other member of its channel exactly once (and no
one else), every send must succeed, and a run that falls short raises :class:`DeliveryError`
instead of printing a figure. Clients run in this process, the replicas in their own.
Run: ``python -m bench.scale_bench`` (``--help`` for the knobs).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from redis.crc import key_slot

from agentsdk.errors import NotFound
from agentsdk.network import EV_TEXT, Envelope, HubClient, HumanClient, Passport
from bench.hub_bench import REDIS_ARGS, start_bench_redis
from bench.timing import percentiles
from localprocs.redis_server import RedisCluster, RedisServer, start_redis_cluster
from localprocs.replicas import Replicas, replicas

CPU_TARGETS = {3: 1.3, 5: 1.4}
"""Replica CPU summed on N replicas / on one, at most (issue 39, "What it must show")."""
LIVE_SLACK = 2.0
"""A replica holds "about 1/N" of the live channels when it holds at most this many times P/N of
them (and the replicas together hold each channel once). Channels are placed by a hash, so 30
channels over 5 replicas land unevenly: 2x keeps a fair hash inside the bound."""
_TICK = os.sysconf("SC_CLK_TCK")


GLOBAL_SLOT = key_slot(b"{agentnet:hub:}")
"""The slot of every global key of a hub with the default prefix on a Cluster (``{agentnet:hub:}{g}:…``)."""


@dataclass
class BenchRedis:
    """Where the replicas keep their state: one redis-server, or a Cluster with the spread layout."""

    server: RedisServer | None = None
    cluster: RedisCluster | None = None

    @classmethod
    def start(cls, directory: Path, *, spread: bool) -> BenchRedis:
        """A redis-server, or (``spread``) a three-master Cluster, of the benchmark's own (AOF on)."""
        if spread:
            return cls(cluster=start_redis_cluster(directory, extra_args=REDIS_ARGS))
        return cls(server=start_bench_redis(directory))

    def url(self, db: int) -> str:
        """The ``--store`` URL of database ``db`` (a Cluster has only 0: spread layout)."""
        if self.server is not None:
            return self.server.url(db)
        assert self.cluster is not None and db == 0
        return self.cluster.url() + "?spread=1"

    def flush(self, db: int) -> None:
        """Empty database ``db`` (every master of a Cluster)."""
        if self.server is not None:
            self.server.flush(db)
        elif self.cluster is not None:
            self.cluster.flush()

    def cpu(self) -> tuple[float, float | None]:
        """CPU seconds of every Redis process so far, and of the master serving the hub's global slot
        (None on one redis-server, where that is all of it)."""
        if self.server is not None:
            return cpu_seconds(self.server.proc.pid), None
        assert self.cluster is not None
        port, _ = self.cluster.owner_of(GLOBAL_SLOT)
        return sum(cpu_seconds(n.proc.pid) for n in self.cluster.nodes), cpu_seconds(self.cluster.node(port).proc.pid)

    def stop(self) -> None:
        """Stop every Redis process."""
        if self.server is not None:
            self.server.stop()
        if self.cluster is not None:
            self.cluster.stop()


class DeliveryError(RuntimeError):
    """The workload did not deliver every text exactly once to its recipient (or a send failed)."""


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid``, all its threads (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime: fields 14 and 15 of stat(5)


def rss_kb(pid: int) -> int:
    """Resident set size of process ``pid`` in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def gauge(metrics_url: str, name: str) -> int:
    """The gauge ``name`` a replica serves on its metrics page."""
    with urllib.request.urlopen(metrics_url, timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(name + " "):
                return int(float(line.split()[1]))
    raise RuntimeError(f"{metrics_url} has no {name} gauge")


def live_channels(metrics_url: str) -> int:
    """The ``agentnet_hub_live_channels`` gauge a replica serves: channels live in its memory."""
    return gauge(metrics_url, "agentnet_hub_live_channels")


async def settled(urls: Sequence[str], partitions: int, timeout: float = 60.0) -> None:
    """Wait until the replicas hold every partition between them and no partition has moved for two
    ownership rounds (1 s each by default): they divide the channels from a settled start, and the
    measurement leaves out the partitions moving while replicas join."""
    deadline = time.monotonic() + timeout
    last: list[int] = []
    while True:
        held = [gauge(url, "agentnet_hub_partitions_held") for url in urls]
        if sum(held) == partitions and held == last:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the replicas did not settle on all {partitions} partitions within {timeout:g} s")
        last = held
        await asyncio.sleep(2.0)


def check_deliveries(counts: Sequence[Sequence[int]], misrouted: int, errors: Sequence[str]) -> None:
    """Raise :class:`DeliveryError` unless every text of every pair (``counts[k][i]``: how often
    text ``i`` of pair ``k`` reached its recipient) arrived exactly once, none reached the wrong
    member, and no send failed."""
    problems = list(errors[:5])
    if misrouted:
        problems.append(f"{misrouted} texts reached a member who should not have received them")
    for k, pair in enumerate(counts):
        missing = sum(1 for c in pair if c == 0)
        repeated = sum(1 for c in pair if c > 1)
        if missing or repeated:
            problems.append(f"pair {k}: {missing} of {len(pair)} texts missing, {repeated} delivered more than once")
    if problems:
        raise DeliveryError("the workload did not deliver every text exactly once: " + "; ".join(problems[:10]))


@dataclass
class Pair:
    """Two people in one conversation: text ``i`` is sent by ``members[i % 2]`` to the other."""

    index: int
    members: tuple[HumanClient, HumanClient]
    channel_id: str
    texts: int
    counts: list[int]
    done: asyncio.Future[None]
    """Resolved once the last text arrived and its send returned."""
    ends: int = 0
    """Of those two, how many happened."""
    sent_at: dict[int, float] = field(default_factory=dict)
    """``time.perf_counter()`` as text ``i`` was handed to ``send``."""

    def end(self) -> None:
        """One of the two ends of the pair's run (the last text's arrival, its send's return)."""
        self.ends += 1
        if self.ends == 2 and not self.done.done():
            self.done.set_result(None)


@dataclass
class Conversations:
    """The workload's pairs, connected and with their channels open, and what they received."""

    pairs: list[Pair]
    stack: AsyncExitStack
    misrouted: int = 0
    errors: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    """Seconds from each text's ``send`` to its recipient's callback (first arrivals)."""
    stay: bool = False
    """Whether the clients keep their streams where they connected (they follow no Redirect)."""
    together: bool = False
    """Whether both members of a pair connect to the same target (the control's lone hubs)."""
    open_retries: int = 0
    """OpenChannel calls answered NotFound for the peer (registered through another replica, not yet
    known to the opener's: see :meth:`_open_channel`) and tried again."""

    @classmethod
    async def open(
        cls,
        targets: Sequence[str],
        pairs: int,
        texts: int,
        open_wait: float = 30.0,
        *,
        stay: bool = False,
        together: bool = False,
    ) -> Conversations:
        """``pairs`` pairs of people, pair ``k``'s members on ``targets[k % N]`` and ``targets[(k + 1) % N]``
        (both on ``targets[k % N]`` if ``together``; each through a ``HubClient`` of its own; ``stay``: not
        following Redirects); once everyone is registered, each pair's first member opens a conversation to
        the second (see :meth:`_open_channel` for ``open_wait``)."""
        stack = AsyncExitStack()
        self = cls([], stack)
        self.stay = stay
        self.together = together
        try:
            people = await asyncio.gather(*(self._person(targets, k, side) for k in range(pairs) for side in (0, 1)))
            made = await asyncio.gather(
                *(self._open_pair(k, people[2 * k], people[2 * k + 1], texts, open_wait) for k in range(pairs))
            )
        except BaseException:
            await stack.aclose()
            raise
        self.pairs = list(made)
        return self

    async def _person(self, targets: Sequence[str], k: int, side: int) -> HumanClient:
        hub = await self.stack.enter_async_context(
            HubClient.connect(targets[(k + side * (not self.together)) % len(targets)], follow_redirects=not self.stay)
        )
        return await hub.register_human(Passport(name=f"scale-{k}-{'ab'[side]}", kind="human"), pull=False)

    async def _open_pair(self, k: int, a: HumanClient, b: HumanClient, texts: int, open_wait: float) -> Pair:
        channel_id = await self._open_channel(a, b, open_wait)
        pair = Pair(k, (a, b), channel_id, texts, [0] * texts, asyncio.get_running_loop().create_future())
        for side in (0, 1):
            pair.members[side].on_envelope(self._answerer(pair, side))
        return pair

    async def _open_channel(self, a: HumanClient, b: HumanClient, wait: float) -> str:
        """``a`` opens a conversation to ``b``. A replica learns of an identity registered through
        another from the change feed (docs/scale-out.md), so until it has, it answers NotFound for
        ``b``: that is retried for up to ``wait`` seconds and counted in :attr:`open_retries`."""
        deadline = time.monotonic() + wait
        while True:
            try:
                channel = await a.open(type="conversation", target=b.agent_id)
                return channel.channel_id
            except NotFound:
                if time.monotonic() > deadline:
                    raise
                self.open_retries += 1
                await asyncio.sleep(0.02)

    def _answerer(self, pair: Pair, side: int) -> Callable[[Envelope], Awaitable[None]]:
        me, other = pair.members[side], pair.members[1 - side]

        async def answer(env: Envelope) -> None:
            if env.event_type != EV_TEXT or env.sender_id == me.agent_id:
                return
            i = int(env.text) if env.text.isdigit() else -1
            ours = env.channel_id == pair.channel_id and env.sender_id == other.agent_id
            if not ours or not 0 <= i < pair.texts or i % 2 == side:
                self.misrouted += 1
                return
            pair.counts[i] += 1
            if pair.counts[i] > 1:  # a repeat: counted, not answered again
                return
            self.latencies.append(time.perf_counter() - pair.sent_at[i])
            if i + 1 == pair.texts:
                pair.end()
                return
            await self._send(pair, side, i + 1)

        return answer

    async def _send(self, pair: Pair, side: int, i: int) -> None:
        pair.sent_at[i] = time.perf_counter()
        try:
            await pair.members[side].send(pair.channel_id, str(i))
            if i + 1 == pair.texts:
                pair.end()
        except Exception as exc:  # any failed send ends the pair's run, reported below
            self.errors.append(f"pair {pair.index}, text {i}: {type(exc).__name__}: {exc}")
            if not pair.done.done():
                pair.done.set_exception(DeliveryError(self.errors[-1]))

    async def run(self, timeout: float) -> float:
        """Every pair's first member sends text 0, and the turns go on until every pair's last text
        arrived; the wall seconds it took. Raises :class:`DeliveryError` on a failed send or when
        ``timeout`` passes first."""
        t0 = time.perf_counter()
        first = [asyncio.create_task(self._send(pair, 0, 0)) for pair in self.pairs]
        try:
            await asyncio.wait_for(asyncio.gather(*(p.done for p in self.pairs)), timeout)
        except TimeoutError:
            self.check()
            raise DeliveryError(f"the texts did not all arrive within {timeout:.0f} s") from None
        finally:
            await asyncio.gather(*first, return_exceptions=True)
        return time.perf_counter() - t0

    def check(self) -> None:
        """:func:`check_deliveries` of what arrived so far."""
        check_deliveries([p.counts for p in self.pairs], self.misrouted, self.errors)

    async def close(self) -> None:
        """Disconnect every person."""
        await self.stack.aclose()


async def scale_run(
    redis: BenchRedis,
    workdir: Path,
    n: int,
    pairs: int,
    texts: int,
    timeout: float,
    partitions: int = 0,
    *,
    stay: bool = False,
    lone: bool = False,
) -> dict[str, Any]:
    """The workload on ``n`` replicas of a freshly emptied Redis DB 0 (``partitions``: the channels
    divided among them, ``--partitions``; 0: every replica holds every channel; ``stay``: the clients
    follow no Redirect), or with ``lone`` on ``n`` lone hubs, hub ``i`` on DB ``i`` with both members
    of pair ``k`` on hub ``k mod n`` (the control); the run's figures."""
    args = ["--log-level", "WARNING", *(["--partitions", str(partitions)] if partitions else [])]
    with ExitStack() as running:
        dbs = range(n) if lone else range(1)
        for db in dbs:
            redis.flush(db)
        groups = [
            running.enter_context(
                replicas(redis.url(db), workdir / f"hubs-{n}-{db}", 1 if lone else n, extra_args=args, metrics=True)
            )
            for db in dbs
        ]
        slots = [(group, i) for group in groups for i in range(len(group.procs))]
        urls = [group.metrics_url(i) for group, i in slots]
        if partitions:
            for group in groups:
                await settled([group.metrics_url(i) for i in range(len(group.procs))], partitions)
        pids = [group.pid(i) for group, i in slots]
        rss_start = [rss_kb(p) for p in pids]
        cpu_start = [cpu_seconds(p) for p in pids]
        targets = [group.targets[i] for group, i in slots]
        conversations = await Conversations.open(targets, pairs, texts, stay=stay, together=lone)
        try:
            cpu_before = [cpu_seconds(p) for p in pids]
            (redis_before, global_before), client_before = redis.cpu(), _own_cpu()
            seconds = await conversations.run(timeout)
            cpu_after = [cpu_seconds(p) for p in pids]
            (redis_after, global_after), client_after = redis.cpu(), _own_cpu()
            rss_end = [rss_kb(p) for p in pids]
            live = [live_channels(url) for url in urls]
            streams = [gauge(url, "agentnet_hub_connected_streams") for url in urls]
            redirects = sum(gauge(url, "agentnet_hub_stream_redirects_total") for url in urls)
            conversations.check()
        finally:
            await conversations.close()
        for group in groups:
            _still_running(group)
    per_replica = [after - before for before, after in zip(cpu_before, cpu_after, strict=True)]
    return {
        "replicas": n,
        "pairs": pairs,
        "texts": texts,
        "delivered": pairs * texts,
        "seconds": seconds,
        "texts_per_s": pairs * texts / seconds if seconds else 0.0,
        "text_latency": percentiles(conversations.latencies),
        "cpu_s": sum(per_replica),
        "replica_cpu_s": per_replica,
        "setup_cpu_s": [before - start for start, before in zip(cpu_start, cpu_before, strict=True)],
        "live_channels": live,
        "streams": streams,
        "redirects": redirects,
        "rss_growth_kb": [end - start for start, end in zip(rss_start, rss_end, strict=True)],
        "rss_kb": rss_end,
        "open_retries": conversations.open_retries,
        "redis_cpu_s": redis_after - redis_before,
        "redis_global_cpu_s": None if global_after is None or global_before is None else global_after - global_before,
        "client_cpu_s": client_after - client_before,
    }


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _still_running(hubs: Replicas) -> None:
    for i in range(len(hubs.procs)):
        if not hubs.running(i):
            raise RuntimeError(f"replica {i} exited during the run:\n{hubs.output(i)[-2000:]}")


def _per_text(run: dict[str, Any]) -> float:
    return float(run["cpu_s"]) / run["delivered"]


def summarize(runs: Sequence[dict[str, Any]], pairs: int) -> list[dict[str, Any]]:
    """Per replica count: the median over rounds of the summed CPU, of its ratio to one replica in
    the same round, of its CPU per text against the round's control (one replica with 1/N of the
    pairs), and of texts/s; the largest live-channel count any replica held and the most the
    replicas held together; and the targets, met or not (None: no target for that count)."""
    by_n: dict[int, list[dict[str, Any]]] = {}
    for run in runs:
        if run.get("control_of") is None:
            by_n.setdefault(run["replicas"], []).append(run)
    ones = {run["round"]: run["cpu_s"] for run in by_n.get(1, [])}
    controls = {(run["round"], run["control_of"]): run for run in runs if run.get("control_of") is not None}
    rows = []
    for n, group in sorted(by_n.items()):
        ratios = [r["cpu_s"] / ones[r["round"]] for r in group if ones.get(r["round"])]
        ratio = statistics.median(ratios) if ratios else None
        against_control = [
            _per_text(r) / _per_text(controls[r["round"], n])
            for r in group
            if (r["round"], n) in controls and controls[r["round"], n]["cpu_s"] > 0  # 0: under a clock tick
        ]
        cpu_target = CPU_TARGETS.get(n)
        live_max = max(max(r["live_channels"]) for r in group)
        live_total = max(sum(r["live_channels"]) for r in group)
        live_bound = LIVE_SLACK * pairs / n
        rows.append(
            {
                "replicas": n,
                "cpu_s": statistics.median(r["cpu_s"] for r in group),
                "cpu_ratio": ratio,
                "control_ratio": statistics.median(against_control) if against_control else None,
                "texts_per_s": statistics.median(r["texts_per_s"] for r in group),
                "cpu_target": cpu_target,
                "cpu_met": None if cpu_target is None or ratio is None else ratio <= cpu_target,
                "live_max": live_max,
                "live_total": live_total,
                "live_bound": live_bound,
                "live_met": None if n == 1 else live_total <= pairs and live_max <= live_bound,
            }
        )
    return rows


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    """Every replica count of ``--replicas`` in each of ``--rounds`` rounds, on one redis-server (or
    with ``--spread`` a three-master Cluster, and no control)."""
    counts = [int(n) for n in args.replicas.split(",")]
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        redis = BenchRedis.start(Path(tmp) / "redis", spread=args.spread)
        try:
            for round_no in range(args.rounds):
                for n in counts:
                    run = await scale_run(
                        redis, Path(tmp), n, args.pairs, args.texts, args.timeout, args.partitions, stay=args.stay
                    )
                    runs.append({"round": round_no, **run})
                for n in counts if args.control and not args.spread else ():
                    if n > 1:
                        run = await scale_run(
                            redis, Path(tmp), n, args.pairs, args.texts, args.timeout, args.partitions, lone=True
                        )
                        runs.append({"round": round_no, "control_of": n, **run})
        finally:
            redis.stop()
    return {
        "pairs": args.pairs,
        "texts": args.texts,
        "partitions": args.partitions,
        "stay": args.stay,
        "spread": args.spread,
        "rounds": args.rounds,
        "runs": runs,
        "summary": summarize(runs, args.pairs),
    }


def _verdict(met: bool | None) -> str:
    return "" if met is None else ("met" if met else "NOT met")


def print_report(r: dict[str, Any]) -> None:
    """The runs, one line each with every replica's figures, then the summary against the targets."""
    print(
        f"\n== scale-out: {r['pairs']} pairs x {r['texts']} texts, each pair's members on two replicas, "
        + (f"channels divided in {r['partitions']} partitions" if r.get("partitions") else "every replica holds all")
        + (", streams stay where they connected" if r.get("stay") else "")
        + (" (a 3-master Redis Cluster, ?spread=1" if r.get("spread") else " (one redis-server")
        + "; replica CPU from /proc, texts only) =="
    )
    print(
        f"{'round':<7}{'replicas':>8}{'texts/s':>10}{'CPU summed':>12}   per replica: CPU s / live channels / RSS +MB"
    )
    for run in r["runs"]:
        each = "  ".join(
            f"{cpu:.2f}/{live}/{kb / 1024:+.1f}"
            for cpu, live, kb in zip(run["replica_cpu_s"], run["live_channels"], run["rss_growth_kb"], strict=True)
        )
        control = f"  (control: {run['control_of']} lone hubs side by side)" if run.get("control_of") else ""
        print(
            f"{run['round']:<7}{run['replicas']:>8}{run['texts_per_s']:>10.0f}{run['cpu_s']:>10.2f} s   {each}{control}"
        )
        print(
            f"{'':<7}{'':>8}  delivered {run['delivered']} texts exactly once, send to arrival p50 "
            f"{run['text_latency']['p50_ms']:.2f} / p99 {run['text_latency']['p99_ms']:.2f} ms; "
            f"redis {run['redis_cpu_s']:.2f} s"
            + (
                f" (the global slot's master {run['redis_global_cpu_s']:.2f} s)"
                if run.get("redis_global_cpu_s") is not None
                else ""
            )
            + ", "
            f"clients {run['client_cpu_s']:.2f} s CPU; {run['redirects']} streams redirected, "
            f"open per replica at the end: {'/'.join(str(s) for s in run['streams'])}"
            + (
                f"; {run['open_retries']} channel opens retried (peer not yet known there)"
                if run["open_retries"]
                else ""
            )
        )
    print(
        f"\n{'replicas':<10}{'CPU summed':>12}{'vs 1':>8}{'per text vs control':>21}{'texts/s':>10}"
        "   targets (issue 39)"
    )
    for row in r["summary"]:
        ratio = f"{row['cpu_ratio']:.2f}x" if row["cpu_ratio"] is not None else "n/a"
        control = f"{row['control_ratio']:.2f}x" if row.get("control_ratio") is not None else "-"
        notes = []
        if row["cpu_target"] is not None:
            notes.append(f"CPU <= {row['cpu_target']}x of one: {_verdict(row['cpu_met'])}")
        if row["live_met"] is not None:
            notes.append(
                f"live channels ~1/{row['replicas']} each (held: {row['live_max']} on the fullest replica, bound "
                f"{row['live_bound']:.0f}; {row['live_total']} on all, bound {r['pairs']}): {_verdict(row['live_met'])}"
            )
        line = f"{row['replicas']:<10}{row['cpu_s']:>10.2f} s{ratio:>8}{control:>21}{row['texts_per_s']:>10.0f}   "
        print(line + ("; ".join(notes) or "-"))


def main() -> None:
    """Parse the flags, run, print (and with ``--json`` the raw report)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=30, help="pairs of people, a conversation channel each")
    parser.add_argument("--texts", type=int, default=200, help="texts per channel, in alternating turns")
    parser.add_argument(
        "--replicas", default="1,3,5", help="replica counts to run, comma-separated (the ratios need 1 among them)"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="times to run every replica count in turn; the summary takes the median of the rounds",
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds one run's texts may take")
    parser.add_argument(
        "--partitions",
        type=int,
        default=64,
        help="divide the channels among the replicas in this many partitions (the hub's --partitions; "
        "0: every replica holds every channel)",
    )
    parser.add_argument(
        "--stay",
        action="store_true",
        help="the clients follow no Redirect: every stream stays on the replica it connected to",
    )
    parser.add_argument(
        "--no-control",
        dest="control",
        action="store_false",
        help="skip the control runs (for each N above one: N lone hubs side by side, 1/N of the pairs each)",
    )
    parser.add_argument(
        "--spread",
        action="store_true",
        help="keep the hub's state on a three-master Redis Cluster with the channels spread over the shards "
        "(?spread=1) instead of one redis-server; no control",
    )
    parser.add_argument("--json", action="store_true", help="print the raw JSON report too")
    args = parser.parse_args()
    if args.partitions < 0:
        parser.error("--partitions must be 0 or more")
    if args.pairs < 1 or args.texts < 1 or args.rounds < 1:
        parser.error("--pairs, --texts and --rounds must be at least 1")
    try:
        counts = [int(n) for n in args.replicas.split(",")]
    except ValueError:
        parser.error(f"--replicas takes comma-separated counts such as 1,3,5, not {args.replicas!r}")
    if any(n < 1 for n in counts):
        parser.error("every --replicas count must be at least 1")
    report = asyncio.run(main_async(args))
    print_report(report)
    if args.json:
        print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
