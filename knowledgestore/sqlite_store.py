"""SqliteKnowledgeStore: one SQLite file (WAL mode) through aiosqlite.

Layout: ``knowledge_files`` holds each file's size and version;
``knowledge_chunks`` holds its bytes as one row per write or append, keyed by
start offset. Appends therefore cost only the appended bytes, and
``read_range`` reads only the chunks from the offset on.

Concurrency: one writer connection runs one transaction at a time under an
asyncio lock (``BEGIN IMMEDIATE`` … ``COMMIT``); a cancelled caller cannot leave
a transaction half-open because the transaction runs shielded in its own task.
Reads use a pool of separate connections, which in WAL mode see only committed
data and never block the writer. ``on_change`` reports changes made through
this process's store objects only.
"""

from __future__ import annotations

import asyncio
import builtins
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from knowledgestore.base import ReadWithin, StoreBase
from knowledgestore.feed import ChangeFeed
from knowledgestore.paths import (
    ancestors,
    dir_prefix,
    directory_blocks_file,
    file_blocks_path,
    file_path,
    immediate_children,
    normalize_path,
)
from knowledgestore.text import MAX_QUERY_OFFSET, check_offset, decode_text, encode_text, query_offset
from knowledgestore.types import AppendResult, ChangeCallback, ChangeEvent, FileInfo, Subscription
from netkernel.errors import AgentNetError, NotFound
from netkernel.files import private_database
from netkernel.log_hygiene import mute_parameter_echo

