"""SQLite (aiosqlite) implementation of :class:`HubStore` with group commit.

One connection, WAL journal mode. Group commit, failure isolation and fences are
:class:`~hubsvc.storage.group_commit.GroupCommitStore`'s: every bundle queued at one
moment becomes one transaction here (one multi-row statement in the common case).
``synchronous=NORMAL`` (the default here) survives a killed process without losing a
committed transaction; ``FULL`` also survives power loss at the cost of one fsync per group.

Writes normally run on aiosqlite's thread, so the event loop keeps admitting posts while a
group commits. A group of at most ``inline_write_rows`` WAL rows (and nothing else) that
finds the event loop with few other callbacks ready (``INLINE_MAX_READY``) is written inline
instead, on a second connection to the same file (same ``synchronous``, same single statement,
so the same durability and the same all-or-nothing failure): the loop had little else to do
meanwhile, and the hand-off to the thread and back would only add two thread wake-ups to the
commit's latency. A lone bundle submitted while the writer is idle is written that way at once
(:meth:`~hubsvc.storage.group_commit.GroupCommitStore._apply_now`). The inline connection
never waits for a lock (a busy database sends the write to the thread) and never checkpoints,
which could block the loop for milliseconds: after ``_INLINE_RUN`` inline commits in a row
the next write goes through the thread, whose commit checkpoints the WAL as it always does
once the WAL is large, so the WAL file stays bounded.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import AsyncIterator, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import aiosqlite
from agentnet.v1 import envelope_pb2

from hubsvc.storage.base import (
    OUTCOMES,
    TASK_IF_LIVE,
    TASK_LIVE,
    TASK_NEW,
    AgentRow,
    AuditRow,
    CallTokenRow,
    ChannelRow,
    CheckpointRow,
    ExecutionRow,
    ObservedCounts,
    StoreConflict,
    TaskRow,
    WalRow,
    Writes,
)
from hubsvc.storage.call_token_room import check_room, make_room
from hubsvc.storage.group_commit import GroupCommitStore
from netkernel.files import private_database
from netkernel.log_hygiene import mute_parameter_echo

log = logging.getLogger("agentnet.hub.storage")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS agents (
  agent_id TEXT PRIMARY KEY, name TEXT NOT NULL, cred_hash TEXT NOT NULL,
  record BLOB NOT NULL, removed INTEGER NOT NULL DEFAULT 0);
CREATE UNIQUE INDEX IF NOT EXISTS agents_live_name ON agents(name) WHERE removed = 0;
CREATE TABLE IF NOT EXISTS channels (
  channel_id TEXT PRIMARY KEY, live INTEGER NOT NULL, record BLOB NOT NULL, seed BLOB NOT NULL DEFAULT x'');
CREATE TABLE IF NOT EXISTS channel_members (
  agent_id TEXT NOT NULL, channel_id TEXT NOT NULL, PRIMARY KEY (agent_id, channel_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS wal (
  channel_id TEXT NOT NULL, seq INTEGER NOT NULL, envelope_id TEXT NOT NULL, sender_id TEXT NOT NULL,
  event_type TEXT NOT NULL, idem_key TEXT, text TEXT, created_at TEXT NOT NULL, data BLOB NOT NULL,
  causation_id TEXT, PRIMARY KEY (channel_id, seq)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS wal_envelope_id ON wal(envelope_id);
CREATE UNIQUE INDEX IF NOT EXISTS wal_idem ON wal(channel_id, sender_id, idem_key) WHERE idem_key IS NOT NULL;
CREATE TABLE IF NOT EXISTS cursors (
  agent_id TEXT NOT NULL, channel_id TEXT NOT NULL, seq INTEGER NOT NULL,
  PRIMARY KEY (agent_id, channel_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tasks (
  task_id TEXT PRIMARY KEY, owner_id TEXT NOT NULL, channel_id TEXT NOT NULL,
  terminal INTEGER NOT NULL, record BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS task_checkpoints (
  task_id TEXT PRIMARY KEY, owner_id TEXT NOT NULL, state_json TEXT NOT NULL, saved_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS observed (
  agent_id TEXT NOT NULL, capability TEXT NOT NULL, completed INTEGER NOT NULL DEFAULT 0,
  failed INTEGER NOT NULL DEFAULT 0, expired INTEGER NOT NULL DEFAULT 0, cancelled INTEGER NOT NULL DEFAULT 0,
  last_latency_ms INTEGER NOT NULL DEFAULT 0, last_updated REAL NOT NULL DEFAULT 0,
  PRIMARY KEY (agent_id, capability)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS executions (
  execution_id TEXT PRIMARY KEY, root_session_id TEXT NOT NULL, caller_id TEXT NOT NULL,
  target_id TEXT NOT NULL, running INTEGER NOT NULL, started_at REAL NOT NULL, record BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS executions_root ON executions(root_session_id, started_at);
CREATE INDEX IF NOT EXISTS executions_caller ON executions(caller_id);
CREATE INDEX IF NOT EXISTS executions_target ON executions(target_id);
CREATE TABLE IF NOT EXISTS call_tokens (
  token_hash TEXT PRIMARY KEY, execution_id TEXT NOT NULL, agent_id TEXT NOT NULL, expires_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS call_tokens_execution ON call_tokens(execution_id);
CREATE TABLE IF NOT EXISTS audit (
  audit_id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, actor_id TEXT NOT NULL,
  subject_id TEXT NOT NULL, detail_json TEXT NOT NULL, created_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS audit_kind ON audit(kind, audit_id);
"""

