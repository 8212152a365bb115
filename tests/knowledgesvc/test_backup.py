"""python -m knowledgesvc.backup: a copy of the sqlite and disk backends taken while a writer writes is one
moment of the store, and a store opened on the copy reads it (docs/operations.md "Data over time")."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentsdk.knowledge import DiskKnowledgeStore, SqliteKnowledgeStore
from knowledgestore.base import StoreBase
from knowledgesvc.backup import main as backup_main


async def _write_until(store: StoreBase, stop: asyncio.Event) -> int:
    """Write /n/<i> then /last = i, again and again: a copy of one moment has every /n/<i> up to /last."""
    i = 0
    while not stop.is_set():
        i += 1
        await store.write(f"/n/{i}", f"note {i}")
        await store.append("/log", f"{i}\n")
        await store.write("/last", str(i))
    return i


async def _check_copy(copy: StoreBase) -> int:
    last = int(await copy.read("/last"))
    assert await copy.read(f"/n/{last}") == f"note {last}"
    log = await copy.read("/log")
    assert log.splitlines()[:last] == [str(i) for i in range(1, last + 1)]
    return last


@pytest.mark.parametrize("backend", ["sqlite", "disk"])
async def test_a_copy_under_writes_is_one_moment(tmp_path: Path, backend: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    store: StoreBase = (
        SqliteKnowledgeStore(data / "knowledge.db") if backend == "sqlite" else DiskKnowledgeStore(data / "knowledge")
    )
    out = tmp_path / ("copy.db" if backend == "sqlite" else "copy")
    async with store:
        notes = store.namespace("team") if backend == "disk" else store
        await notes.write("/last", "0")
        stop = asyncio.Event()
        writer = asyncio.create_task(_write_until(notes, stop))
        await asyncio.sleep(0.2)
        args = ["--backend", backend, "--data-dir", str(data), str(out)]
        assert await asyncio.to_thread(backup_main, args) == 0
        await asyncio.sleep(0.1)  # writes go on after the copy
        stop.set()
        written = await writer
        assert await asyncio.to_thread(backup_main, args) == 2  # never over an existing copy
    copy: StoreBase = SqliteKnowledgeStore(out) if backend == "sqlite" else DiskKnowledgeStore(out)
    async with copy:
        last = await _check_copy(copy.namespace("team") if backend == "disk" else copy)
        assert 0 < last < written
        await (copy.namespace("team") if backend == "disk" else copy).write("/after", "restored and writable")


def test_a_missing_store_is_refused_and_nothing_is_created(tmp_path: Path) -> None:
    assert backup_main(["--backend", "sqlite", "--data-dir", str(tmp_path), str(tmp_path / "x.db")]) == 2
    assert not (tmp_path / "knowledge.db").exists()  # nothing created
