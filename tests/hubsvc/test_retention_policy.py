"""Retention per channel type from the policy file, and audit retention (--retain-audit): each channel is
kept for its type's retention, a reloaded policy takes effect at the next sweep, and old audit records
go in bounded steps, on SQLite and Redis (docs/operations.md "Data over time", docs/governance.md
"Retention")."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path
from typing import cast

import pytest
from agentnet.v1 import channel_pb2, hub_pb2

from agentsdk.cli.render import retention_rows
from agentsdk.operator import OperatorClient
from hubsvc.core.options import HubOptions
from hubsvc.governance.policy import load_policy
from hubsvc.metrics import retention_metrics
from hubsvc.storage import SqliteHubStore, Writes
from hubsvc.storage.base import ChannelRow
from hubsvc.storage.redis_store import RedisHubStore
from netkernel.errors import NotFound
from tests.eventually import assert_eventually
from tests.hubsvc.harness import Participant, RunningHub, conversation, open_channel, running_hub

SQLITE_ONLY = pytest.mark.sqlite_only("the policy file's schema, or the SQLite store's tables")


async def _closed(hub: RunningHub, alice: Participant, channel_id: str) -> None:
    await alice.rpc("CloseChannel", hub_pb2.CloseChannelRequest(channel_id=channel_id))


async def _gone(hub: RunningHub, channel_id: str) -> bool:
    async with OperatorClient(hub.target, hub.operator_token) as operator:
        try:
            await operator.describe_channel(channel_id)
        except NotFound as refusal:
            return "purged by retention" in refusal.message
    return False


@SQLITE_ONLY
def test_the_retention_example_of_the_governance_doc_loads(tmp_path: Path) -> None:
    doc = (Path(__file__).parents[2] / "docs" / "governance.md").read_text()
    section = doc.split("\n## Retention\n", 1)[1].split("\n## ", 1)[0]
    example = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "policy.yaml").write_text(example)
    policy = load_policy(tmp_path / "policy.yaml")
    assert [policy.retain_ended(t, 60.0) for t in ("consulting", "conversation", "workflow", "discussion")] == [
        7 * 86400,
        12 * 3600,
        0,
        60.0,
    ]


@SQLITE_ONLY
def test_the_retention_block_is_validated(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("retention:\n  discussion: {ended: 12h}\n  conversation: {ended: 0}\n")
    loaded = load_policy(policy)
    assert loaded.retain_ended("discussion", 5.0) == 43200 and loaded.retain_ended("conversation", 5.0) == 0
    assert loaded.retain_ended("workflow", 5.0) == 5.0  # not named: --retain-ended
    for text, message in (
        ("retention: {discussion: {ended: 3 weeks}}", "retention.discussion.ended: .*'3 weeks' is not a duration"),
        ("retention: {discussion: {ended: -1}}", "retention.discussion.ended: .*greater than or equal to 0"),
        ("retention: {chat: {ended: 1d}}", "retention: .*unknown channel type 'chat'"),
        ("retention: {discussion: {ended: 1d, audit: 1d}}", "retention.discussion.audit: .*not permitted"),
    ):
        policy.write_text(text)
        with pytest.raises(ValueError, match=message):
            load_policy(policy)


async def test_each_channel_keeps_its_types_retention_and_a_reload_applies_at_the_next_sweep(
    tmp_path: Path, hub_store: str
) -> None:
    """--retain-ended 1s for the types the policy does not name; conversations kept forever until the
    policy file says otherwise."""
    if "spread" in hub_store:
        pytest.skip("no retention on the spread layout (docs/operations.md)")
    policy = tmp_path / "policy.yaml"
    policy.write_text("retention:\n  conversation: {ended: 0}\n")
    options = HubOptions(retain_ended=1.0, retention_sweep_interval=3600, policy_poll_interval=0.05)
    async with running_hub(tmp_path / "hub.db", options, policy=policy) as hub:
        alice, bob, talk = await conversation(hub.target)
        disc = await open_channel(alice, "discussion", [bob])
        for channel_id in (talk, disc):
            await _closed(hub, alice, channel_id)
        await asyncio.sleep(1.1)  # both ended more than --retain-ended ago
        assert await hub.core.retention.sweep() == 1
        assert await _gone(hub, disc)
        async with OperatorClient(hub.target, hub.operator_token) as operator:
            assert (await operator.describe_channel(talk)).channel.state == channel_pb2.CHANNEL_STATE_CLOSED
            status = (await operator.status()).retention
        assert dict(status.retain_ended_by_type) == {"conversation": 0.0} and status.retain_ended_seconds == 1.0
        assert "conversation forever" in retention_rows(status)[0][1]

        policy.write_text("retention:\n  conversation: {ended: 0.5s}\n")
        await assert_eventually(lambda: hub.core.governance.policy.retain_ended("conversation", 0) == 0.5)
        assert await hub.core.retention.sweep() == 1
        assert await _gone(hub, talk)
        for p in (alice, bob):
            await p.close()


@SQLITE_ONLY
async def test_a_type_with_a_longer_retention_is_kept_while_a_shorter_one_is_purged(tmp_path: Path) -> None:
    """At the store: channels are due by their own type's cutoff, whatever the order they ended in."""
    db = tmp_path / "hub.db"
    store = SqliteHubStore(db)
    await store.open()
    metas = [
        channel_pb2.ChannelMetadata(channel_id=cid, type=kind, state=channel_pb2.CHANNEL_STATE_CLOSED)
        for cid, kind in (("w1", "workflow"), ("c1", "conversation"), ("w2", "workflow"), ("d1", "discussion"))
    ]
    await store.commit(Writes(channels=[ChannelRow(m.channel_id, False, m.SerializeToString()) for m in metas]))
    with sqlite3.connect(db) as conn:
        for n, cid in enumerate(("w1", "c1", "w2", "d1")):
            conn.execute("UPDATE channel_ends SET ended_at = ? WHERE channel_id = ?", (1000.0 + n, cid))
    assert await store.ended_before({"workflow": 5000.0, "conversation": 500.0}, 10) == ["w1", "w2"]
    assert await store.ended_before({"workflow": 5000.0, "conversation": 1002.0}, 2) == ["w1", "c1"]
    assert await store.ended_before({}, 10) == []
    await store.close()


