"""``python -m bench.history_bench``: data over time on the SQLite hub store (docs/operations.md "Data over time").

* **Churn with retention**: rounds of channels opened, filled and ended, each followed by a retention
  sweep (:class:`hubsvc.core.retention.Retention`) that purges the previous round's channels; the file's
  size after each round (it should level off: round 10 at most 1.2x round 3), and the sweep's cost per
  purged envelope.
* **Backup**: the time :meth:`SqliteHubStore.backup_to` takes per GB of database, and the commit
  latency of a writer committing meanwhile (p50 / p99 / max) against the same writer without a backup.

Not a test: numbers for the docs. ``--channels``, ``--envelopes``, ``--rounds``, ``--backup-mb`` size it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from agentnet.v1 import channel_pb2

from hubsvc.core.options import HubOptions
from hubsvc.core.retention import Retention
from hubsvc.storage import SqliteHubStore, Writes
from hubsvc.storage.base import ChannelRow, WalRow

BODY = b"x" * 400
"""Bytes of each envelope (about a short chat message with its fields)."""


def _row(channel_id: str, seq: int) -> WalRow:
    return WalRow(
        channel_id, seq, f"{channel_id}-{seq}", "sender", "ag2.msg.text", None, None, "2026-01-01T00:00:00Z", BODY
    )


def _rows(channel_id: str, count: int) -> list[WalRow]:
    return [_row(channel_id, s) for s in range(1, count + 1)]


def _channel(channel_id: str, live: bool) -> ChannelRow:
    state = channel_pb2.CHANNEL_STATE_OPENED if live else channel_pb2.CHANNEL_STATE_CLOSED
    return ChannelRow(
        channel_id,
        live,
        channel_pb2.ChannelMetadata(channel_id=channel_id, type="conversation", state=state).SerializeToString(),
    )


def _size(path: Path) -> int:
    return sum(os.path.getsize(p) for p in (path, Path(f"{path}-wal")) if p.exists())


async def churn(directory: Path, rounds: int, channels: int, envelopes: int) -> list[int]:
    """Rounds of churn, each swept; prints the file's size per round and the sweep's cost, and whether
    the size levels off (round 10 at most 1.2x round 3). Returns how many channels each sweep purged
    (every round's but the first: the channels of the round before it)."""
    db = directory / "churn.db"
    store = SqliteHubStore(db)
    await store.open()
    now = [0.0]
    retention = Retention(store, HubOptions(retain_ended=1.0), lambda: now[0])
    print(f"churn: {channels} channels x {envelopes} envelopes a round, the previous round purged each round")
    sizes = []
    purges = []
    try:
        for r in range(1, rounds + 1):
            round_started = time.time()
            # SQLite stamps ended_at to the millisecond (julianday('now')): the cutoff below is this
            # instant, so this round's first end must come a millisecond later to stay after it.
            await asyncio.sleep(0.002)
            for c in range(channels):
                channel_id = f"r{r}c{c}"
                await store.commit(Writes(channels=[_channel(channel_id, True)]))
                await store.commit(Writes(wal=_rows(channel_id, envelopes)))
                await store.commit(Writes(channels=[_channel(channel_id, False)]))
            now[0] = round_started + 1.0  # retain 1 s: what ended before this round began is due
            started = time.perf_counter()
            purged = await retention.sweep()
            seconds = time.perf_counter() - started
            purges.append(purged)
            sizes.append(_size(db))
            per = seconds / max(1, purged * envelopes) * 1e6
            print(
                f"  round {r:2}: file {sizes[-1] / 1e6:7.2f} MB, sweep purged {purged:4} channels in "
                f"{seconds * 1000:7.1f} ms ({per:.2f} us per envelope)"
            )
        if rounds >= 10:
            verdict = "met" if sizes[9] <= 1.2 * sizes[2] else "NOT met"
            print(f"  round 10 / round 3 size: {sizes[9] / sizes[2]:.2f}x (levels off, <= 1.2x: {verdict})")
    finally:
        await store.close()
    return purges


async def _commit_latencies(store: SqliteHubStore, stop: asyncio.Event, channel_id: str, first: int) -> list[float]:
    latencies = []
    seq = first
    while not stop.is_set():
        started = time.perf_counter()
        await store.commit(Writes(wal=[_row(channel_id, seq)]))
        latencies.append(time.perf_counter() - started)
        seq += 1
        await asyncio.sleep(0.001)
    return latencies


def _summary(latencies: list[float]) -> str:
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (
        f"p50 {statistics.median(ordered) * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms, max {ordered[-1] * 1000:.2f} ms "
        f"({len(ordered)} commits)"
    )


async def backup(directory: Path, megabytes: int) -> None:
    """Time a backup of a database of about ``megabytes`` MB, and a writer's commits meanwhile."""
    db = directory / "backup.db"
    store = SqliteHubStore(db)
    await store.open()
    try:
        per_channel = 1000
        channel = 0
        while _size(db) < megabytes * 1e6:
            await store.commit(Writes(wal=_rows(f"fill{channel}", per_channel)))
            channel += 1
        size = _size(db)
        print(f"backup: a {size / 1e6:.0f} MB database")
        stop = asyncio.Event()
        writer = asyncio.create_task(_commit_latencies(store, stop, "quiet", 1))
        await asyncio.sleep(2)
        stop.set()
        quiet = await writer
        stop = asyncio.Event()
        writer = asyncio.create_task(_commit_latencies(store, stop, "busy", 1))
        await asyncio.sleep(0.2)
        started = time.perf_counter()
        seconds = await store.backup_to(directory / "copy.db")
        elapsed = time.perf_counter() - started
        stop.set()
        during = await writer
        copied = _size(directory / "copy.db")
        rate = seconds / copied * 1e9
        print(f"  copy: {copied / 1e6:.0f} MB in {seconds:.2f} s = {rate:.1f} s per GB ({elapsed:.2f} s in all)")
        print(f"  a writer's commits without a backup: {_summary(quiet)}")
        print(f"  the same writer's commits during it:  {_summary(during)}")
    finally:
        await store.close()


def main() -> None:
    """Run both measurements in a temporary directory."""
    parser = argparse.ArgumentParser(prog="python -m bench.history_bench", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--channels", type=int, default=200)
    parser.add_argument("--envelopes", type=int, default=50)
    parser.add_argument("--backup-mb", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="agentnet-history-bench-") as tmp:
        asyncio.run(churn(Path(tmp), args.rounds, args.channels, args.envelopes))
        asyncio.run(backup(Path(tmp), args.backup_mb))


if __name__ == "__main__":
    main()
