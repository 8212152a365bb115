"""SQLite (aiosqlite) implementation of :class:`HubStore` with group commit: :class:`SqliteHubStore`.

One connection, WAL journal mode. Group commit, failure isolation and fences are
:class:`~hubsvc.storage.group_commit.GroupCommitStore`'s: every bundle queued at one
moment becomes one transaction (:mod:`hubsvc.storage.sqlite.writes`, which also writes small
groups inline on an idle loop). ``synchronous=NORMAL`` (the default here) survives a killed
process without losing a committed transaction; ``FULL`` also survives power loss at the cost
of one fsync per group.
"""

from __future__ import annotations

from pathlib import Path

import aiosqlite

from hubsvc.storage.group_commit import GroupCommitStore, _Item
from hubsvc.storage.sqlite.checkpoints import WalCheckpointer
from hubsvc.storage.sqlite.history import SqliteHistory, open_history
from hubsvc.storage.sqlite.reads import SqliteReads
from hubsvc.storage.sqlite.schema import REPLY_INDEX, SCHEMA, add_causation_column
from hubsvc.storage.sqlite.writes import SqliteWrites, inline_connection
from netkernel.files import private_database
from netkernel.log_hygiene import mute_parameter_echo


class SqliteHubStore(SqliteReads, SqliteWrites, SqliteHistory, GroupCommitStore):
    """The default hub store: one SQLite file."""

    kind = "sqlite"

    def __init__(self, path: Path | str, *, synchronous: str = "NORMAL", inline_write_rows: int = 16) -> None:
        if synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ValueError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
        if inline_write_rows < 0:
            raise ValueError(f"inline_write_rows must be >= 0, not {inline_write_rows}")
        super().__init__()
        self._path = str(path)
        self._synchronous = synchronous.upper()
        self._inline_write_rows = inline_write_rows
        self._db = None
        self._inline = None
        self.inline_commits = 0
        self.checkpointer = None

    async def open(self) -> None:
        """Open the file, apply pragmas and schema, start the group-commit writer."""
        if self._path != ":memory:":
            private_database(Path(self._path))  # 0600 in a 0700 directory: messages, credential hashes
        mute_parameter_echo()  # nor into the log: aiosqlite's DEBUG records carry every parameter
        self._db = await aiosqlite.connect(self._path, isolation_level=None)
        await self._db.execute("PRAGMA journal_mode=WAL")
        await self._db.execute(f"PRAGMA synchronous={self._synchronous}")
        await self._db.execute("PRAGMA busy_timeout=5000")
        await self._db.execute("PRAGMA cache_size=-65536")
        await self._db.execute("PRAGMA wal_autocheckpoint=0")  # the checkpointer's job, never a commit's
        await self._db.executescript(SCHEMA)
        await add_causation_column(self._db)
        await self._db.execute(REPLY_INDEX)
        await open_history(self._db)
        if self._path not in ("", ":memory:"):  # a second connection to :memory: is another database
            self.checkpointer = WalCheckpointer(self._path)
            if self._inline_write_rows:
                self._inline = inline_connection(self._path, self._synchronous)
        self._start_writer()

    async def close(self) -> None:
        """Write everything queued, stop the writer and close the file."""
        await self._stop_writer()
        await self._close_history()
        if self.checkpointer is not None:
            await self.checkpointer.close()
            self.checkpointer = None
        if self._inline is not None:
            self._inline.close()
            self._inline = None
        if self._db is not None:
            await self._db.close()
            self._db = None

    def _committed(self, item: _Item) -> None:
        super()._committed(item)
        if self.checkpointer is not None:
            self.checkpointer.committed()

    def location(self) -> tuple[str, str]:
        """("sqlite", the database file's path)."""
        return ("sqlite", self._path)
