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
  (once a passive one still running has finished: :meth:`WalCheckpointer.idle`) before its next
  write (:meth:`SqliteWrites._apply <hubsvc.storage.sqlite.writes.SqliteWrites._apply>`).
  With every write on that one thread no other writer can keep the checkpoint from finishing,
  and the WAL file starts over: it stays bounded under any load, and only writing faster than
  passive checkpoints keep up waits.

A checkpoint that fails (a full disk, say) is logged and the next one tries again; it never
fails a commit. Durability is the commits' own: a checkpoint only moves committed pages.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
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
        self.due = False
        """The WAL is over :data:`MAX_WAL_FRAMES` pages: the store restarts it (then :meth:`restarted`)."""
        self.checkpoints = 0
        """Passive checkpoints finished since open (diagnostics)."""
        self.restarts = 0
        """RESTART checkpoints the store ran since open (diagnostics)."""

    def committed(self) -> None:
        """One commit is done: read the outcome of a finished checkpoint, and start the next one
        once ``every`` commits have passed."""
        self._commits += 1
        running = self._running
        if running is not None:
            if not running.done():
                self.due = self.due or self._commits >= 2 * self._every  # it cannot keep up
                return
            self._running = None
            try:
                _, frames, _ = running.result()
            except sqlite3.Error as exc:
                log.warning("a checkpoint of the WAL failed (%s); the next one tries again", exc)
            else:
                self.checkpoints += 1
                self.due = self.due or frames > self._max_frames
        if self._commits >= self._every and not self.due:
            self._commits = 0
            self._running = self._pool.submit(self._passive)

    async def idle(self) -> None:
        """Wait until no passive checkpoint runs (a RESTART would find it holding the checkpoint lock
        and give up at once: on a loaded machine, where its thread gets a core late, the WAL grew to
        10-19 MB while every write's RESTART came back busy). Its outcome is read here, not at a later
        commit: the RESTART that follows supersedes it."""
        running = self._running
        if running is None:
            return
        try:
            await asyncio.wrap_future(running)
        except sqlite3.Error as exc:
            log.warning("a checkpoint of the WAL failed (%s); the next one tries again", exc)
        else:
            self.checkpoints += 1
        finally:
            if self._running is running:
                self._running = None

    def restarted(self) -> None:
        """The store's thread restarted the WAL."""
        self.due = False
        self.restarts += 1

    def _passive(self) -> tuple[int, int, int]:
        """(busy, pages in the WAL, pages copied) of one passive checkpoint (the checkpointer's thread)."""
        row = self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return int(row[0]), int(row[1]), int(row[2])

    async def close(self) -> None:
        """Wait for a checkpoint in progress, then close the connection."""
        await asyncio.to_thread(self._pool.shutdown)
        self._conn.close()