_WAL_INSERT = (
    "INSERT INTO wal(channel_id, seq, envelope_id, sender_id, event_type, idem_key, text, created_at, data, "
    "causation_id) VALUES "
)
_WAL_ROW = "(?,?,?,?,?,?,?,?,?,?)"
_REPLY_INDEX = (
    "CREATE INDEX IF NOT EXISTS wal_reply ON wal(channel_id, causation_id, sender_id, seq) "
    "WHERE causation_id IS NOT NULL"
)
"""What FindReply looks up: a sender's envelopes answering one envelope (replies only, so posts without a
cause cost the index nothing)."""
_BACKFILL_CHUNK = 2000
"""WAL rows read per step when an older database gets its causation_id column filled in."""
_BUSY = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
"""Primary result codes of a statement kept from the lock (it wrote nothing)."""
_BUSY_ATTEMPTS = 5
"""Times a self-committing statement that found the database busy is run (each waits busy_timeout)."""
_MAX_ROWS_PER_STATEMENT = 3000  # 10 parameters a row, below SQLite's 32766-parameter limit
_CURSOR_UPSERT = (
    "INSERT INTO cursors(agent_id, channel_id, seq) VALUES {} "
    "ON CONFLICT(agent_id, channel_id) DO UPDATE SET seq=max(seq, excluded.seq)"
)
_MAX_CURSORS_PER_STATEMENT = 10000  # 3 parameters a row
_INLINE_RUN = 64
"""Inline commits in a row at most; then one goes through the thread (and checkpoints if due)."""
INLINE_MAX_READY = 4
"""Most callbacks the loop may have ready for a write still to go inline. They wait for the insert
(tens of microseconds); the thread would not run them much sooner — they need the GIL, which the
thread holds around its statement — and its hand-off costs the commit two thread wake-ups. More
ready work means load, where writes queued behind the thread's group commit cost less each."""


def _wal_params(rows: list[WalRow]) -> list[Any]:
    params: list[Any] = []
    for w in rows:
        params += (w.channel_id, w.seq, w.envelope_id, w.sender_id, w.event_type, w.idempotency_key, w.text,
                   w.created_at, w.data, w.causation_id)  # fmt: skip
    return params