T = TypeVar("T")
Row = Sequence[Any]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS knowledge_files (
    namespace TEXT NOT NULL,
    path TEXT NOT NULL,
    size INTEGER NOT NULL,
    version INTEGER NOT NULL,
    PRIMARY KEY (namespace, path)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS knowledge_chunks (
    namespace TEXT NOT NULL,
    path TEXT NOT NULL,
    start INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (namespace, path, start)
);
"""

_UPSERT_WRITE = """
INSERT INTO knowledge_files (namespace, path, size, version) VALUES (?, ?, ?, 1)
ON CONFLICT (namespace, path) DO UPDATE
SET size = excluded.size, version = knowledge_files.version + 1
RETURNING size, version
"""

_UPSERT_APPEND = """
INSERT INTO knowledge_files (namespace, path, size, version) VALUES (?, ?, ?, 1)
ON CONFLICT (namespace, path) DO UPDATE
SET size = knowledge_files.size + excluded.size, version = knowledge_files.version + 1
RETURNING size, version
"""

_READ = """
SELECT f.size, f.version, c.data
FROM knowledge_files AS f
LEFT JOIN knowledge_chunks AS c ON c.namespace = f.namespace AND c.path = f.path
WHERE f.namespace = ? AND f.path = ?
ORDER BY c.start
"""

# As _READ, but the chunks are joined only when the file is at most ? bytes long: a bigger file
# yields its one files row (data NULL) and nothing of its content is loaded.
_READ_WITHIN = """
SELECT f.size, f.version, c.data
FROM knowledge_files AS f
LEFT JOIN knowledge_chunks AS c ON f.size <= ? AND c.namespace = f.namespace AND c.path = f.path
WHERE f.namespace = ? AND f.path = ?
ORDER BY c.start
"""

# As _READ_WITHIN for every path of the JSON array ?3 at once (one snapshot, one thread hop).
_READ_MANY_WITHIN = """
SELECT f.path, f.size, f.version, c.data
FROM knowledge_files AS f
LEFT JOIN knowledge_chunks AS c ON f.size <= ?1 AND c.namespace = f.namespace AND c.path = f.path
WHERE f.namespace = ?2 AND f.path IN (SELECT value FROM json_each(?3))
ORDER BY f.path, c.start
"""

# One statement, so the size and the chunks come from the same snapshot. The
# sub-select finds the chunk containing the offset through the primary key.
# ?4 bounds the bytes from the offset on: more than that and no chunk is joined (nothing loaded).
_READ_RANGE = """
SELECT f.size, c.start, c.data
FROM knowledge_files AS f
LEFT JOIN knowledge_chunks AS c ON f.size - min(?1, f.size) <= ?4
    AND c.namespace = f.namespace AND c.path = f.path AND c.start >= (
        SELECT coalesce(max(start), 0) FROM knowledge_chunks
        WHERE namespace = f.namespace AND path = f.path AND start <= ?1
    )
WHERE f.namespace = ?2 AND f.path = ?3
ORDER BY c.start
"""


async def _connect(path: Path) -> aiosqlite.Connection:
    """An aiosqlite connection whose worker thread is a daemon.

    aiosqlite runs each connection in a non-daemon thread, so a store nobody closed kept the
    interpreter from exiting, forever. As a daemon the thread ends with the interpreter: every
    awaited write has committed by then, and SQLite rolls back anything unfinished (and folds
    the ``-wal`` file in) on the next open. :meth:`StoreBase.close` still closes it cleanly.
    """
    mute_parameter_echo()  # aiosqlite's DEBUG records carry every parameter: agents' memory
    connection = aiosqlite.connect(path, isolation_level=None)  # the thread starts when awaited
    connection._thread.daemon = True
    return await connection


def _file_within(path: str, rows: Sequence[Row], max_bytes: int) -> tuple[str, FileInfo] | int:
    """read_within's answer from a file's (size, version, data) rows: NotFound without rows, only the
    size past ``max_bytes``, else the content."""
    if not rows:
        raise NotFound(f"no file at {path}", metadata={"path": path})
    size = int(rows[0][0])
    if size > max_bytes:
        return size
    data = b"".join(row[2] for row in rows if row[2] is not None)
    return decode_text(data, path), FileInfo(size, int(rows[0][1]))


def _upper_bound(prefix: str) -> str:
    """Smallest string greater than every string starting with ``prefix`` (which ends in "/")."""
    return prefix[:-1] + "0"  # "0" is the character after "/"


class _Database:
    """The connections behind one SQLite file: one writer and a pool of readers."""

    def __init__(self, path: Path, readers: int) -> None:
        self.path = path
        self._reader_count = max(1, readers)
        self._writer: aiosqlite.Connection | None = None
        self._readers: list[aiosqlite.Connection] = []
        self._pool: asyncio.Queue[aiosqlite.Connection] = asyncio.Queue()
        self._open_lock = asyncio.Lock()
        self._write_lock = asyncio.Lock()
        self._closed = False

    async def open(self) -> aiosqlite.Connection:
        """Open the connections (once) and create the schema; return the writer."""
        if self._writer is not None:
            return self._writer
        async with self._open_lock:
            if self._closed:
                raise RuntimeError(f"SqliteKnowledgeStore({self.path}) is closed")
            if self._writer is None:
                private_database(self.path)
                writer = await _connect(self.path)
                try:
                    await writer.execute_fetchall("PRAGMA busy_timeout = 10000")
                    await writer.execute_fetchall("PRAGMA journal_mode = WAL")
                    await writer.execute_fetchall("PRAGMA synchronous = NORMAL")
                    await writer.executescript(_SCHEMA)
                    for _ in range(self._reader_count):
                        reader = await _connect(self.path)
                        self._readers.append(reader)
                        await reader.execute_fetchall("PRAGMA busy_timeout = 10000")
                        await reader.execute_fetchall("PRAGMA query_only = ON")
                        self._pool.put_nowait(reader)
                except BaseException:
                    await self._close_connections(writer)
                    raise
                self._writer = writer
        return self._writer

    @asynccontextmanager
    async def reader(self) -> AsyncIterator[aiosqlite.Connection]:
        """Borrow a read connection from the pool."""
        await self.open()
        conn = await self._pool.get()
        try:
            yield conn
        finally:
            self._pool.put_nowait(conn)

    async def transaction(
        self, feed: ChangeFeed, body: Callable[[aiosqlite.Connection], Awaitable[tuple[T, ChangeEvent]]]
    ) -> T:
        """Run ``body`` in one write transaction, then publish its event to ``feed``."""
        writer = await self.open()
        task = asyncio.ensure_future(self._transaction(writer, feed, body))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            # The transaction completes or rolls back on its own; don't report its outcome as unretrieved.
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
            raise

    async def _transaction(
        self,
        writer: aiosqlite.Connection,
        feed: ChangeFeed,
        body: Callable[[aiosqlite.Connection], Awaitable[tuple[T, ChangeEvent]]],
    ) -> T:
        async with self._write_lock:
            await writer.execute_fetchall("BEGIN IMMEDIATE")
            try:
                result, event = await body(writer)
                await writer.execute_fetchall("COMMIT")
            except BaseException:
                if writer.in_transaction:
                    await writer.execute_fetchall("ROLLBACK")
                raise
            # Published under the lock so subscribers see events in commit order.
            feed.publish(event)
            return result

    async def close(self) -> None:
        """Close every connection after the running transaction finishes."""
        async with self._open_lock:
            self._closed = True
            async with self._write_lock:
                writer, self._writer = self._writer, None
                await self._close_connections(writer)

    async def _close_connections(self, writer: aiosqlite.Connection | None) -> None:
        readers, self._readers = self._readers, []
        self._pool = asyncio.Queue()
        for conn in [*readers, *([writer] if writer is not None else [])]:
            await conn.close()


class SqliteKnowledgeStore(StoreBase):
    """Stores files in one SQLite database file — the practical default for a single process.

    Connections open on first use (or :meth:`open`); call :meth:`close` when done.
    ``readers`` is the size of the read-connection pool.
    """

    def __init__(self, path: str | os.PathLike[str], *, readers: int = 4) -> None:
        super().__init__()
        self._db = _Database(Path(path), readers)
        self._namespace = ""
        self._feed = ChangeFeed()

    def _make_view(self, name: str) -> SqliteKnowledgeStore:
        """An isolated store in the same database file (rows tagged with ``name``)."""
        view = SqliteKnowledgeStore.__new__(SqliteKnowledgeStore)
        StoreBase.__init__(view)
        view._db, view._namespace, view._feed = self._db, name, ChangeFeed()
        return view

    async def _check_new_path(self, conn: aiosqlite.Connection, path: str) -> None:
        """Refuse a new file beneath a file, or where a directory exists."""
        above = ancestors(path)
        in_above = f" OR path IN ({','.join('?' * len(above))})" if above else ""
        sql = f"SELECT path FROM knowledge_files WHERE namespace = ? AND ((path >= ? AND path < ?){in_above}) LIMIT 1"
        rows = list(await conn.execute_fetchall(sql, (self._namespace, path + "/", path + "0", *above)))
        if rows:
            hit = str(rows[0][0])
            raise file_blocks_path(hit, path) if hit in above else directory_blocks_file(path)

    async def write_info(self, path: str, content: str) -> FileInfo:
        """Create or replace a file; return its new size and version."""
        path = file_path(path)
        data = encode_text(content)

        async def body(conn: aiosqlite.Connection) -> tuple[FileInfo, ChangeEvent]:
            rows = list(await conn.execute_fetchall(_UPSERT_WRITE, (self._namespace, path, len(data))))
            size, version = int(rows[0][0]), int(rows[0][1])
            if version == 1:
                await self._check_new_path(conn, path)
            await conn.execute_fetchall(
                "DELETE FROM knowledge_chunks WHERE namespace = ? AND path = ?", (self._namespace, path)
            )
            if data:
                await conn.execute_fetchall(
                    "INSERT INTO knowledge_chunks (namespace, path, start, data) VALUES (?, ?, 0, ?)",
                    (self._namespace, path, data),
                )
            return FileInfo(size, version), ChangeEvent(path, "written", 0, size, version)

        return await self._db.transaction(self._feed, body)

    async def append_info(self, path: str, text: str) -> AppendResult:
        """Append text (creating the file); return where it landed and the new size and version."""
        path = file_path(path)
        data = encode_text(text)

        async def body(conn: aiosqlite.Connection) -> tuple[AppendResult, ChangeEvent]:
            rows = list(await conn.execute_fetchall(_UPSERT_APPEND, (self._namespace, path, len(data))))
            size, version = int(rows[0][0]), int(rows[0][1])
            if version == 1:
                await self._check_new_path(conn, path)
            offset = size - len(data)
            if data:
                await conn.execute_fetchall(
                    "INSERT INTO knowledge_chunks (namespace, path, start, data) VALUES (?, ?, ?, ?)",
                    (self._namespace, path, offset, data),
                )
            return AppendResult(offset, size, version), ChangeEvent(path, "appended", offset, size, version)

        return await self._db.transaction(self._feed, body)

    async def delete(self, path: str) -> None:
        """Remove a file (NotFound if missing)."""
        path = file_path(path)

        async def body(conn: aiosqlite.Connection) -> tuple[None, ChangeEvent]:
            rows = list(
                await conn.execute_fetchall(
                    "DELETE FROM knowledge_files WHERE namespace = ? AND path = ? RETURNING version",
                    (self._namespace, path),
                )
            )
            if not rows:
                raise NotFound(f"no file at {path}", metadata={"path": path})
            await conn.execute_fetchall(
                "DELETE FROM knowledge_chunks WHERE namespace = ? AND path = ?", (self._namespace, path)
            )
            return None, ChangeEvent(path, "deleted", 0, 0, 0)

        await self._db.transaction(self._feed, body)

    async def read_info(self, path: str) -> tuple[str, FileInfo]:
        """Return a file's content with its size and version (NotFound if missing)."""
        path = file_path(path)
        async with self._db.reader() as conn:
            rows: list[Row] = list(await conn.execute_fetchall(_READ, (self._namespace, path)))
        if not rows:
            raise NotFound(f"no file at {path}", metadata={"path": path})
        data = b"".join(row[2] for row in rows if row[2] is not None)
        return decode_text(data, path), FileInfo(int(rows[0][0]), int(rows[0][1]))

    async def read_within(self, path: str, max_bytes: int) -> tuple[str, FileInfo] | int:
        """The content, size and version when at most ``max_bytes`` long, else only the size (NotFound
        if missing): one statement on one read connection, so the size and content agree."""
        path = file_path(path)
        async with self._db.reader() as conn:
            rows: list[Row] = list(await conn.execute_fetchall(_READ_WITHIN, (max_bytes, self._namespace, path)))
        return _file_within(path, rows, max_bytes)

    async def read_many_within(self, paths: Sequence[str], max_bytes: int) -> builtins.list[ReadWithin]:
        """:meth:`read_within` of every path, in order, each error in its place: one statement on one
        read connection for the whole batch."""
        normalized: list[str | AgentNetError] = []
        for path in paths:
            try:
                normalized.append(file_path(path))
            except AgentNetError as err:
                normalized.append(err)
        wanted = sorted({name for name in normalized if isinstance(name, str)})
        rows_by_path: dict[str, list[Row]] = {}
        if wanted:
            async with self._db.reader() as conn:
                rows = await conn.execute_fetchall(_READ_MANY_WITHIN, (max_bytes, self._namespace, json.dumps(wanted)))
            for row in rows:
                rows_by_path.setdefault(row[0], []).append(row[1:])
        outcomes: builtins.list[ReadWithin] = []
        for name in normalized:
            if isinstance(name, AgentNetError):
                outcomes.append(name)
                continue
            try:
                outcomes.append(_file_within(name, rows_by_path.get(name, []), max_bytes))
            except AgentNetError as err:
                outcomes.append(err)
        return outcomes

    async def size_of(self, path: str) -> int:
        """A file's size in bytes, from its row (NotFound if missing)."""
        path = file_path(path)
        async with self._db.reader() as conn:
            rows: list[Row] = list(
                await conn.execute_fetchall(
                    "SELECT size FROM knowledge_files WHERE namespace = ? AND path = ?", (self._namespace, path)
                )
            )
        if not rows:
            raise NotFound(f"no file at {path}", metadata={"path": path})
        return int(rows[0][0])

    async def read_range(self, path: str, offset: int) -> str:
        """Everything from byte ``offset`` on (OutOfRange if negative, past the end or inside a character)."""
        text = await self._read_range(path, offset, MAX_QUERY_OFFSET)
        assert isinstance(text, str)  # no file holds more than MAX_QUERY_OFFSET bytes
        return text

    async def read_range_within(self, path: str, offset: int, max_bytes: int) -> str | int:
        """:meth:`read_range` when at most ``max_bytes`` lie from ``offset`` on, else only that number of
        bytes: one statement on one read connection."""
        return await self._read_range(path, offset, min(max(max_bytes, 0), MAX_QUERY_OFFSET))

    async def _read_range(self, path: str, offset: int, max_bytes: int) -> str | int:
        path = file_path(path)
        async with self._db.reader() as conn:
            rows: list[Row] = list(
                await conn.execute_fetchall(_READ_RANGE, (query_offset(offset), self._namespace, path, max_bytes))
            )
        if not rows:
            raise NotFound(f"no file at {path}", metadata={"path": path})
        size = int(rows[0][0])
        wanted = size - max(0, min(offset, size))
        if wanted > max_bytes:
            return wanted
        chunks = [(int(row[1]), bytes(row[2])) for row in rows if row[2] is not None]
        if offset < 0 or offset >= size or not chunks:
            check_offset(path, offset, size, None)
            return ""
        data = b"".join(chunk for _, chunk in chunks)
        relative = offset - chunks[0][0]
        check_offset(path, offset, size, data[relative])
        return decode_text(data[relative:], path)

    async def exists(self, path: str) -> bool:
        """Whether a file exists at ``path``."""
        path = file_path(path)
        async with self._db.reader() as conn:
            rows = list(
                await conn.execute_fetchall(
                    "SELECT 1 FROM knowledge_files WHERE namespace = ? AND path = ?", (self._namespace, path)
                )
            )
        return bool(rows)

    async def list(self, path: str) -> builtins.list[str]:
        """Immediate children of directory ``path``, sorted; directories end in "/"."""
        prefix = dir_prefix(path)
        async with self._db.reader() as conn:
            rows = await conn.execute_fetchall(
                "SELECT path FROM knowledge_files WHERE namespace = ? AND path >= ? AND path < ?",
                (self._namespace, prefix, _upper_bound(prefix)),
            )
        return immediate_children(prefix, (str(row[0]) for row in rows))

    async def on_change(self, prefix: str, callback: ChangeCallback) -> Subscription:
        """Deliver every later change (made through this process) at or under ``prefix`` to ``callback``."""
        return self._feed.subscribe(normalize_path(prefix), callback)

    async def open(self) -> None:
        """Open the database now (creating it and its schema if needed)."""
        await self._db.open()

    async def _close_subscriptions(self) -> None:
        """Cancel this store's subscriptions."""
        await self._feed.close()

    async def _close_resources(self) -> None:
        """Close the database connections."""
        await self._db.close()
