"""The SQLite hub store's reads (every query the :class:`~hubsvc.storage.base.HubStore` interface asks)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from itertools import chain
from typing import Any

from hubsvc.storage.base import (
    AgentRow,
    AuditRow,
    CallTokenRow,
    ChannelRow,
    CheckpointRow,
    ExecutionRow,
    ObservedCounts,
    TaskRow,
)
from hubsvc.storage.sqlite.connection import SqliteConnection

_KEYS_PER_QUERY = 500
"""Idempotency keys asked in one query (well under SQLite's limit of bound parameters)."""
IDEMPOTENT_MANY = (
    "SELECT idem_key, data FROM wal INDEXED BY wal_idem WHERE channel_id = ? AND sender_id = ? AND idem_key IN ({})"
)
"""The envelopes of a sender's keys in a channel (``{}``: one ``?`` per key). ``INDEXED BY``: without
table statistics SQLite's planner takes the primary key's ``channel_id`` prefix for an ``IN`` list and
reads every row of the channel (tens of milliseconds per query on a channel of 20 000 envelopes,
where the index answers in well under one)."""
FIND_REPLY = (
    "SELECT data FROM wal INDEXED BY wal_reply WHERE channel_id = ? AND causation_id = ? AND sender_id = ? "
    "ORDER BY seq LIMIT 1"
)
"""A sender's first envelope answering one envelope; ``INDEXED BY`` for the same reason as
:data:`IDEMPOTENT_MANY` (the planner picks the primary key's prefix and scans the whole channel)."""


class SqliteReads(SqliteConnection):
    """The reads of :class:`~hubsvc.storage.sqlite.store.SqliteHubStore` (a mixin)."""

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
                        yield channel_id, list(chain.from_iterable(rows))  # each row is (data,)

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

    async def find_idempotent_many(self, channel_id: str, sender_id: str, keys: Sequence[str]) -> dict[str, bytes]:
        """The envelopes written under any of ``keys``: one query in the unique index wal_idem per 500 keys."""
        found: dict[str, bytes] = {}
        for start in range(0, len(keys), _KEYS_PER_QUERY):
            chunk = list(keys[start : start + _KEYS_PER_QUERY])
            rows = await self._fetchall(
                IDEMPOTENT_MANY.format(", ".join("?" * len(chunk))), [channel_id, sender_id, *chunk]
            )
            found.update((key, bytes(data)) for key, data in rows)
        return found

    async def find_reply(self, channel_id: str, sender_id: str, causation_id: str) -> bytes | None:
        """The first envelope ``sender_id`` wrote to the channel answering ``causation_id`` (index wal_reply)."""
        rows = await self._fetchall(FIND_REPLY, [channel_id, causation_id, sender_id])
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


def _chunks(items: list[str], size: int) -> list[list[str]]:
    """``items`` in lists of at most ``size`` (one empty list for no items)."""
    return [items[i : i + size] for i in range(0, len(items), size)] or [[]]