class SqliteHubStore(GroupCommitStore):
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
        """Largest group of WAL rows written inline on an idle loop (0: never inline)."""
        self._db: aiosqlite.Connection | None = None
        self._inline: sqlite3.Connection | None = None
        self._inline_run = 0
        """Inline commits since the last commit through the thread."""
        self.inline_commits = 0
        """Writes committed inline since open (diagnostics)."""

    @property
    def db(self) -> aiosqlite.Connection:
        """The open connection."""
        if self._db is None:
            raise RuntimeError("SqliteHubStore is not open; call open() first")
        return self._db

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
        await self._db.executescript(_SCHEMA)
        await self._add_causation_column()
        await self._db.execute(_REPLY_INDEX)
        if self._inline_write_rows and self._path not in ("", ":memory:"):  # a second :memory: is another db
            self._inline = _inline_connection(self._path, self._synchronous)
        self._start_writer()

    async def _add_causation_column(self) -> None:
        """A database written before FindReply gets the ``causation_id`` column, filled from its rows."""
        columns = {row[1] for row in await self._fetchall("PRAGMA table_info(wal)", [])}
        if "causation_id" in columns:
            return
        db = self.db
        await db.execute("BEGIN IMMEDIATE")
        try:
            await db.execute("ALTER TABLE wal ADD COLUMN causation_id TEXT")
            after: tuple[str, int] = ("", -1)
            while True:
                rows = await self._fetchall(
                    "SELECT channel_id, seq, data FROM wal WHERE (channel_id, seq) > (?, ?) "
                    "ORDER BY channel_id, seq LIMIT ?",
                    [*after, _BACKFILL_CHUNK],
                )
                if not rows:
                    break
                updates = []
                for channel_id, seq, data in rows:
                    env = envelope_pb2.Envelope.FromString(bytes(data))
                    if env.HasField("causation_id") and env.causation_id:
                        updates.append((env.causation_id, channel_id, seq))
                if updates:
                    await db.executemany("UPDATE wal SET causation_id = ? WHERE channel_id = ? AND seq = ?", updates)
                after = (rows[-1][0], rows[-1][1])
            await db.execute("COMMIT")
        except BaseException:
            await db.execute("ROLLBACK")
            raise

    async def close(self) -> None:
        """Write everything queued, stop the writer and close the file."""
        await self._stop_writer()
        if self._inline is not None:
            self._inline.close()
            self._inline = None
        if self._db is not None:
            await self._db.close()
            self._db = None

    async def _apply(self, group: list[Writes]) -> None:
        """Write the bundles in one atomic transaction (or one statement); raises, rolled back, on failure."""
        merged = Writes()
        for writes in group:
            merged.wal.extend(writes.wal)
            merged.agents.extend(writes.agents)
            merged.channels.extend(writes.channels)
            merged.cursors.extend(writes.cursors)
            merged.tasks.extend(writes.tasks)
            merged.checkpoints.extend(writes.checkpoints)
            merged.observations.extend(writes.observations)
            merged.executions.extend(writes.executions)
            merged.call_tokens.extend(writes.call_tokens)
            merged.audit.extend(writes.audit)
        if not merged:
            return
        db = self.db
        others = bool(merged.agents or merged.channels or merged.tasks or merged.checkpoints or merged.executions)
        others = others or bool(merged.observations)
        others = others or bool(merged.call_tokens or merged.audit)
        if not others and not merged.cursors and self._write_inline(merged.wal):
            return
        self._inline_run = 0  # this write goes through the thread, whose commit checkpoints when due
        if not others and not merged.cursors and len(merged.wal) <= _MAX_ROWS_PER_STATEMENT:
            # The common case: one multi-row INSERT is one atomic, durable statement, so the
            # group costs a single round trip to the database thread instead of three.
            await self._statement(_WAL_INSERT + ",".join([_WAL_ROW] * len(merged.wal)), _wal_params(merged.wal))
            return
        if not others and not merged.wal and len(merged.cursors) <= _MAX_CURSORS_PER_STATEMENT:
            await self._upsert_cursors(merged.cursors)  # acked cursors: one atomic statement too
            return
        await db.execute("BEGIN IMMEDIATE")
        try:
            gone = await self._check(group)  # inside the transaction: no other writer between check and write
            if merged.agents:
                await db.executemany(
                    "INSERT INTO agents(agent_id, name, cred_hash, record, removed) VALUES (?,?,?,?,?) "
                    "ON CONFLICT(agent_id) DO UPDATE SET name=excluded.name, cred_hash=excluded.cred_hash, "
                    "record=excluded.record, removed=excluded.removed",
                    [(a.agent_id, a.name, a.cred_hash, a.record, int(a.removed)) for a in merged.agents],
                )
            if merged.channels:
                await db.executemany(
                    "INSERT INTO channels(channel_id, live, record, seed) VALUES (?,?,?,?) "
                    "ON CONFLICT(channel_id) DO UPDATE SET live=excluded.live, record=excluded.record, "
                    "seed=excluded.seed",
                    [(c.channel_id, int(c.live), c.record, c.seed) for c in merged.channels],
                )
                await db.executemany(
                    "INSERT OR IGNORE INTO channel_members(agent_id, channel_id) VALUES (?,?)",
                    [(m, c.channel_id) for c in merged.channels for m in c.member_ids()],
                )
            for start in range(0, len(merged.wal), _MAX_ROWS_PER_STATEMENT):
                chunk = merged.wal[start : start + _MAX_ROWS_PER_STATEMENT]
                await db.execute(_WAL_INSERT + ",".join([_WAL_ROW] * len(chunk)), _wal_params(chunk))
            for start in range(0, len(merged.cursors), _MAX_CURSORS_PER_STATEMENT):
                await self._upsert_cursors(merged.cursors[start : start + _MAX_CURSORS_PER_STATEMENT])
            if merged.tasks:
                await db.executemany(
                    "INSERT INTO tasks(task_id, owner_id, channel_id, terminal, record) VALUES (?,?,?,?,?) "
                    "ON CONFLICT(task_id) DO UPDATE SET terminal=excluded.terminal, record=excluded.record "
                    "WHERE ? = 0 OR tasks.terminal = 0",  # a TASK_IF_LIVE row leaves an ended task alone
                    [
                        (t.task_id, t.owner_id, t.channel_id, int(t.terminal), t.record, int(t.expect == TASK_IF_LIVE))
                        for t in merged.tasks
                    ],
                )
            if merged.checkpoints:
                await db.executemany(
                    "INSERT OR REPLACE INTO task_checkpoints(task_id, owner_id, state_json, saved_at) VALUES (?,?,?,?)",
                    [(c.task_id, c.owner_id, c.state_json, c.saved_at) for c in merged.checkpoints],
                )
            for ob in merged.observations:  # an increment: never a read-modify-write of the counts
                if ob.outcome not in OUTCOMES:
                    raise ValueError(f"unknown task outcome {ob.outcome!r}")
                await db.execute(
                    f"INSERT INTO observed(agent_id, capability, {ob.outcome}, last_latency_ms, last_updated) "
                    f"VALUES (?,?,1,?,?) ON CONFLICT(agent_id, capability) DO UPDATE SET {ob.outcome}={ob.outcome}+1, "
                    "last_latency_ms=excluded.last_latency_ms, last_updated=excluded.last_updated",
                    (ob.agent_id, ob.capability, ob.latency_ms, ob.at),
                )
            if merged.executions:
                await db.executemany(
                    "INSERT INTO executions(execution_id, root_session_id, caller_id, target_id, running, started_at, "
                    "record) VALUES (?,?,?,?,?,?,?) ON CONFLICT(execution_id) DO UPDATE SET running=excluded.running, "
                    "record=excluded.record",
                    [_execution_params(e) for e in merged.executions],
                )
            ended = [(e.execution_id,) for e in merged.executions if not e.running]
            if gone:  # call tokens that make room for new ones (hubsvc/storage/call_token_room.py)
                await db.executemany("DELETE FROM call_tokens WHERE token_hash = ?", [(h,) for h in gone])
            if merged.call_tokens:
                await db.executemany(
                    "INSERT OR REPLACE INTO call_tokens(token_hash, execution_id, agent_id, expires_at) "
                    "VALUES (?,?,?,?)",
                    [(t.token_hash, t.execution_id, t.agent_id, t.expires_at) for t in merged.call_tokens],
                )
            if ended:  # an execution's end removes its call tokens (a token is stored only while it runs)
                await db.executemany("DELETE FROM call_tokens WHERE execution_id = ?", ended)
            if merged.audit:
                await db.executemany(
                    "INSERT INTO audit(kind, actor_id, subject_id, detail_json, created_at) VALUES (?,?,?,?,?)",
                    merged.audit,
                )
            await db.execute("COMMIT")
        except BaseException:
            await db.execute("ROLLBACK")
            raise

    async def _check(self, group: list[Writes]) -> list[str]:
        """Raise :class:`StoreConflict` unless every task row's ``expect`` holds and the execution of
        every new call token (and of every execution row with ``expect_running``) runs, judged by
        the earlier rows of the group, else by the stored rows; :class:`LimitConflict` when a new
        call token finds no room. Returns the hashes of the stored call tokens that make room."""
        task_ended: dict[str, bool] = {}
        running: dict[str, bool] = {}
        tokens: dict[str, dict[str, float]] = {}
        """Call tokens per execution (hash → expiry) as the group leaves them so far."""
        gone: list[str] = []
        for writes in group:
            for t in writes.tasks:
                ended = task_ended.get(t.task_id)
                if t.expect == TASK_IF_LIVE:  # no check: skipped if the task ended
                    task_ended[t.task_id] = True
                    continue
                if t.expect and ended is None:
                    rows = await self._fetchall("SELECT terminal FROM tasks WHERE task_id = ?", [t.task_id])
                    ended = bool(rows[0][0]) if rows else None
                    if (t.expect == TASK_NEW and rows) or (t.expect == TASK_LIVE and ended is not False):
                        raise StoreConflict(
                            f"task {t.task_id} is {'not running' if t.expect == TASK_LIVE else 'known'}"
                        )
                elif t.expect == TASK_NEW or (t.expect == TASK_LIVE and ended):
                    raise StoreConflict(f"task {t.task_id} was already written in this group")
                task_ended[t.task_id] = t.terminal
            for e in writes.executions:
                if e.expect_running:
                    await self._require_running(e.execution_id, running)
                running[e.execution_id] = e.running
            for c in writes.call_tokens:
                await self._require_running(c.execution_id, running)
                if c.hold_limit is not None:
                    held = tokens.get(c.execution_id)
                    if held is None:
                        rows = await self._fetchall(
                            "SELECT token_hash, expires_at FROM call_tokens WHERE execution_id = ?", [c.execution_id]
                        )
                        held = tokens[c.execution_id] = {h: float(e) for h, e in rows}
                    check_room(held, c)
                    for h in make_room(held, c):
                        del held[h]
                        gone.append(h)
                    held[c.token_hash] = c.expires_at
                elif c.execution_id in tokens:
                    tokens[c.execution_id][c.token_hash] = c.expires_at
        return gone

    async def _require_running(self, execution_id: str, running: dict[str, bool]) -> None:
        """StoreConflict unless the execution runs: by the group's earlier rows (``running``), else as stored."""
        is_running = running.get(execution_id)
        if is_running is None:
            rows = await self._fetchall("SELECT running FROM executions WHERE execution_id = ?", [execution_id])
            is_running = bool(rows and rows[0][0])
        if not is_running:
            raise StoreConflict(f"execution {execution_id} is not running")

    def _apply_now(self, writes: Writes) -> bool:
        """Write a bundle of WAL rows alone inline, if :meth:`_write_inline` may (see the module doc)."""
        return _wal_only(writes) and self._write_inline(writes.wal)

    def _write_inline(self, rows: list[WalRow]) -> bool:
        """Insert ``rows`` (one statement) on the inline connection if they are few and the loop has
        few other callbacks ready; True if committed, False to write them through the thread (raises,
        having written nothing, as the thread would)."""
        conn = self._inline
        if conn is None or not rows or len(rows) > self._inline_write_rows or self._inline_run >= _INLINE_RUN:
            return False
        # The callbacks the loop will run next (asyncio's base event loop keeps them there; another
        # loop implementation never writes inline). Many: let them run while the thread writes.
        ready = getattr(asyncio.get_running_loop(), "_ready", None)
        if ready is None or len(ready) > INLINE_MAX_READY:
            return False
        try:
            conn.execute(_WAL_INSERT + ",".join([_WAL_ROW] * len(rows)), _wal_params(rows))
        except sqlite3.OperationalError as exc:
            # Nothing written (one self-committing statement). A busy database is expected (the
            # thread's connection waits for the lock instead); any other failure is left for the
            # thread's write to meet and report, so the inline path never fails a write alone.
            if exc.sqlite_errorcode & 0xFF not in _BUSY:
                log.warning("an inline write failed (%s); writing it through the database thread", exc)
            return False
        self._inline_run += 1
        self.inline_commits += 1
        return True

    async def _upsert_cursors(self, rows: list[tuple[str, str, int]]) -> None:
        """Move cursors forward (never back) in one multi-row statement."""
        sql = _CURSOR_UPSERT.format(",".join(["(?,?,?)"] * len(rows)))
        await self._statement(sql, [v for row in rows for v in row])

    async def _statement(self, sql: str, params: Sequence[Any]) -> None:
        """Run one self-committing write statement on the database thread. A statement the other
        (inline) connection kept from the lock wrote nothing and is run again, a few times."""
        for attempt in range(_BUSY_ATTEMPTS):
            try:
                await self.db.execute(sql, params)
                return
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode & 0xFF not in _BUSY or attempt == _BUSY_ATTEMPTS - 1:
                    raise
                log.warning("a write found the database busy (%s); writing it again", exc)

    async def _fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        async with self.db.execute(sql, params) as cur:
            return list(await cur.fetchall())

    async def load_agents(self) -> list[AgentRow]:
        """Every identity."""
        rows = await self._fetchall("SELECT agent_id, name, cred_hash, record, removed FROM agents")
        return [AgentRow(r[0], r[1], r[2], bytes(r[3]), bool(r[4])) for r in rows]

    async def get_agent(self, agent_id: str) -> AgentRow | None:
        """One identity."""
        rows = await self._fetchall(
            "SELECT agent_id, name, cred_hash, record, removed FROM agents WHERE agent_id = ?", [agent_id]
        )
        return AgentRow(rows[0][0], rows[0][1], rows[0][2], bytes(rows[0][3]), bool(rows[0][4])) if rows else None

    async def get_agent_named(self, name: str) -> AgentRow | None:
        """The live identity of a name (the unique index agents_live_name)."""
        rows = await self._fetchall(
            "SELECT agent_id, name, cred_hash, record, removed FROM agents WHERE name = ? AND removed = 0", [name]
        )
        return AgentRow(rows[0][0], rows[0][1], rows[0][2], bytes(rows[0][3]), False) if rows else None

    async def load_live_channels(self) -> list[ChannelRow]:
        """Channels not yet ended."""
        rows = await self._fetchall("SELECT channel_id, live, record, seed FROM channels WHERE live = 1")
        return [ChannelRow(r[0], bool(r[1]), bytes(r[2]), bytes(r[3])) for r in rows]

    async def get_channel(self, channel_id: str) -> ChannelRow | None:
        """One channel."""
        rows = await self._fetchall(
            "SELECT channel_id, live, record, seed FROM channels WHERE channel_id = ?", [channel_id]
        )
        return ChannelRow(rows[0][0], bool(rows[0][1]), bytes(rows[0][2]), bytes(rows[0][3])) if rows else None

    async def list_channels_for(
        self, agent_id: str, *, include_ended: bool, limit: int, before: int = 0
    ) -> list[tuple[int, ChannelRow]]:
        """Channels of one member, newest first (rowid order approximates creation order)."""
        sql = (
            "SELECT c.rowid, c.channel_id, c.live, c.record, c.seed FROM channel_members m "
            "JOIN channels c ON c.channel_id = m.channel_id WHERE m.agent_id = ? AND c.rowid < ?"
        )
        if not include_ended:
            sql += " AND c.live = 1"
        sql += " ORDER BY c.rowid DESC LIMIT ?"
        rows = await self._fetchall(sql, [agent_id, before or 2**63 - 1, limit])
        return [(r[0], ChannelRow(r[1], bool(r[2]), bytes(r[3]), bytes(r[4]))) for r in rows]

    async def list_channels(self, *, live_only: bool, before: int, limit: int) -> list[tuple[int, ChannelRow]]:
        """Every channel, newest first (rowid order approximates creation order)."""
        sql = "SELECT rowid, channel_id, live, record, seed FROM channels WHERE rowid < ?"
        if live_only:
            sql += " AND live = 1"
        rows = await self._fetchall(sql + " ORDER BY rowid DESC LIMIT ?", [before or 2**63 - 1, limit])
        return [(r[0], ChannelRow(r[1], bool(r[2]), bytes(r[3]), bytes(r[4]))) for r in rows]

    def location(self) -> tuple[str, str]:
        """("sqlite", the database file's path)."""
        return ("sqlite", self._path)

    async def read_wal(self, channel_id: str, from_seq: int, until_seq: int, limit: int) -> list[bytes]:
        """A seq range of one channel."""
        sql = "SELECT data FROM wal WHERE channel_id = ? AND seq >= ?"
        params: list[Any] = [channel_id, from_seq]
        if until_seq:
            sql += " AND seq <= ?"
            params.append(until_seq)
        sql += " ORDER BY seq"
        if limit:
            sql += " LIMIT ?"
            params.append(limit)
        return [bytes(r[0]) for r in await self._fetchall(sql, params)]

    async def scan_wal(
        self, channel_ids: Sequence[str], *, batch: int = 5000
    ) -> AsyncIterator[tuple[str, list[bytes]]]:
        """Stream whole WALs channel by channel, a window of ``batch`` seqs a page.

        Each channel's highest seq is read first (one query per 500 channels), so a page
        query selects the envelope bytes alone: no seq per row to carry, which halves the
        cost of building the rows. Windows in a gap of the seqs are simply empty."""
        ids = list(channel_ids)
        for chunk in _chunks(ids, 500) if ids else []:
            # A correlated max() per id is one index probe each (a GROUP BY would read every row).
            ids_sql = ",".join(["(?)"] * len(chunk))
            tops: dict[str, int] = {
                r[0]: r[1] or 0
                for r in await self.db.execute_fetchall(
                    f"WITH ids(id) AS (VALUES {ids_sql}) "
                    "SELECT id, (SELECT max(seq) FROM wal WHERE channel_id = ids.id) FROM ids",
                    chunk,
                )
            }
            for channel_id in chunk:
                top = tops.get(channel_id, 0)
                for low in range(0, top, batch):
                    # One hop to the connection's thread a page (execute and fetch together).
                    rows = await self.db.execute_fetchall(
                        "SELECT data FROM wal WHERE channel_id = ? AND seq > ? AND seq <= ? ORDER BY seq",
                        [channel_id, low, low + batch],
                    )
                    if rows:
                        yield channel_id, [r[0] for r in rows]

    async def channel_seq(self, channel_id: str) -> int:
        """The channel's last seq in the WAL (the primary key's last entry)."""
        rows = await self._fetchall("SELECT max(seq) FROM wal WHERE channel_id = ?", [channel_id])
        return int(rows[0][0] or 0) if rows else 0

    async def find_envelope(self, envelope_id: str) -> bytes | None:
        """Envelope by id."""
        rows = await self._fetchall("SELECT data FROM wal WHERE envelope_id = ?", [envelope_id])
        return bytes(rows[0][0]) if rows else None

    async def find_idempotent(self, channel_id: str, sender_id: str, key: str) -> bytes | None:
        """The envelope written under an idempotency key (one lookup in the unique index wal_idem)."""
        rows = await self._fetchall(
            "SELECT data FROM wal WHERE channel_id = ? AND sender_id = ? AND idem_key = ?", [channel_id, sender_id, key]
        )
        return bytes(rows[0][0]) if rows else None

    async def find_reply(self, channel_id: str, sender_id: str, causation_id: str) -> bytes | None:
        """The first envelope ``sender_id`` wrote to the channel answering ``causation_id`` (index wal_reply)."""
        rows = await self._fetchall(
            "SELECT data FROM wal WHERE channel_id = ? AND causation_id = ? AND sender_id = ? ORDER BY seq LIMIT 1",
            [channel_id, causation_id, sender_id],
        )
        return bytes(rows[0][0]) if rows else None

    async def search_text(self, channel_ids: Sequence[str], query: str, limit: int) -> list[bytes]:
        """Case-insensitive substring search over EV_TEXT bodies (instr on lower() keeps % and _ literal)."""
        return await self._texts(channel_ids, "instr(lower(text), lower(?)) > 0", query, limit)

    async def texts_from(self, channel_ids: Sequence[str], sender_id: str, limit: int) -> list[bytes]:
        """Latest texts of one sender."""
        return await self._texts(channel_ids, "sender_id = ?", sender_id, limit)

    async def _texts(self, channel_ids: Sequence[str], condition: str, value: str, limit: int) -> list[bytes]:
        """Newest EV_TEXT envelopes of the channels matching ``condition`` (one ``?`` bound to ``value``)."""
        out: list[bytes] = []
        for chunk in _chunks(list(channel_ids), 500):
            marks = ",".join("?" * len(chunk))
            rows = await self._fetchall(
                f"SELECT data FROM wal WHERE channel_id IN ({marks}) AND text IS NOT NULL AND {condition} "
                "ORDER BY created_at DESC, seq DESC LIMIT ?",
                [*chunk, value, limit],
            )
            out.extend(bytes(r[0]) for r in rows)
        return out

    async def load_cursors(self, agent_id: str) -> dict[str, int]:
        """Ack cursors of one agent."""
        rows = await self._fetchall("SELECT channel_id, seq FROM cursors WHERE agent_id = ?", [agent_id])
        return {r[0]: int(r[1]) for r in rows}

    async def load_tasks(self, *, live_only: bool) -> list[TaskRow]:
        """Tasks."""
        sql = "SELECT task_id, owner_id, channel_id, terminal, record FROM tasks"
        if live_only:
            sql += " WHERE terminal = 0"
        return [TaskRow(r[0], r[1], r[2], bool(r[3]), bytes(r[4])) for r in await self._fetchall(sql)]

    async def get_task(self, task_id: str) -> TaskRow | None:
        """One task."""
        rows = await self._fetchall(
            "SELECT task_id, owner_id, channel_id, terminal, record FROM tasks WHERE task_id = ?", [task_id]
        )
        return TaskRow(rows[0][0], rows[0][1], rows[0][2], bool(rows[0][3]), bytes(rows[0][4])) if rows else None

    async def get_checkpoint(self, task_id: str) -> CheckpointRow | None:
        """The task's last checkpoint."""
        rows = await self._fetchall(
            "SELECT task_id, owner_id, state_json, saved_at FROM task_checkpoints WHERE task_id = ?", [task_id]
        )
        return CheckpointRow(rows[0][0], rows[0][1], rows[0][2], float(rows[0][3])) if rows else None

    async def load_observed(self, agent_id: str) -> dict[str, ObservedCounts]:
        """The identity's counts per capability."""
        rows = await self._fetchall(
            "SELECT capability, completed, failed, expired, cancelled, last_latency_ms, last_updated FROM observed "
            "WHERE agent_id = ?",
            [agent_id],
        )
        return {r[0]: ObservedCounts(r[1], r[2], r[3], r[4], r[5], float(r[6])) for r in rows}

    async def load_running_executions(self) -> list[ExecutionRow]:
        """Executions still marked running."""
        rows = await self._fetchall(
            "SELECT execution_id, root_session_id, caller_id, target_id, running, started_at, record "
            "FROM executions WHERE running = 1"
        )
        return [ExecutionRow(r[0], r[1], r[2], r[3], bool(r[4]), r[5], bytes(r[6])) for r in rows]

    async def get_execution(self, execution_id: str) -> ExecutionRow | None:
        """One execution."""
        rows = await self._fetchall(
            "SELECT execution_id, root_session_id, caller_id, target_id, running, started_at, record "
            "FROM executions WHERE execution_id = ?",
            [execution_id],
        )
        if not rows:
            return None
        r = rows[0]
        return ExecutionRow(r[0], r[1], r[2], r[3], bool(r[4]), r[5], bytes(r[6]))

    async def get_call_token(self, token_hash: str) -> CallTokenRow | None:
        """A call token of an execution that has not ended."""
        rows = await self._fetchall(
            "SELECT token_hash, execution_id, agent_id, expires_at FROM call_tokens WHERE token_hash = ?", [token_hash]
        )
        return CallTokenRow(*rows[0]) if rows else None

    async def list_executions(self, *, root_session_id: str, member_id: str, limit: int) -> list[bytes]:
        """Executions of one root session, or of every root session ``member_id`` took part in (all when "")."""
        if root_session_id:
            where, params = "root_session_id = ?", [root_session_id]
        elif not member_id:
            where, params = "1", []
        else:
            where = (
                "root_session_id IN (SELECT root_session_id FROM executions WHERE caller_id = ? "
                "UNION SELECT root_session_id FROM executions WHERE target_id = ?)"
            )
            params = [member_id, member_id]
        rows = await self._fetchall(
            f"SELECT record FROM executions WHERE {where} ORDER BY started_at, rowid LIMIT ?", [*params, limit]
        )
        return [bytes(r[0]) for r in rows]

    async def root_session_members(self, root_session_id: str) -> set[str]:
        """Callers and targets of a root session's executions."""
        rows = await self._fetchall(
            "SELECT caller_id, target_id FROM executions WHERE root_session_id = ?", [root_session_id]
        )
        return {agent for row in rows for agent in row}

    async def list_audit(self, *, kind: str, subject_id: str, after_id: int, limit: int) -> list[AuditRow]:
        """Audit records."""
        sql = "SELECT audit_id, kind, actor_id, subject_id, detail_json, created_at FROM audit WHERE audit_id > ?"
        params: list[Any] = [after_id]
        if kind:
            sql += " AND kind = ?"
            params.append(kind)
        if subject_id:
            sql += " AND subject_id = ?"
            params.append(subject_id)
        sql += " ORDER BY audit_id LIMIT ?"
        params.append(limit)
        return [AuditRow(*r) for r in await self._fetchall(sql, params)]


def _wal_only(writes: Writes) -> bool:
    """The bundle holds WAL rows and nothing else (judged by every field, so a new kind of row is never
    left out of an inline write)."""
    return all(not getattr(writes, f.name) for f in fields(writes) if f.name != "wal")


def _inline_connection(path: str, synchronous: str) -> sqlite3.Connection:
    """A second connection to ``path`` for inline writes: autocommit, the same durability, no
    waiting for a lock (busy: the write goes through the thread) and no checkpoints."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute("PRAGMA busy_timeout=0")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    return conn


def _execution_params(e: ExecutionRow) -> tuple[Any, ...]:
    return (e.execution_id, e.root_session_id, e.caller_id, e.target_id, int(e.running), e.started_at, e.record)


def _chunks(items: list[str], size: int) -> list[list[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)] or [[]]
