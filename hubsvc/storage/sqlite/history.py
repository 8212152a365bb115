"""Data over time on the SQLite hub store: online backup, size, and retention's purge.

* **A backup** is :func:`netkernel.sqlite_snapshot.copy_snapshot` on a thread. The one thing its
  long read holds up is a ``RESTART`` checkpoint, which waits for every reader of an older
  snapshot (:mod:`hubsvc.storage.sqlite.checkpoints`): the store's thread would stall every write
  behind it for up to its busy timeout. So the store holds RESTART checkpoints off for the copy
  (:meth:`WalCheckpointer.hold <hubsvc.storage.sqlite.checkpoints.WalCheckpointer.hold>`) after
  waiting, on its own database thread, for one already running; passive checkpoints go on, and
  the WAL file grows by what is committed during the copy.

* **When a channel ended** is recorded by triggers (:data:`HISTORY_SCHEMA`): the commit that turns a
  channel row ``live = 0`` inserts ``(channel_id, now)`` into ``channel_ends``, so the sweep finds
  the channels ended before a cutoff through an index, with no change to the write path. A
  database written before this gets its rows from the channels' ``closed_at`` at open.
* **Its type** is filled in by the sweep (a trigger cannot read a record): each sweep reads the
  records of the channels ended since the last one (:func:`_classify`), so it finds those due by
  type through the ``(type, ended_at)`` index, whatever the other types keep.
* **A purge** (:meth:`SqliteHistory.purge_channel`) runs on a connection and a thread of its own,
  in short transactions: first one that writes the tombstone and deletes the channel's row,
  membership, end time and cursors (from then on the channel answers NOT_FOUND, purged), then
  one per ``batch_rows`` WAL rows (its envelopes with their idempotency keys and reply-index
  entries: both are the WAL's own columns), then one marking the tombstone done. Each holds the
  write lock only that long; a group commit meeting it waits for it (SQLite's busy handler).
  A restart between them leaves a tombstone not done, whose WAL rows the next sweep deletes
  first: nothing purged comes back, nothing kept is deleted.
* **Freed pages** go to SQLite's free list and new rows reuse them, so under a steady churn the
  file levels off at the size the retained history needs (docs/operations.md has the figures). The
  file does not shrink by itself: incremental auto-vacuum would, but it keeps a pointer map that
  every commit updates (measured: it made passive checkpoints fall behind on the hot path), so a
  file that must shrink is given a ``VACUUM`` while the hub is stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiosqlite
from agentnet.v1 import channel_pb2

from hubsvc.storage.history import HistoryCounts, HistoryStore, Tombstone
from hubsvc.storage.sqlite.checkpoints import WalCheckpointer
from netkernel.sqlite_snapshot import BUSY_TIMEOUT_MS, copy_snapshot

HISTORY_SCHEMA = """
CREATE TABLE IF NOT EXISTS channel_ends (
  channel_id TEXT PRIMARY KEY, ended_at REAL NOT NULL, type TEXT) WITHOUT ROWID;
