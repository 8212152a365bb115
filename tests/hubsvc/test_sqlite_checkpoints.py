"""The SQLite store's WAL checkpoints run beside the commits, never inside one
(hubsvc/storage/sqlite/checkpoints.py): no connection of the store checkpoints in a commit, passive
checkpoints keep the WAL file small under light load, and when they cannot keep up (writes too fast,
or their thread starved of CPU) the store's thread restarts the WAL before its next write, with
nothing written inline meanwhile. How far the WAL may grow under sustained writes is tested in
test_sqlite_inline_writes.py."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from hubsvc.storage.base import Writes
from hubsvc.storage.sqlite import SqliteHubStore
from hubsvc.storage.sqlite.checkpoints import CHECKPOINT_EVERY, MAX_WAL_FRAMES, WalCheckpointer
from tests.eventually import DEFAULT_TIMEOUT
from tests.hubsvc.test_sqlite_inline_writes import PAGES_PER_COMMIT, row, seqs, wal_pages


async def test_no_connection_of_the_store_checkpoints_in_a_commit(store: SqliteHubStore) -> None:
    rows = list(await store.db.execute_fetchall("PRAGMA wal_autocheckpoint", []))
    assert rows[0][0] == 0
    assert store._inline is not None and store._inline.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
    assert store.checkpointer is not None


async def test_passive_checkpoints_keep_the_wal_small_under_light_load(store: SqliteHubStore, tmp_path: Path) -> None:
    checkpointer = store.checkpointer
    assert checkpointer is not None
    batches = 40  # 2,000 commits: about 32 MB of WAL frames (4 pages a commit) if nothing checkpointed
    seq = 0
    for _ in range(batches):
        for _ in range(CHECKPOINT_EVERY):
            seq += 1
            await store.submit(Writes(wal=[row("a", seq, bytes(600))]))
            await asyncio.sleep(0)  # the loop turns between posts, as it does between a hub's frames
        # Light load: the passive checkpoint this batch's last commit started ends before the next
        # commit, however long a loaded machine takes to schedule the checkpointer's thread.
        assert await asyncio.wait_for(checkpointer.passive_done(), DEFAULT_TIMEOUT)
    seq += 1
    await store.submit(Writes(wal=[row("a", seq)]))  # reads the last one's outcome
    assert checkpointer.checkpoints == batches  # one every CHECKPOINT_EVERY commits, each run to its end
    assert checkpointer.restarts == 0 and not checkpointer.due  # the passive ones alone kept the WAL small
    assert store.inline_commits > seq * 9 // 10
    assert wal_pages(tmp_path / "hub.db") <= MAX_WAL_FRAMES  # each caught up: the next commit started it over
    assert len(seqs(tmp_path / "hub.db", "a")) == seq


async def test_a_starved_checkpointer_thread_neither_grows_the_wal_nor_stops_inline_writes(
    store: SqliteHubStore, tmp_path: Path
) -> None:
    checkpointer = store.checkpointer
    assert checkpointer is not None
    release = threading.Event()
    checkpointer._pool.submit(release.wait)  # its one thread gets no CPU: passive checkpoints only queue
    try:
        writes = 1000
        for seq in range(1, writes + 1):
            await store.submit(Writes(wal=[row("a", seq, bytes(600))]))
        # Every 2 * CHECKPOINT_EVERY commits the passive checkpoint is overdue and the store's thread
        # restarts the WAL before one write (not before every write); the writes between stay inline.
        assert writes // (2 * CHECKPOINT_EVERY + 1) <= checkpointer.restarts <= writes // (2 * CHECKPOINT_EVERY)
        assert checkpointer.checkpoints == 0
        assert store.inline_commits >= writes - 2 * checkpointer.restarts
        assert wal_pages(tmp_path / "hub.db") <= MAX_WAL_FRAMES + 2 * CHECKPOINT_EVERY * PAGES_PER_COMMIT
    finally:
        release.set()
    assert len(seqs(tmp_path / "hub.db", "a")) == writes


async def test_a_wal_passive_checkpoints_cannot_keep_small_is_restarted_by_the_thread(
    store: SqliteHubStore, tmp_path: Path
) -> None:
    assert store.checkpointer is not None
    await store.checkpointer.close()
    checkpointer = store.checkpointer = WalCheckpointer(str(tmp_path / "hub.db"), every=1, max_frames=0)
    await store.submit(Writes(wal=[row("a", 1)]))  # starts a passive checkpoint
    for _ in range(200):
        if checkpointer._running is not None and checkpointer._running.done():
            break
        await asyncio.sleep(0.01)
    await store.submit(Writes(wal=[row("a", 2)]))  # reads its outcome: the WAL holds pages, so a RESTART is due
    assert checkpointer.due
    inline = store.inline_commits
    await store.submit(Writes(wal=[row("a", 3)]))  # through the thread, which restarts the WAL first
    assert store.inline_commits == inline
    assert checkpointer.restarts == 1 and not checkpointer.due
    assert seqs(tmp_path / "hub.db", "a") == [1, 2, 3]
