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
        """Every row ``sql`` selects."""
        async with self.db.execute(sql, params) as cur:
            return list(await cur.fetchall())
