"""SQLite writes committed inline on an idle event loop (see hubsvc/storage/sqlite/writes.py).

A write that finds the loop with little else to do skips the hand-off to the database
thread. It must stay what a thread write is: grouped with the bundles queued with it, failing
one bad bundle alone, readable by every connection once answered, and it must not let the
WAL file grow without bound (the inline connection never checkpoints).
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from hubsvc.storage.base import WalRow, Writes
from hubsvc.storage.sqlite import INLINE_MAX_READY, SqliteHubStore
from hubsvc.storage.sqlite.checkpoints import CHECKPOINT_EVERY, MAX_WAL_FRAMES
from netkernel.errors import Unavailable


def row(channel_id: str, seq: int, data: bytes = b"x") -> WalRow:
    """A WAL row of ``channel_id`` at ``seq``."""
    return WalRow(
        channel_id, seq, f"{channel_id}-{seq}", "sender", "ag2.msg.text", None, None, "2026-01-01T00:00:00Z", data
    )


def seqs(db: Path, channel_id: str) -> list[int]:
    """The seqs the file holds for ``channel_id``, read through a connection of its own."""
    con = sqlite3.connect(db)
    try:
        return [r[0] for r in con.execute("SELECT seq FROM wal WHERE channel_id = ? ORDER BY seq", [channel_id])]
    finally:
        con.close()


PAGES_PER_COMMIT = 6
"""WAL pages one commit of a row of up to 4 KB adds: its table leaf and overflow page, the index
leaves, a split now and then (5.6 on average for 4 KB rows and 4 for 600-byte ones, measured with
no checkpoints)."""


def wal_pages(db: Path) -> int:
    """Pages the WAL file of ``db`` has room for: the most it ever held (SQLite starts a WAL over
    from its beginning and never shrinks the file here)."""
    con = sqlite3.connect(db)
    try:
        page_size = int(con.execute("PRAGMA page_size").fetchone()[0])
    finally:
        con.close()
    size = Path(f"{db}-wal").stat().st_size
    return max(0, size - 32) // (page_size + 24)  # a 32-byte header, then 24 bytes before each page


def busy_loop() -> None:
    """Leave more callbacks ready on the loop than an inline write lets wait, so the next submit is
    queued for the writer task."""
    for _ in range(INLINE_MAX_READY + 1):
        asyncio.get_running_loop().call_soon(lambda: None)


async def test_a_lone_write_on_an_idle_loop_commits_inline_and_is_read_by_other_connections(
    store: SqliteHubStore, tmp_path: Path
) -> None:
    fut = store.submit(Writes(wal=[row("a", 1)]))
    assert fut.done()  # the writer was idle: written at submit, not one loop turn later
    await fut
    assert store.inline_commits == 1
    assert seqs(tmp_path / "hub.db", "a") == [1]
    assert await store.read_wal("a", 1, 0, 0) == [b"x"]  # the thread's connection sees it too


async def test_a_few_ready_callbacks_still_let_a_write_go_inline_at_once(store: SqliteHubStore, tmp_path: Path) -> None:
    for _ in range(INLINE_MAX_READY):
        asyncio.get_running_loop().call_soon(lambda: None)
    written = store.submit(Writes(wal=[row("c", 1)]))
    assert written.done() and store.inline_commits == 1  # committed before submit returned
    busy_loop()
    queued = store.submit(Writes(wal=[row("c", 2)]))
    assert not queued.done()  # more ready: queued for the writer task
    await queued
    assert seqs(tmp_path / "hub.db", "c") == [1, 2]


async def test_bundles_queued_together_are_still_one_inline_group(store: SqliteHubStore, tmp_path: Path) -> None:
    busy_loop()
    futs = [store.submit(Writes(wal=[row("a", seq)])) for seq in (1, 2, 3)]
    await asyncio.gather(*futs)
    assert store.inline_commits == 1  # one statement for the three bundles
    assert seqs(tmp_path / "hub.db", "a") == [1, 2, 3]


async def test_a_bad_bundle_of_an_inline_group_fails_alone(store: SqliteHubStore, tmp_path: Path) -> None:
    await store.submit(Writes(wal=[row("a", 1)]))
    busy_loop()
    good = store.submit(Writes(wal=[row("a", 2)]))
    bad = store.submit(Writes(wal=[row("a", 1)]))  # the seq is taken: a genuine constraint failure
    other = store.submit(Writes(wal=[row("b", 1)]))
    await good
    with pytest.raises(Unavailable):
        await bad
    await other
    assert seqs(tmp_path / "hub.db", "a") == [1, 2]
    assert seqs(tmp_path / "hub.db", "b") == [1]
    with pytest.raises(Unavailable):  # the failed channel is fenced, inline as on the thread
        await store.submit(Writes(wal=[row("a", 3)]))
    assert store.inline_commits >= 2  # the first write and the retries of the group (one went inline at least)


async def test_a_lone_bad_write_fails_alone_and_fences_its_channel(store: SqliteHubStore, tmp_path: Path) -> None:
    await store.submit(Writes(wal=[row("a", 1)]))
    with pytest.raises(Unavailable):
        await store.submit(Writes(wal=[row("a", 1)]))
    with pytest.raises(Unavailable):
        await store.submit(Writes(wal=[row("a", 2)]))
    await store.submit(Writes(wal=[row("b", 1)]))
    await store.lift_fence("a")
    await store.submit(Writes(wal=[row("a", 2)]))
    assert seqs(tmp_path / "hub.db", "a") == [1, 2]
    assert seqs(tmp_path / "hub.db", "b") == [1]


async def test_the_wal_file_stays_bounded_under_inline_writes(store: SqliteHubStore, tmp_path: Path) -> None:
    data = bytes(4096)
    writes = 3000  # about 69 MB of WAL frames if nothing ever checkpointed
    for seq in range(1, writes + 1):
        await store.submit(Writes(wal=[row("a", seq, data)]))
    # A RESTART costs one write through the thread, and comes at most once every CHECKPOINT_EVERY commits.
    assert store.inline_commits > writes * 9 // 10
    assert len(seqs(tmp_path / "hub.db", "a")) == writes
    # The bound of hubsvc/storage/sqlite/checkpoints.py, however slowly the checkpointer's thread runs:
    # a passive checkpoint found at most MAX_WAL_FRAMES pages, and within 4 * CHECKPOINT_EVERY commits
    # of its start the store's thread restarted the WAL (waiting for a passive one still running).
    assert wal_pages(tmp_path / "hub.db") <= MAX_WAL_FRAMES + 4 * CHECKPOINT_EVERY * PAGES_PER_COMMIT


async def test_inline_writes_can_be_turned_off(tmp_path: Path) -> None:
    store = SqliteHubStore(tmp_path / "hub.db", inline_write_rows=0)
    await store.open()
    try:
        await store.submit(Writes(wal=[row("a", 1)]))
        assert store.inline_commits == 0
        assert seqs(tmp_path / "hub.db", "a") == [1]
    finally:
        await store.close()


async def test_a_write_larger_than_the_inline_limit_goes_through_the_thread(tmp_path: Path) -> None:
    store = SqliteHubStore(tmp_path / "hub.db", inline_write_rows=2)
    await store.open()
    try:
        await store.submit(Writes(wal=[row("a", 1), row("a", 2), row("a", 3)]))
        assert store.inline_commits == 0
        await store.submit(Writes(wal=[row("a", 4), row("a", 5)]))
        assert store.inline_commits == 1
        assert seqs(tmp_path / "hub.db", "a") == [1, 2, 3, 4, 5]
    finally:
        await store.close()


async def test_a_bundle_with_more_than_wal_rows_is_written_whole_through_the_thread(
    store: SqliteHubStore, tmp_path: Path
) -> None:
    await store.submit(Writes(wal=[row("a", 1)], audit=[("post_refused", "x", "a", "{}", 1.0)]))
    assert store.inline_commits == 0
    assert seqs(tmp_path / "hub.db", "a") == [1]
    assert [r.kind for r in await store.list_audit(kind="", subject_id="a", after_id=0, limit=10)] == ["post_refused"]
