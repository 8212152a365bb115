"""The SQLite store's idempotency and reply lookups go through their indexes on a long channel.

Without table statistics SQLite's planner answered ``idem_key IN (...)`` and FindReply's query from
the primary key's ``channel_id`` prefix, reading every row of the channel per query: each run of
keyed posts (every SDK post carries a key) then cost the hub a scan of the whole channel."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from hubsvc.storage.sqlite import SqliteHubStore
from hubsvc.storage.sqlite.reads import FIND_REPLY, IDEMPOTENT_MANY

pytestmark = pytest.mark.sqlite_only("the SQLite store's query plans")

CHANNEL, SENDER = "c" * 32, "s" * 32


async def long_channel(path: Path, rows: int) -> SqliteHubStore:
    """A store whose WAL holds ``rows`` keyed envelopes of one channel (every other one a reply)."""
    store = SqliteHubStore(path)
    await store.open()
    await store.close()
    with sqlite3.connect(path) as conn:
        conn.executemany(
            "INSERT INTO wal(channel_id, seq, envelope_id, sender_id, event_type, idem_key, text, created_at, data, "
            "causation_id) VALUES (?,?,?,?,?,?,?,?,?,?)",
            [
                (CHANNEL, i, f"e{i}", SENDER, "ag2.msg.text", f"k{i}", "x", "", f"data{i}".encode(), f"q{i // 2}")
                for i in range(1, rows + 1)
            ],
        )
    store = SqliteHubStore(path)
    await store.open()
    return store


async def plan(store: SqliteHubStore, sql: str, params: list[str]) -> str:
    """SQLite's query plan of ``sql`` on the store's own connection, as one string."""
    return " ".join(row[3] for row in await store.db.execute_fetchall(f"EXPLAIN QUERY PLAN {sql}", params))


async def test_idempotency_keys_and_replies_are_looked_up_in_their_indexes(tmp_path: Path) -> None:
    store = await long_channel(tmp_path / "hub.db", 3000)
    try:
        keys = ["k7", "k2999", "missing"]
        assert "USING INDEX wal_idem" in await plan(store, IDEMPOTENT_MANY.format("?, ?, ?"), [CHANNEL, SENDER, *keys])
        assert "USING INDEX wal_reply" in await plan(store, FIND_REPLY, [CHANNEL, "q5", SENDER])
        # ... and they still answer what the WAL holds.
        found = await store.find_idempotent_many(CHANNEL, SENDER, keys)
        assert found == {"k7": b"data7", "k2999": b"data2999"}
        assert await store.find_idempotent_many(CHANNEL, "someone-else", keys) == {}
        assert await store.find_reply(CHANNEL, SENDER, "q5") == b"data10"  # seq 10 and 11 answer q5: the first
        assert await store.find_reply(CHANNEL, SENDER, "nothing") is None
    finally:
        await store.close()
