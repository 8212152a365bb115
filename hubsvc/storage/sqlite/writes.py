"""The SQLite hub store's writes: one transaction (or one statement) per group, and inline writes.

Every bundle queued at one moment becomes one transaction here (one multi-row statement in the
common case). Writes normally run on aiosqlite's thread, so the event loop keeps admitting posts
while a group commits. A group of at most ``inline_write_rows`` WAL rows (and nothing else) that
finds the event loop with few other callbacks ready (:data:`INLINE_MAX_READY`) is written inline
instead, on a second connection to the same file (same ``synchronous``, same single statement,
so the same durability and the same all-or-nothing failure): the loop had little else to do
meanwhile, and the hand-off to the thread and back would only add two thread wake-ups to the
commit's latency. A lone bundle submitted while the writer is idle is written that way at once
(:meth:`~hubsvc.storage.group_commit.GroupCommitStore._apply_now`). The inline connection
never waits for a lock (a busy database sends the write to the thread). No connection of the
store checkpoints the WAL in a commit: :mod:`hubsvc.storage.sqlite.checkpoints` does it beside
them, and when it asks for a RESTART checkpoint nothing is written inline until the thread,
before its next write, has run one.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from hubsvc.storage.base import OUTCOMES, TASK_IF_LIVE, TASK_LIVE, TASK_NEW, StoreConflict, WalRow, Writes
from hubsvc.storage.call_token_room import check_room, make_room
from hubsvc.storage.sqlite.checkpoints import WalCheckpointer
from hubsvc.storage.sqlite.connection import SqliteConnection
from hubsvc.storage.sqlite.schema import CURSOR_UPSERT, WAL_INSERT, WAL_ROW, execution_params, wal_params

log = logging.getLogger("agentnet.hub.storage")

_BUSY = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
"""Primary result codes of a statement kept from the lock (it wrote nothing)."""
_BUSY_ATTEMPTS = 5
"""Times a self-committing statement that found the database busy is run (each waits busy_timeout)."""
_MAX_ROWS_PER_STATEMENT = 3000  # 10 parameters a row, below SQLite's 32766-parameter limit
_MAX_CURSORS_PER_STATEMENT = 10000  # 3 parameters a row
INLINE_MAX_READY = 4
"""Most callbacks the loop may have ready for a write still to go inline. They wait for the insert
(tens of microseconds); the thread would not run them much sooner — they need the GIL, which the
thread holds around its statement — and its hand-off costs the commit two thread wake-ups. More
ready work means load, where writes queued behind the thread's group commit cost less each."""


class SqliteWrites(SqliteConnection):
    """The writes of :class:`~hubsvc.storage.sqlite.store.SqliteHubStore` (a mixin: the store sets
    the inline connection and its settings at open)."""

    _inline: sqlite3.Connection | None = None
    _inline_write_rows: int = 0
    """Largest group of WAL rows written inline on an idle loop (0: never inline)."""
    checkpointer: WalCheckpointer | None = None
    """Checkpoints the WAL off the commit path (None for a database in memory)."""
    inline_commits: int = 0
    """Writes committed inline since open (diagnostics)."""

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
        if self.checkpointer is not None and self.checkpointer.due:
            await self._restart_wal(self.checkpointer)
        if not others and not merged.cursors and len(merged.wal) <= _MAX_ROWS_PER_STATEMENT:
            # The common case: one multi-row INSERT is one atomic, durable statement, so the
            # group costs a single round trip to the database thread instead of three.
            await self._statement(WAL_INSERT + ",".join([WAL_ROW] * len(merged.wal)), wal_params(merged.wal))
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
                await db.execute(WAL_INSERT + ",".join([WAL_ROW] * len(chunk)), wal_params(chunk))
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
                    [execution_params(e) for e in merged.executions],
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
        if conn is None or not rows or len(rows) > self._inline_write_rows:
            return False
        if self.checkpointer is not None and self.checkpointer.due:  # the thread restarts the WAL first
            return False
        # The callbacks the loop will run next (asyncio's base event loop keeps them there; another
        # loop implementation never writes inline). Many: let them run while the thread writes.
        ready = getattr(asyncio.get_running_loop(), "_ready", None)
        if ready is None or len(ready) > INLINE_MAX_READY:
            return False
        try:
            conn.execute(WAL_INSERT + ",".join([WAL_ROW] * len(rows)), wal_params(rows))
        except sqlite3.OperationalError as exc:
            # Nothing written (one self-committing statement). A busy database is expected (the
            # thread's connection waits for the lock instead); any other failure is left for the
            # thread's write to meet and report, so the inline path never fails a write alone.
            if exc.sqlite_errorcode & 0xFF not in _BUSY:
                log.warning("an inline write failed (%s); writing it through the database thread", exc)
            return False
        self.inline_commits += 1
        return True

    async def _restart_wal(self, checkpointer: WalCheckpointer) -> None:
        """A RESTART checkpoint on the database thread, every write waiting for it (the WAL outgrew
        what passive checkpoints kept up with); the checkpointer is told once it succeeded."""
        await checkpointer.idle()  # a passive checkpoint still running would make the RESTART busy
        try:
            rows = list(await self.db.execute_fetchall("PRAGMA wal_checkpoint(RESTART)", []))
        except sqlite3.Error as exc:
            log.warning("restarting the WAL failed (%s); the next write tries again", exc)
            return
        if rows and not rows[0][0]:  # not busy: the WAL starts over with the next write
            checkpointer.restarted()

    async def _upsert_cursors(self, rows: list[tuple[str, str, int]]) -> None:
        """Move cursors forward (never back) in one multi-row statement."""
        sql = CURSOR_UPSERT.format(",".join(["(?,?,?)"] * len(rows)))
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


_NOT_WAL = tuple(f.name for f in fields(Writes) if f.name != "wal")
"""Every field of a bundle but its WAL rows (all of them, so a new kind of row is never left out of
an inline write)."""


def _wal_only(writes: Writes) -> bool:
    """The bundle holds WAL rows and nothing else."""
    return not any(getattr(writes, name) for name in _NOT_WAL)


def inline_connection(path: str, synchronous: str) -> sqlite3.Connection:
    """A second connection to ``path`` for inline writes: autocommit, the same durability, no
    waiting for a lock (busy: the write goes through the thread) and no checkpoints."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute("PRAGMA busy_timeout=0")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    return conn
