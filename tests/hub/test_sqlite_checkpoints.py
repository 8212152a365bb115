"""The SQLite store's WAL checkpoints run beside the commits, never inside one
(hubsvc/storage/sqlite/checkpoints.py): no connection of the store checkpoints in a commit, passive
checkpoints keep the WAL file small under light load, and when they cannot keep up the store's
thread restarts the WAL before its next write, with nothing written inline meanwhile."""

from __future__ import annotations

import asyncio
from pathlib import Path

from hubsvc.storage.base import Writes
from hubsvc.storage.sqlite import SqliteHubStore
from hubsvc.storage.sqlite.checkpoints import WalCheckpointer
from tests.hub.test_sqlite_inline_writes import row, seqs


async def test_no_connection_of_the_store_checkpoints_in_a_commit(store: SqliteHubStore) -> None:
    rows = list(await store.db.execute_fetchall("PRAGMA wal_autocheckpoint", []))
    assert rows[0][0] == 0
    assert store._inline is not None and store._inline.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
    assert store.checkpointer is not None


async def test_passive_checkpoints_keep_the_wal_small_under_light_load(store: SqliteHubStore, tmp_path: Path) -> None:
    writes = 2000  # about 24 MB of WAL frames (3 pages a commit) if nothing checkpointed
    for seq in range(1, writes + 1):
        await store.submit(Writes(wal=[row("a", seq, bytes(600))]))
        await asyncio.sleep(0)  # the loop turns between posts, as it does between a hub's frames
    assert store.checkpointer is not None and store.checkpointer.checkpoints >= writes // 100
    assert store.inline_commits > writes * 9 // 10
    # The WAL holds what commits added since the last checkpoint that caught up: MAX_WAL_FRAMES pages,
    # plus up to 3 * CHECKPOINT_EVERY commits' pages while a checkpoint runs (about 4 MB here); how
    # far past that it gets depends on how fast the checkpointer's thread is scheduled, so the bound
    # has room for a loaded machine and is still a third of what no checkpoints would leave.
    assert (tmp_path / "hub.db-wal").stat().st_size < 8 * 1024 * 1024
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
