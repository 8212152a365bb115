"""SqliteKnowledgeStore under many concurrent readers and writers, cancellation and a second connection set."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from agentsdk.errors import NotFound
from agentsdk.knowledge import SqliteKnowledgeStore


async def test_many_concurrent_writers_and_readers(tmp_path: Path) -> None:
    writers, readers, rounds = 20, 20, 25
    async with SqliteKnowledgeStore(tmp_path / "k.db") as store:

        async def writer(w: int) -> None:
            for n in range(rounds):
                await store.write(f"/w/{w:02d}.md", f"{w}-{n}")
                await store.append("/log", f"{w:02d}-{n:02d}\n")
                assert await store.read(f"/w/{w:02d}.md") == f"{w}-{n}"  # read-your-writes
                if n % 5 == 4:
                    await store.delete(f"/w/{w:02d}.md")

        async def reader(r: int) -> None:
            rng = random.Random(r)
            for _ in range(rounds * 2):
                path = f"/w/{rng.randrange(writers):02d}.md"
                try:
                    text = await store.read(path)
                    assert text.split("-")[0] == str(int(path[3:5]))  # the writer's own content
                except NotFound:
                    pass
                await store.exists(path)
                assert all(name.endswith(".md") for name in await store.list("/w"))
                with_log = await store.exists("/log")
                if with_log:
                    log = await store.read_range("/log", 0)
                    assert all(len(line) == 5 for line in log.splitlines())

        await asyncio.gather(*(writer(w) for w in range(writers)), *(reader(r) for r in range(readers)))
        log = (await store.read("/log")).splitlines()
        assert sorted(log) == sorted(f"{w:02d}-{n:02d}" for w in range(writers) for n in range(rounds))
        assert await store.list("/w") == []  # every writer deleted its file last


async def test_cancelled_writers_leave_the_store_usable(tmp_path: Path) -> None:
    async with SqliteKnowledgeStore(tmp_path / "k.db") as store:
        tasks = [asyncio.create_task(store.append("/log", f"{i:03d}\n")) for i in range(200)]
        await asyncio.sleep(0)
        for task in tasks[::3]:
            task.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        landed = {r for r in results if isinstance(r, int)}
        # A cancelled caller's transaction still completes atomically or not at all; nothing is left half-open.
        await store.write("/after", "still works")
        assert await store.read("/after") == "still works"
        lines = (await store.read("/log")).splitlines()
        assert len(lines) == len(set(lines)) and all(len(line) == 3 for line in lines)
        for offset in landed:  # every completed append is where it said, whole
            assert (await store.read_range("/log", offset))[3] == "\n"
        assert len(lines) >= len(landed)


async def test_two_store_objects_on_one_file(tmp_path: Path) -> None:
    async with SqliteKnowledgeStore(tmp_path / "k.db") as one, SqliteKnowledgeStore(tmp_path / "k.db") as two:

        async def appender(store: SqliteKnowledgeStore, tag: str) -> list[int]:
            return [await store.append("/shared", f"{tag}{i:03d}\n") for i in range(100)]

        a, b = await asyncio.gather(appender(one, "a"), appender(two, "b"))
        assert sorted(a + b) == list(range(0, 200 * 5, 5))
        assert len((await two.read("/shared")).splitlines()) == 200


async def test_data_survives_reopening_and_namespaces_share_the_file(tmp_path: Path) -> None:
    async with SqliteKnowledgeStore(tmp_path / "k.db") as store:
        await store.write("/a", "root")
        await store.namespace("team").append("/a", "team")
    async with SqliteKnowledgeStore(tmp_path / "k.db") as store:
        assert await store.read("/a") == "root"
        assert await store.namespace("team").read("/a") == "team"
        assert await store.namespace("team").append("/a", "!") == 4
        with pytest.raises(NotFound):
            await store.namespace("other").read("/a")


async def test_wal_journal_mode(tmp_path: Path) -> None:
    import sqlite3

    async with SqliteKnowledgeStore(tmp_path / "k.db") as store:
        await store.write("/x", "y")
        with sqlite3.connect(tmp_path / "k.db") as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