DROP INDEX IF EXISTS channel_ends_at;
CREATE INDEX IF NOT EXISTS channel_ends_type ON channel_ends(type, ended_at);
CREATE TABLE IF NOT EXISTS channel_tombstones (
  channel_id TEXT PRIMARY KEY, type TEXT NOT NULL, state INTEGER NOT NULL, close_reason TEXT NOT NULL,
  ended_at REAL NOT NULL, purged_at REAL NOT NULL, last_seq INTEGER NOT NULL, archive TEXT NOT NULL,
  done INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS channel_ended_insert AFTER INSERT ON channels WHEN new.live = 0
BEGIN INSERT OR IGNORE INTO channel_ends(channel_id, ended_at)
  VALUES (new.channel_id, (julianday('now') - 2440587.5) * 86400.0); END;
CREATE TRIGGER IF NOT EXISTS channel_ended_update AFTER UPDATE OF live ON channels WHEN new.live = 0
BEGIN INSERT OR IGNORE INTO channel_ends(channel_id, ended_at)
  VALUES (new.channel_id, (julianday('now') - 2440587.5) * 86400.0); END;
"""
"""The tables of ended and purged channels, and the triggers that record when a channel ended."""


CLASSIFY_ROWS = 500
"""Ended channels whose type one step of :func:`_classify` reads from their records."""


async def open_history(db: aiosqlite.Connection) -> None:
    """Create the history tables and triggers, and record when the channels ended before them did.
    A ``channel_ends`` table without its ``type`` column (written before retention per type) gets it,
    and its triggers are made anew (theirs name two columns)."""
    columns = [r[1] for r in await db.execute_fetchall("PRAGMA table_info(channel_ends)", [])]
    if columns and "type" not in columns:
        await db.executescript(
            "ALTER TABLE channel_ends ADD COLUMN type TEXT; DROP TRIGGER IF EXISTS channel_ended_insert; "
            "DROP TRIGGER IF EXISTS channel_ended_update;"
        )
    await db.executescript(HISTORY_SCHEMA)
    rows = await db.execute_fetchall(
        "SELECT channel_id, record FROM channels WHERE live = 0 "
        "AND channel_id NOT IN (SELECT channel_id FROM channel_ends)",
        [],
    )
    ends = []
    for channel_id, record in rows:
        meta = channel_pb2.ChannelMetadata.FromString(bytes(record))
        ends.append((channel_id, meta.closed_at.seconds + meta.closed_at.nanos / 1e9))
    if ends:
        await db.executemany("INSERT OR IGNORE INTO channel_ends(channel_id, ended_at) VALUES (?, ?)", ends)


def _file_sizes(*paths: str) -> int:
    """Bytes of the files among ``paths`` that exist."""
    return sum(os.path.getsize(p) for p in paths if os.path.exists(p))


def _purge_head(conn: sqlite3.Connection, channel_id: str, purged_at: float, archive: str) -> bool:
    """Write the tombstone and delete everything but the WAL rows, in one transaction; False when the
    channel is live, unknown or purged already (its tombstone done)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        row = conn.execute("SELECT live, record FROM channels WHERE channel_id = ?", (channel_id,)).fetchone()
        if row is None or row[0]:
            conn.execute("ROLLBACK")
            stone = conn.execute("SELECT done FROM channel_tombstones WHERE channel_id = ?", (channel_id,)).fetchone()
            return stone is not None and not stone[0]  # a purge a restart interrupted: finish it
        meta = channel_pb2.ChannelMetadata.FromString(bytes(row[1]))
        ended = conn.execute("SELECT ended_at FROM channel_ends WHERE channel_id = ?", (channel_id,)).fetchone()
        ended_at = float(ended[0]) if ended else meta.closed_at.seconds + meta.closed_at.nanos / 1e9
        conn.execute(
            "INSERT OR REPLACE INTO channel_tombstones(channel_id, type, state, close_reason, ended_at, purged_at, "
            "last_seq, archive, done) VALUES (?,?,?,?,?,?,?,?,0)",
            (channel_id, meta.type, int(meta.state), meta.close_reason, ended_at, purged_at, meta.last_seq, archive),
        )
        for table in ("channels", "channel_members", "channel_ends", "cursors"):
            conn.execute(f"DELETE FROM {table} WHERE channel_id = ?", (channel_id,))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return True


def _classify(conn: sqlite3.Connection) -> None:
    """Fill in the type of the ended channels recorded without it (the triggers cannot read a record),
    :data:`CLASSIFY_ROWS` a transaction: each ended channel is read once in its life."""
    while True:
        rows = conn.execute(
            "SELECT e.channel_id, c.record FROM channel_ends e LEFT JOIN channels c USING (channel_id) "
            "WHERE e.type IS NULL LIMIT ?",
            (CLASSIFY_ROWS,),
        ).fetchall()
        if not rows:
            return
        types = [
            (channel_pb2.ChannelMetadata.FromString(bytes(record)).type if record is not None else "", channel_id)
            for channel_id, record in rows
        ]
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany("UPDATE channel_ends SET type = ? WHERE channel_id = ?", types)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        if len(rows) < CLASSIFY_ROWS:
            return


def _ended_before(conn: sqlite3.Connection, cutoffs: Mapping[str, float], limit: int) -> list[str]:
    """Unfinished purges first, then, by type through ``channel_ends_type``, channels ended before their
    type's cutoff, oldest end first."""
    ids = [r[0] for r in conn.execute("SELECT channel_id FROM channel_tombstones WHERE done = 0 LIMIT ?", (limit,))]
    if len(ids) >= limit or not cutoffs:
        return ids
    _classify(conn)
    due: list[tuple[float, str]] = []
    for channel_type, cutoff in cutoffs.items():
        due += conn.execute(
            "SELECT ended_at, channel_id FROM channel_ends WHERE type = ? AND ended_at < ? ORDER BY ended_at LIMIT ?",
            (channel_type, cutoff, limit - len(ids)),
        ).fetchall()
    ids += [channel_id for _, channel_id in sorted(due) if channel_id not in ids]
    return ids[:limit]


def _purge_audit_step(conn: sqlite3.Connection, before: float, batch_rows: int) -> int:
    """Delete those of the ``batch_rows`` oldest audit records (by id: the order they were written in)
    created before ``before`` (one self-committing statement that reads no more than those rows)."""
    cur = conn.execute(
        "DELETE FROM audit WHERE audit_id IN (SELECT audit_id FROM audit ORDER BY audit_id LIMIT ?) AND created_at < ?",
        (batch_rows, before),
    )
    return int(cur.rowcount)


def _purge_wal_step(conn: sqlite3.Connection, channel_id: str, batch_rows: int) -> int:
    """Delete up to ``batch_rows`` of the channel's WAL rows (one self-committing statement)."""
    cur = conn.execute(
        "DELETE FROM wal WHERE channel_id = ? AND seq IN "
        "(SELECT seq FROM wal WHERE channel_id = ? ORDER BY seq LIMIT ?)",
        (channel_id, channel_id, batch_rows),
    )
    return int(cur.rowcount)


class SqliteHistory(HistoryStore):
    """Backup, size and purge of :class:`~hubsvc.storage.sqlite.store.SqliteHubStore` (a mixin: the
    store sets the path and opens the main connection)."""

    _path: str
    _db: aiosqlite.Connection | None
    checkpointer: WalCheckpointer | None
    _purger: sqlite3.Connection | None = None
    _purge_lock: asyncio.Lock | None = None
    _backup_lock: asyncio.Lock | None = None

    def _main(self) -> aiosqlite.Connection:
        if self._db is None:
            raise RuntimeError("SqliteHubStore is not open; call open() first")
        return self._db

    def _in_memory(self) -> bool:
        return self._path in ("", ":memory:")

    @property
    def purges(self) -> bool:
        """Retention runs on a database file (its purges use a second connection, which a database in
        memory cannot have)."""
        return not self._in_memory()

    # -- backup -------------------------------------------------------------------------

    def backup_running(self) -> bool:
        """Whether a backup of this store is being copied now."""
        return self._backup_lock is not None and self._backup_lock.locked()

    async def backup_to(self, target: Path) -> float:
        """Copy the database as of one moment into ``target`` (:mod:`hubsvc.storage.sqlite.backup`)."""
        if self._in_memory():
            raise ValueError("a database in memory has no file to back up")
        if self._backup_lock is None:
            self._backup_lock = asyncio.Lock()
        async with self._backup_lock:
            checkpointer = self.checkpointer
            with checkpointer.hold() if checkpointer is not None else contextlib.nullcontext():
                # A RESTART checkpoint queued before the hold runs on the store's thread: wait it out
                # there, so the copy never starts reading while one waits for readers.
                await self._main().execute_fetchall("SELECT 1", [])
                return await asyncio.to_thread(copy_snapshot, self._path, target)

    def backup_dir(self) -> Path:
        """A new private (0700) directory beside the database for a backup's temporary file."""
        return Path(tempfile.mkdtemp(prefix=".agentnet-backup-", dir=Path(self._path).resolve().parent))

    # -- size and counts ----------------------------------------------------------------

    async def history_counts(self) -> HistoryCounts:
        """Ended channels kept, channels purged, and the file's size (database plus its WAL file). The
        counts walk two indexes: on a file, on retention's connection and thread, so the store's own
        thread (its commits) never waits for them."""
        if self._in_memory():
            db = self._main()
            ((kept,),) = await db.execute_fetchall("SELECT count(*) FROM channel_ends", [])
            ((purged,),) = await db.execute_fetchall("SELECT count(*) FROM channel_tombstones", [])
            return HistoryCounts(ended_kept=int(kept), purged=int(purged), size_bytes=-1)

        def counts(conn: sqlite3.Connection) -> tuple[int, int]:
            (kept,) = conn.execute("SELECT count(*) FROM channel_ends").fetchone()
            (purged,) = conn.execute("SELECT count(*) FROM channel_tombstones").fetchone()
            return int(kept), int(purged)

        kept, purged = await self._run(counts)
        size = await asyncio.to_thread(_file_sizes, self._path, self._path + "-wal")
        return HistoryCounts(ended_kept=kept, purged=purged, size_bytes=size)

    # -- purge --------------------------------------------------------------------------

    async def ended_before(self, cutoffs: Mapping[str, float], limit: int) -> list[str]:
        """Unfinished purges first, then channels ended before their type's cutoff, oldest first (on
        retention's connection and thread, which also fills in the types of channels ended since)."""
        if self._in_memory():
            return []
        return list(await self._run(_ended_before, dict(cutoffs), limit))

    async def purge_audit(self, before: float, batch_rows: int) -> int:
        """Delete the audit records created before ``before`` among the ``batch_rows`` oldest."""
        if self._in_memory():
            return 0
        return int(await self._run(_purge_audit_step, before, batch_rows))

    async def _run(self, fn: Any, *args: Any) -> Any:
        """Run ``fn(purge connection, *args)`` on a thread, one at a time."""
        if self._purge_lock is None:
            self._purge_lock = asyncio.Lock()
        async with self._purge_lock:
            if self._purger is None:
                conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
                conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
                conn.execute("PRAGMA wal_autocheckpoint=0")  # the checkpointer's job
                self._purger = conn
            return await asyncio.to_thread(fn, self._purger, *args)

    async def purge_channel(self, channel_id: str, *, purged_at: float, archive: str, batch_rows: int) -> int | None:
        """Tombstone, then the WAL in steps of ``batch_rows`` rows, then the tombstone marked done."""
        if not await self._run(_purge_head, channel_id, purged_at, archive):
            return None
        deleted = 0
        while True:
            step = int(await self._run(_purge_wal_step, channel_id, batch_rows))
            deleted += step
            if step < batch_rows:
                break
            await asyncio.sleep(0)  # writers queued meanwhile go first
        await self._run(
            lambda conn: conn.execute("UPDATE channel_tombstones SET done = 1 WHERE channel_id = ?", (channel_id,))
        )
        return deleted

    async def tombstone(self, channel_id: str) -> Tombstone | None:
        """The channel's tombstone, if retention purged it."""
        rows = await self._main().execute_fetchall(
            "SELECT channel_id, type, state, close_reason, ended_at, purged_at, last_seq, archive "
            "FROM channel_tombstones WHERE channel_id = ?",
            [channel_id],
        )
        if not rows:
            return None
        r = next(iter(rows))
        return Tombstone(r[0], r[1], int(r[2]), r[3], float(r[4]), float(r[5]), int(r[6]), r[7])

    async def _close_history(self) -> None:
        """Close the purge connection."""
        if self._purge_lock is not None:
            async with self._purge_lock:
                if self._purger is not None:
                    self._purger.close()
                    self._purger = None
