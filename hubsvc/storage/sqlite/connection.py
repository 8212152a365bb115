"""The SQLite hub store's connection, shared by its reads and writes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import aiosqlite


class SqliteConnection:
    """The open aiosqlite connection of :class:`~hubsvc.storage.sqlite.store.SqliteHubStore` (a
    mixin of its reads and writes: the store opens and closes it)."""

    _db: aiosqlite.Connection | None = None

    @property
    def db(self) -> aiosqlite.Connection:
        """The open connection."""
        if self._db is None:
            raise RuntimeError("SqliteHubStore is not open; call open() first")
        return self._db

    async def _fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Every row ``sql`` selects, read in one step on the connection's thread: a cursor left open
        between two steps would hold a read transaction under which a write queued meanwhile on this
        connection (the group commit's ``BEGIN IMMEDIATE``) fails at once as busy when another
        connection (inline writes, retention's purge) committed since."""
        return list(await self.db.execute_fetchall(sql, params))
