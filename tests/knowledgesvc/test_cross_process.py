"""Two OS processes sharing one Redis store and one Disk store."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from agentsdk.knowledge import DiskKnowledgeStore, RedisKnowledgeStore, StoreBase
from tests.knowledgesvc.conftest import unique_name
from tests.knowledgesvc.helpers import Recorder, assert_eventually

ROOT = Path(__file__).resolve().parents[2]


async def run_writer(*args: str) -> list[int]:
    """Run ``tests.knowledgesvc.writer_proc`` with ``args``; return the offsets it printed."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.knowledgesvc.writer_proc",
        *args,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, err.decode()
    return [int(line) for line in out.decode().split()]


async def _sees_other_process(store: StoreBase, backend: str, location: str) -> None:
    recorder = Recorder()
    await store.on_change("/shared/", recorder)
    text = "from another process: héllo"
    size = len(text.encode())
    assert await run_writer(backend, location, "write", "/shared/note.md", text) == [size]
    expected = [
        ("/shared/note.md", "written", 0, size, 1),
        ("/shared/note.md", "appended", size, size + len(" + appended"), 2),
    ]

    def delivered() -> None:
        assert recorder.summary() == expected

    await assert_eventually(delivered)
    assert await store.read("/shared/note.md") == text + " + appended"


async def _appends_interleave_atomically(store: StoreBase, backend: str, location: str) -> None:
    count = 150

    async def local() -> list[int]:
        return [await store.append("/shared/log", f"loc-cc line-{i:04d} ✓\n") for i in range(count)]

    results = await asyncio.gather(
        run_writer(backend, location, "append-lines", "/shared/log", "proc-a", str(count)),
        run_writer(backend, location, "append-lines", "/shared/log", "proc-b", str(count)),
        local(),
    )
    content = await store.read("/shared/log")
    lines = content.splitlines()
    expected = {f"{tag} line-{i:04d} ✓" for tag in ("proc-a", "proc-b", "loc-cc") for i in range(count)}
    assert len(lines) == 3 * count and set(lines) == expected
    data = content.encode()
    line_bytes = len("loc-cc line-0000 ✓\n".encode())  # every line has the same length
    offsets = sorted(offset for chunk in results for offset in chunk)
    assert offsets == list(range(0, len(data), line_bytes))


async def test_redis_store_shared_between_processes(redis_url: str) -> None:
    prefix = f"test:{unique_name()}:"
    async with RedisKnowledgeStore(redis_url, prefix=prefix) as store:
        await _sees_other_process(store, "redis", f"{redis_url}#{prefix}")
        await _appends_interleave_atomically(store, "redis", f"{redis_url}#{prefix}")


async def test_disk_store_shared_between_processes(tmp_path: Path) -> None:
    async with DiskKnowledgeStore(tmp_path / "shared") as store:
        await _sees_other_process(store, "disk", str(tmp_path / "shared"))
        await _appends_interleave_atomically(store, "disk", str(tmp_path / "shared"))
