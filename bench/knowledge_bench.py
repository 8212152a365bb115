"""Knowledge benchmark: RemoteKnowledgeStore (the real service in its own process, loopback)
vs the same backend in-process, plus append / read_range throughput of a large log.

Figures: small (100-byte) writes/s and reads/s with N concurrent tasks, for
memory and sqlite, in-process, remote, and remote with the read cache on
(``cache=True``: reads after the first fetch are served locally), and the ratios
remote / in-process and remote+cache / in-process; then a log grown to --log-mb MB by 64 KiB appends on sqlite and disk
(in-process): append MB/s, tail-follow read_range calls/s at the end of the big
log (each reads only the new bytes), and one full read_range(0) in MB/s.
Every measurement is bounded by --seconds (the log phase by its size). Run:
``.venv/bin/python -m bench.knowledge_bench`` (``--help`` for options).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from agentsdk.knowledge import (
    DiskKnowledgeStore,
    MemoryKnowledgeStore,
    RemoteKnowledgeStore,
    SqliteKnowledgeStore,
    StoreBase,
)

TOKEN = "bench-token-0123456789abcdef"
SMALL = "x" * 100
FILES = 256
CHUNK = "y" * (64 * 1024 - 1) + "\n"
_LISTENING = re.compile(r"listening on (\S+):(\d+)")


@contextmanager
def knowledge_service(backend: str, directory: Path) -> Iterator[str]:
    """Run ``python -m knowledgesvc`` on a free loopback port; yield its target."""
    tokens = directory / "tokens"
    tokens.write_text(f"{TOKEN} *\n")
    tokens.chmod(0o600)
    args = ["--host", "127.0.0.1", "--port", "0", "--backend", backend, "--data-dir", str(directory)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "knowledgesvc", *args, "--tokens-file", str(tokens), "--log-level", "WARNING"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 30
        for line in proc.stdout:
            match = _LISTENING.search(line)
            if match:
                break
            if time.monotonic() > deadline:
                raise RuntimeError("knowledge service did not start")
        else:
            raise RuntimeError("knowledge service exited before listening")
        yield f"{match.group(1)}:{match.group(2)}"
    finally:
        proc.terminate()
        proc.wait(30)


async def rate(op: Callable[[int], Awaitable[object]], seconds: float, concurrency: int) -> float:
    """Operations per second of ``op(i)`` run by ``concurrency`` tasks for ``seconds``."""
    done = 0
    deadline = time.perf_counter() + seconds

    async def worker(w: int) -> None:
        nonlocal done
        i = w
        while time.perf_counter() < deadline:
            await op(i)
            done += 1
            i += concurrency

    start = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(concurrency)))
    return done / (time.perf_counter() - start)


async def small_ops(store: StoreBase, seconds: float, concurrency: int) -> tuple[float, float]:
    """(writes/s, reads/s) of 100-byte files spread over FILES paths."""
    for i in range(FILES):
        await store.write(f"/small/{i}", SMALL)
    writes = await rate(lambda i: store.write(f"/small/{i % FILES}", SMALL), seconds, concurrency)
    reads = await rate(lambda i: store.read(f"/small/{i % FILES}"), seconds, concurrency)
    return writes, reads


async def log_throughput(store: StoreBase, megabytes: int, seconds: float) -> tuple[float, float, float]:
    """(append MB/s, tail read_range calls/s at the end of the log, full read_range MB/s)."""
    chunks = megabytes * 1024 * 1024 // len(CHUNK)
    start = time.perf_counter()
    for _ in range(chunks):
        await store.append("/log/big.log", CHUNK)
    append_mbs = chunks * len(CHUNK) / (time.perf_counter() - start) / 1e6

    # A follower reading only what was appended since its last offset, at the end of the big log.
    offset = await store.append("/log/big.log", "tail\n")
    follows = 0
    deadline = time.perf_counter() + seconds
    start = time.perf_counter()
    while time.perf_counter() < deadline:
        new = await store.read_range("/log/big.log", offset)
        offset += len(new.encode())
        await store.append("/log/big.log", "tail\n")
        follows += 1
    follow_rate = follows / (time.perf_counter() - start)

    start = time.perf_counter()
    size = len((await store.read_range("/log/big.log", 0)).encode())
    read_mbs = size / (time.perf_counter() - start) / 1e6
    return append_mbs, follow_rate, read_mbs


async def main(argv: list[str] | None = None) -> None:
    """Run every measurement and print the figures."""
    parser = argparse.ArgumentParser(prog="python -m bench.knowledge_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="duration of each rate measurement")
    parser.add_argument("--concurrency", type=int, default=16, help="concurrent tasks for small reads/writes")
    parser.add_argument("--log-mb", type=int, default=100, help="size of the big log in MB")
    args = parser.parse_args(argv)
    print(f"knowledge bench: {args.seconds:.0f} s per rate, {args.concurrency} concurrent tasks, loopback only")

    with tempfile.TemporaryDirectory(prefix="knowledge-bench-") as tmp:
        root = Path(tmp)
        print("\n== small ops (100-byte files) ==")
        print(f"{'backend':<8} {'where':<11} {'writes/s':>10} {'reads/s':>10}")
        remote_reads: dict[str, float] = {}
        for backend in ("memory", "sqlite"):
            local: StoreBase = (
                MemoryKnowledgeStore() if backend == "memory" else SqliteKnowledgeStore(root / "local.db")
            )
            async with local:
                local_w, local_r = await small_ops(local, args.seconds, args.concurrency)
            print(f"{backend:<8} {'in-process':<11} {local_w:>10.0f} {local_r:>10.0f}")
            service_dir = root / f"svc-{backend}"
            service_dir.mkdir()
            with knowledge_service(backend, service_dir) as target:
                async with RemoteKnowledgeStore(target, namespace="bench", credential=TOKEN) as remote:
                    remote_w, remote_r = await small_ops(remote, args.seconds, args.concurrency)
                cached_store = RemoteKnowledgeStore(target, namespace="bench-cache", credential=TOKEN, cache=True)
                async with cached_store:
                    cached_w, cached_r = await small_ops(cached_store, args.seconds, args.concurrency)
            remote_reads[backend] = remote_r
            print(f"{backend:<8} {'remote':<11} {remote_w:>10.0f} {remote_r:>10.0f}")
            print(f"{backend:<8} {'ratio r/i':<11} {remote_w / local_w:>10.2f} {remote_r / local_r:>10.2f}")
            print(f"{backend:<8} {'rem+cache':<11} {cached_w:>10.0f} {cached_r:>10.0f}")
            print(f"{backend:<8} {'ratio c/i':<11} {cached_w / local_w:>10.2f} {cached_r / local_r:>10.2f}")
            if backend == "sqlite":
                for label, ratio in (("remote", remote_r / local_r), ("remote+cache", cached_r / local_r)):
                    verdict = "met" if ratio >= 0.5 else "NOT met"
                    print(f"target {label}/in-process >= 0.50 for sqlite reads: {verdict} ({ratio:.2f})")
        # Remote memory reads do no storage work: they measure the gRPC round trip alone.
        print(
            f"remote sqlite reads reach {remote_reads['sqlite'] / remote_reads['memory']:.0%} of remote memory reads "
            "(the gRPC round-trip ceiling of this machine)"
        )

        print(f"\n== {args.log_mb} MB log, 64 KiB appends, in-process ==")
        print(f"{'backend':<8} {'append MB/s':>12} {'tail read_range/s':>18} {'full read MB/s':>15}")
        for backend in ("sqlite", "disk"):
            store: StoreBase = (
                SqliteKnowledgeStore(root / "log.db") if backend == "sqlite" else DiskKnowledgeStore(root / "disk")
            )
            async with store:
                append_mbs, follow_rate, read_mbs = await log_throughput(store, args.log_mb, args.seconds)
            print(f"{backend:<8} {append_mbs:>12.1f} {follow_rate:>18.0f} {read_mbs:>15.1f}")


if __name__ == "__main__":
    asyncio.run(main())