@SQLITE_ONLY
async def test_a_database_from_before_retention_by_type_is_upgraded(tmp_path: Path) -> None:
    """channel_ends without its type column (and the triggers naming two columns) gets both anew."""
    db = tmp_path / "hub.db"
    store = SqliteHubStore(db)
    await store.open()
    await store.close()
    with sqlite3.connect(db) as conn:
        conn.executescript(
            "DROP TRIGGER channel_ended_insert; DROP TRIGGER channel_ended_update; DROP TABLE channel_ends;"
            "CREATE TABLE channel_ends (channel_id TEXT PRIMARY KEY, ended_at REAL NOT NULL) WITHOUT ROWID;"
            "CREATE TRIGGER channel_ended_update AFTER UPDATE OF live ON channels WHEN new.live = 0 "
            "BEGIN INSERT OR IGNORE INTO channel_ends VALUES (new.channel_id, 1000.0); END;"
        )
    store = SqliteHubStore(db)
    await store.open()
    meta = channel_pb2.ChannelMetadata(channel_id="x", type="workflow", state=channel_pb2.CHANNEL_STATE_CLOSED)
    await store.commit(Writes(channels=[ChannelRow("x", False, meta.SerializeToString())]))
    assert await store.ended_before({"workflow": 1e12}, 10) == ["x"]
    await store.close()


async def test_audit_records_older_than_retain_audit_go_in_bounded_steps(tmp_path: Path, hub_store: str) -> None:
    """Two replicas on Redis sweep at once: every old record and its index entries go, once."""
    redis = hub_store != "sqlite"
    options = HubOptions(retain_audit=100.0, retention_sweep_interval=3600, retention_batch_rows=3)
    async with (
        running_hub(tmp_path / "hub.db", options) as hub,
        running_hub(tmp_path / "hub.db", options) if redis else contextlib.nullcontext() as second,
    ):
        now = hub.core.clock()
        old = [("test_old", "actor", f"s{n % 2}", "{}", now - 1000 + n) for n in range(10)]
        new = [("test_new", "actor", "s0", "{}", now), ("test_old", "actor", "s1", "{}", now)]
        await hub.core.store.commit(Writes(audit=old + new))
        sweeps = [hub.core.retention.sweep()] + ([second.core.retention.sweep()] if second is not None else [])
        await asyncio.gather(*sweeps)
        replicas = [hub] + ([second] if second is not None else [])
        assert sum(h.core.retention.stats.purged_audit for h in replicas) >= 10
        metrics = {m.name: m.samples[0].value for m in retention_metrics(hub.core.retention.stats, hub.core.store)}
        assert metrics["agentnet_hub_retention_purged_audit_records"] == hub.core.retention.stats.purged_audit
        rows = await hub.core.store.list_audit(kind="", subject_id="", after_id=0, limit=-1)
        left = [(r.kind, r.subject_id) for r in rows if r.kind.startswith("test_")]
        assert left == [("test_new", "s0"), ("test_old", "s1")]
        for kind, subject in (("test_old", ""), ("", "s0"), ("", "s1")):
            found = await hub.core.store.list_audit(kind=kind, subject_id=subject, after_id=0, limit=-1)
            assert all(r.created_at >= now for r in found if r.kind.startswith("test_"))
        store = hub.core.store
        if isinstance(store, RedisHubStore):  # the index zsets hold only ids whose record is kept
            g = store._keys.g
            for key in ("audit:all", "audit:kind:test_old", "audit:subject:s0", "audit:subject:s1"):
                ids = [int(m) for m in cast("list[bytes]", await store._client.zrange(g + key, 0, -1))]
                kept = await store._client.hmget(g + "audit", [str(i) for i in ids]) if ids else []
                assert None not in kept, key
            assert await store._client.zcard(g + "audit:kind:test_old") == 1
        async with OperatorClient(hub.target, hub.operator_token) as operator:
            status = (await operator.status()).retention
        assert status.retain_audit_seconds == 100.0 and status.HasField("last_sweep_at")
        assert ["retention of audit records", "100 s"] in retention_rows(status)


@SQLITE_ONLY
async def test_without_retain_audit_every_audit_record_is_kept(tmp_path: Path) -> None:
    async with running_hub(tmp_path / "hub.db") as hub:
        await hub.core.store.commit(Writes(audit=[("test_old", "a", "s", "{}", 1.0)]))
        await hub.core.retention.sweep()
        rows = await hub.core.store.list_audit(kind="test_old", subject_id="", after_id=0, limit=-1)
        assert len(rows) == 1 and hub.core.retention.stats.purged_audit == 0
        async with OperatorClient(hub.target, hub.operator_token) as operator:
            assert (await operator.status()).retention.retain_audit_seconds == 0
