"""Checkpoints of the SQLite hub store's WAL file, off the commit path.

SQLite's own automatic checkpoint runs inside the commit that finds the WAL over 1,000 pages:
that commit, and every post queued behind it, waits while the checkpoint copies the pages into
the database file and syncs both files — a few milliseconds every few hundred commits, which
was most of the hub's round-trip p99. So the store's connections never checkpoint
(``wal_autocheckpoint=0``); :class:`WalCheckpointer` does, on a connection and a thread of its own:

* every :data:`CHECKPOINT_EVERY` commits a ``PASSIVE`` checkpoint, which neither waits for nor
  blocks writers: commits go on while it copies, and once it has copied everything the next
  commit starts the WAL file over. It is started and its outcome read at a commit, so it runs
  even while the event loop is busy with a burst of inline writes;
* when the WAL held more than :data:`MAX_WAL_FRAMES` pages after a passive checkpoint (writes came
  too fast for it to catch up, so the file was not started over), or a passive checkpoint is
  still running after twice :data:`CHECKPOINT_EVERY` commits, :attr:`WalCheckpointer.due` says so:
  the store then writes nothing inline, and its database thread runs a ``RESTART`` checkpoint
  before its next write (:meth:`SqliteWrites._apply <hubsvc.storage.sqlite.writes.SqliteWrites._apply>`).
  With every write on that one thread no other writer can keep the checkpoint from finishing,
  and the WAL file starts over: it stays bounded under any load, and only writing faster than
  passive checkpoints keep up waits.

Only one checkpoint of a database runs at a time, and SQLite answers a second one "busy" at once.
So a RESTART that finds the passive checkpoint still running (its thread was starved of CPU, or
its fsync is slow) waits for it (:meth:`WalCheckpointer.passive_done`) and runs then: the write
behind it waits too, instead of growing the WAL for as long as the passive one takes. After a
RESTART the commits are counted from zero, and the outcome of the passive checkpoint it waited
for (the WAL before it started over) asks for nothing. Between a passive checkpoint that found at
most :data:`MAX_WAL_FRAMES` pages and the next RESTART at most about ``4 * every`` commits pass, so
the WAL never holds more than :data:`MAX_WAL_FRAMES` pages plus those commits' pages.

A checkpoint that fails (a full disk, say) is logged and the next one tries again; it never
fails a commit. Durability is the commits' own: a checkpoint only moves committed pages.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

log = logging.getLogger("agentnet.hub.storage")

CHECKPOINT_EVERY = 50
"""Commits between passive checkpoints (a commit of a few WAL rows adds two to four pages)."""
MAX_WAL_FRAMES = 500
"""Pages the WAL may hold after a passive checkpoint before the store's thread restarts it."""


class WalCheckpointer:
    """Passive checkpoints of the WAL of the database at ``path`` every ``every`` commits
    (:meth:`committed`), and the flag (:attr:`due`) asking the store for a RESTART one."""

    def __init__(self, path: str, *, every: int = CHECKPOINT_EVERY, max_frames: int = MAX_WAL_FRAMES) -> None:
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA wal_autocheckpoint=0")
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hub-wal-checkpoint")
        self._every = every
        self._max_frames = max_frames
        self._commits = 0
        self._running: Future[tuple[int, int, int]] | None = None
        self._due = False
        self._holds = 0
        self.checkpoints = 0
        """Passive checkpoints run to their end since open (diagnostics)."""
        self.restarts = 0
        """RESTART checkpoints the store ran since open (diagnostics)."""

    def committed(self) -> None:
        """One commit is done: read the outcome of a finished checkpoint, and start the next one
        once ``every`` commits have passed."""
        self._commits += 1
        running = self._running
        if running is not None:
            if not running.done():
                self._due = self._due or self._commits >= 2 * self._every  # it cannot keep up
                return
            self._running = None
            frames = self._outcome(running)
            self._due = self._due or frames > self._max_frames
        if self._commits >= self._every and not self._due:
            self._commits = 0
            self._running = self._pool.submit(self._passive)

    @property
    def due(self) -> bool:
        """The WAL is over :data:`MAX_WAL_FRAMES` pages: the store restarts it (then :meth:`restarted`).
        Never while a backup reads (:meth:`hold`): a RESTART checkpoint waits for every reader of an
        older snapshot, so it would hold every write behind it for as long as the backup reads."""
        return self._due and not self._holds

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """No RESTART checkpoint until the block ends (a backup reading one snapshot meanwhile):
        passive checkpoints go on, and the WAL file grows by what is committed meanwhile."""
        self._holds += 1
        try:
            yield
        finally:
            self._holds -= 1

    async def passive_done(self) -> bool:
        """Wait for the passive checkpoint started last, if it is still running (it holds the lock a
        RESTART needs); True if there was one (it may have finished just now, its outcome unread)."""
        running = self._running
        if running is None:
            return False
        try:
            await asyncio.wrap_future(running)
        except sqlite3.Error:
            pass  # read and logged with its outcome
        return True

    def restarted(self) -> None:
        """The store's thread restarted the WAL: commits count from zero again, and a passive
        checkpoint that finished before it (it measured the WAL before the restart) asks for nothing."""
        self._due = False
        self.restarts += 1
        self._commits = 0
        running = self._running
        if running is not None and running.done():
            self._running = None
            self._outcome(running)

    def _outcome(self, running: Future[tuple[int, int, int]]) -> int:
        """Pages in the WAL a finished passive checkpoint found (-1 if it failed or found another
        checkpoint running); counts it in :attr:`checkpoints` if it ran."""
        try:
            busy, frames, _ = running.result()
        except sqlite3.Error as exc:
            log.warning("a checkpoint of the WAL failed (%s); the next one tries again", exc)
            return -1
        if busy:
            return -1  # a RESTART held the lock: it did this one's work
        self.checkpoints += 1
        return frames

    def _passive(self) -> tuple[int, int, int]:
        """(busy, pages in the WAL, pages copied) of one passive checkpoint (the checkpointer's thread)."""
        row = self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return int(row[0]), int(row[1]), int(row[2])

    async def close(self) -> None:
        """Wait for a checkpoint in progress, then close the connection."""
        await asyncio.to_thread(self._pool.shutdown)
        self._conn.close()
