"""The SQLite hub store's tables and statements, and the upgrade of a database written before a column."""

from __future__ import annotations

from typing import Any

import aiosqlite
from agentnet.v1 import envelope_pb2

from hubsvc.storage.base import ExecutionRow, WalRow

SCHEMA = """
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

WAL_INSERT = (
    "INSERT INTO wal(channel_id, seq, envelope_id, sender_id, event_type, idem_key, text, created_at, data, "
    "causation_id) VALUES "
)
WAL_ROW = "(?,?,?,?,?,?,?,?,?,?)"
REPLY_INDEX = (
    "CREATE INDEX IF NOT EXISTS wal_reply ON wal(channel_id, causation_id, sender_id, seq) "
    "WHERE causation_id IS NOT NULL"
)
"""What FindReply looks up: a sender's envelopes answering one envelope (replies only, so posts without a
cause cost the index nothing)."""
BACKFILL_CHUNK = 2000
"""WAL rows read per step when an older database gets its causation_id column filled in."""
CURSOR_UPSERT = (
    "INSERT INTO cursors(agent_id, channel_id, seq) VALUES {} "
    "ON CONFLICT(agent_id, channel_id) DO UPDATE SET seq=max(seq, excluded.seq)"
)


def wal_params(rows: list[WalRow]) -> list[Any]:
    """The parameters of :data:`WAL_INSERT` with one :data:`WAL_ROW` per row."""
    params: list[Any] = []
    for w in rows:
        params += (w.channel_id, w.seq, w.envelope_id, w.sender_id, w.event_type, w.idempotency_key, w.text,
                   w.created_at, w.data, w.causation_id)  # fmt: skip
    return params


def execution_params(e: ExecutionRow) -> tuple[Any, ...]:
    """The parameters of one executions row."""
    return (e.execution_id, e.root_session_id, e.caller_id, e.target_id, int(e.running), e.started_at, e.record)


async def add_causation_column(db: aiosqlite.Connection) -> None:
    """A database written before FindReply gets the ``causation_id`` column, filled from its rows."""
    columns = {row[1] for row in await db.execute_fetchall("PRAGMA table_info(wal)", [])}
    if "causation_id" in columns:
        return
    await db.execute("BEGIN IMMEDIATE")
    try:
        await db.execute("ALTER TABLE wal ADD COLUMN causation_id TEXT")
        after: tuple[str, int] = ("", -1)
        while True:
            rows = list(
                await db.execute_fetchall(
                    "SELECT channel_id, seq, data FROM wal WHERE (channel_id, seq) > (?, ?) "
                    "ORDER BY channel_id, seq LIMIT ?",
                    [*after, BACKFILL_CHUNK],
                )
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
