"""Retention of ended channels (--retain-ended, --archive-dir): the sweep purges what ended long enough
ago and leaves a tombstone, archives first, never touches a live channel; export and import of the
archive format; an interrupted purge is finished, never undone (docs/operations.md "Data over time")."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from agentnet.v1 import channel_pb2, hub_pb2
from typer.testing import CliRunner

from agentsdk.cli.app import app
from agentsdk.operator import OperatorClient
from hubsvc.archive_import import main as import_main
from hubsvc.core.options import HubOptions, duration
from hubsvc.metrics import retention_metrics
from hubsvc.storage import SqliteHubStore, Writes
from hubsvc.storage.base import ChannelRow, WalRow
from hubsvc.storage.redis_store import RedisHubStore
from hubsvc.storage.redis_store.keys import glob_escape
from hubsvc.storage.sqlite.history import _purge_head
from netkernel.archive import ArchiveError, read_archive
from netkernel.errors import NotFound
from tests.eventually import assert_eventually
from tests.hubsvc.harness import RunningHub, conversation, open_channel, running_hub

SQLITE_ONLY = pytest.mark.sqlite_only("the SQLite store's purge steps and file")

CHURN = 120
"""Channels opened, used and closed while one stays live."""


def test_durations_read_as_operators_write_them() -> None:
    assert [duration(t) for t in ("3600", "2s", "15m", "12h", "30d", "0.5")] == [3600, 2, 900, 43200, 2592000, 0.5]
    with pytest.raises(ValueError, match="not a duration"):
        duration("12 weeks")


async def test_churn_purges_ended_channels_and_keeps_live_ones(tmp_path: Path, hub_store: str) -> None:
    """On SQLite one hub; on Redis two replicas of one store, both sweeping: each channel purged once."""
    if "spread" in hub_store:
        pytest.skip("no retention on the spread layout (docs/operations.md)")
    redis = hub_store != "sqlite"
    archive_dir = tmp_path / "archive"
    options = HubOptions(retain_ended=1.0, retention_sweep_interval=0.1, archive_dir=str(archive_dir))
    async with (
        running_hub(tmp_path / "hub.db", options) as hub,
        running_hub(tmp_path / "hub.db", options) if redis else contextlib.nullcontext() as second,
    ):
        cores = [*hub.cores, *(second.cores if second is not None else [])]  # every replica sweeps
        alice, bob, live = await conversation(hub.target)
        await alice.say(live, "kept")
        ended: dict[str, list[bytes]] = {}
        async with OperatorClient(hub.target, hub.operator_token) as operator:
            for i in range(CHURN):
                channel_id = await open_channel(alice, "conversation", [bob])
                await alice.say(channel_id, f"churn {i}")
                await bob.say(channel_id, f"answer {i}")
                await alice.rpc("CloseChannel", hub_pb2.CloseChannelRequest(channel_id=channel_id))
                if i < 5:  # what an archive must hold, read before the sweep can purge it
                    ended[channel_id] = [e.SerializeToString() async for e in operator.read_wal(channel_id)]
                else:
                    ended[channel_id] = []
                await alice.say(live, f"live {i}")  # the live channel goes on meanwhile

            async def all_purged() -> bool:
                for channel_id in ended:
                    try:
                        await operator.describe_channel(channel_id)
                    except NotFound as refusal:  # pytest.raises' failure is not an AssertionError to retry on
                        assert "purged by retention" in refusal.message and refusal.metadata["purged"] == "retention"
                    else:
                        raise AssertionError(f"channel {channel_id} is not purged yet")
                return True

            await assert_eventually(all_purged, timeout=30)
            first = next(iter(ended))
            with pytest.raises(NotFound, match="purged by retention"):
                [e async for e in operator.read_wal(first)]
            # The live channel is untouched: its whole WAL, its members' cursors.
            described = await operator.describe_channel(live)
            assert described.live
            seqs = [e.seq async for e in operator.read_wal(live)]
            assert seqs == list(range(1, described.channel.last_seq + 1))
            await alice.say(live, "still going")
            cursors = await hub.core.store.load_cursors(bob.agent_id)
            assert live in cursors and not set(cursors) & set(ended)
            status = await operator.status()
            assert status.retention.retain_ended_seconds == 1.0
            assert status.retention.channels_purged == CHURN  # tombstones: once each, whichever replica
            assert status.retention.ended_channels_kept == (-1 if redis else 0)  # Redis: not counted
            assert status.retention.HasField("last_sweep_at") and status.retention.store_size_bytes > 0
            assert status.retention.archive_dir == str(archive_dir)
            # Each channel purged once over the replicas.
            assert sum(core.retention.stats.purged_channels for core in cores) == CHURN
            metrics = {m.name: m.samples[0].value for m in retention_metrics(hub.core.retention.stats, hub.core.store)}
            assert metrics["agentnet_hub_retention_purged_channels"] == hub.core.retention.stats.purged_channels
            if not redis:
                assert metrics["agentnet_hub_retention_purged_envelopes"] >= CHURN * 5  # open, ack, opened, 2, closed
                assert metrics["agentnet_hub_store_bytes"] > 0  # the file's size as it is when read
        if redis:
            for name in ("wal", "meta", "idem", "members"):
                assert not [k async for k in _redis_keys(hub, name) if live not in k]
        else:
            with sqlite3.connect(tmp_path / "hub.db") as db:
                assert db.execute("SELECT count(*) FROM wal WHERE channel_id != ?", (live,)).fetchone() == (0,)
                assert db.execute("SELECT count(*) FROM channel_tombstones WHERE done = 1").fetchone() == (CHURN,)
        for p in (alice, bob):
            await p.close()
    # Each purged channel was archived first, as committed.
    for channel_id, wal in ended.items():
        meta, envelopes = read_archive(archive_dir / f"{channel_id}.jsonl.gz")
        assert meta.channel_id == channel_id and meta.state == channel_pb2.CHANNEL_STATE_CLOSED
        if wal:
            assert [e.SerializeToString() for e in envelopes] == wal
        assert [e.seq for e in envelopes] == list(range(1, meta.last_seq + 1))


async def _redis_keys(hub: RunningHub, name: str) -> AsyncIterator[str]:
    """The keys of every channel named ``name`` in the hub's Redis store."""
    store = hub.core.store
    assert isinstance(store, RedisHubStore)
    async for key in store._client.scan_iter(match=f"{glob_escape(store._keys.prefix)}{{c:*}}:{name}"):
        yield key.decode()


@SQLITE_ONLY
async def test_without_retention_everything_is_kept(tmp_path: Path) -> None:
    async with running_hub(tmp_path / "hub.db") as hub:
        alice, bob, channel_id = await conversation(hub.target)
        await alice.rpc("CloseChannel", hub_pb2.CloseChannelRequest(channel_id=channel_id))
        assert await hub.core.retention.sweep() == 0
        async with OperatorClient(hub.target, hub.operator_token) as operator:
            assert (await operator.describe_channel(channel_id)).channel.state == channel_pb2.CHANNEL_STATE_CLOSED
            status = await operator.status()
            assert status.retention.retain_ended_seconds == 0 and status.retention.ended_channels_kept == 1
        for p in (alice, bob):
            await p.close()


def _row(channel_id: str, seq: int) -> WalRow:
    return WalRow(channel_id, seq, f"{channel_id}-{seq}", "a", "ag2.msg.text", None, None, "2026-01-01T00:00:00Z", b"")


@SQLITE_ONLY
async def test_a_purge_a_restart_interrupted_is_finished_and_nothing_comes_back(tmp_path: Path) -> None:
    db = tmp_path / "hub.db"
    store = SqliteHubStore(db)
    await store.open()
    ended = channel_pb2.ChannelMetadata(channel_id="old", state=channel_pb2.CHANNEL_STATE_CLOSED, last_seq=7)
    kept = channel_pb2.ChannelMetadata(channel_id="new", state=channel_pb2.CHANNEL_STATE_CLOSED, last_seq=3)
    live = channel_pb2.ChannelMetadata(channel_id="live", state=channel_pb2.CHANNEL_STATE_OPENED, last_seq=2)
    await store.commit(
        Writes(
            channels=[ChannelRow(m.channel_id, m is live, m.SerializeToString()) for m in (ended, kept, live)],
            wal=[_row(c, s) for c, top in (("old", 7), ("new", 3), ("live", 2)) for s in range(1, top + 1)],
        )
    )
    with sqlite3.connect(db) as conn:  # "old" ended long ago
        conn.execute("UPDATE channel_ends SET ended_at = 1000 WHERE channel_id = 'old'")
    cutoff = 2000.0
    assert await store.ended_before({"": cutoff}, 10) == ["old"]
    # The purge's first transaction commits, then the process dies.
    conn = sqlite3.connect(db, isolation_level=None)
    assert _purge_head(conn, "old", 1500.0, "")
    conn.close()
    await store.close()

    store = SqliteHubStore(db)
    await store.open()
    assert await store.get_channel("old") is None  # not resurrected
    assert len(await store.read_wal("old", 0, 0, 0)) == 7  # its WAL rows wait for the sweep
    assert await store.ended_before({"": cutoff}, 10) == ["old"]  # the unfinished purge comes first
    assert await store.purge_channel("old", purged_at=2000.0, archive="", batch_rows=3) == 7
    assert await store.read_wal("old", 0, 0, 0) == []
    assert await store.ended_before({"": cutoff}, 10) == []
    stone = await store.tombstone("old")
    assert stone is not None and (stone.last_seq, stone.purged_at, stone.ended_at) == (7, 1500.0, 1000.0)
    # Never a live channel, and a kept one keeps everything.
    assert await store.purge_channel("live", purged_at=2000.0, archive="", batch_rows=3) is None
    assert len(await store.read_wal("live", 0, 0, 0)) == 2 and len(await store.read_wal("new", 0, 0, 0)) == 3
    assert (await store.history_counts()).purged == 1
    await store.close()


@SQLITE_ONLY
async def test_export_and_import_round_trip_for_an_audit(tmp_path: Path) -> None:
    token = tmp_path / "operator.token"
    out = tmp_path / "export.jsonl.gz"
    async with running_hub(tmp_path / "hub.db") as hub:
        token.write_text(hub.operator_token)
        alice, bob, channel_id = await conversation(hub.target)
        await alice.say(channel_id, "for the record", idempotency_key="k1")
        await bob.say(channel_id, "noted")
        await alice.rpc("CloseChannel", hub_pb2.CloseChannelRequest(channel_id=channel_id))
        async with OperatorClient(hub.target, hub.operator_token) as operator:
            committed = [e.SerializeToString() async for e in operator.read_wal(channel_id)]
            described = await operator.describe_channel(channel_id)
        args = ["--hub", hub.target, "--token-file", str(token), "export", channel_id, "--out", str(out), "--json"]
        result = await asyncio.to_thread(CliRunner().invoke, app, args)
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["envelopes"] == len(committed)
        again = await asyncio.to_thread(CliRunner().invoke, app, args)
        assert again.exit_code == 2 and "exists" in again.output  # never overwritten
        for p in (alice, bob):
            await p.close()
    lines = [json.loads(line) for line in gzip.open(out, "rt")]
    assert lines[0]["format"] == "agentnet.channel-archive" and lines[-1] == {"end": True, "envelopes": len(committed)}
    assert lines[1]["envelope"]["channel_id"] == channel_id  # proto field names

    audit = tmp_path / "audit.db"
    assert await asyncio.to_thread(import_main, ["--db", str(audit), str(out)]) == 0
    assert await asyncio.to_thread(import_main, ["--db", str(audit), str(out)]) == 1  # already there
    async with running_hub(audit) as hub:
        async with OperatorClient(hub.target, hub.operator_token) as operator:
            assert [e.SerializeToString() async for e in operator.read_wal(channel_id)] == committed
            assert (await operator.describe_channel(channel_id)).channel == described.channel
        found = await hub.core.store.find_idempotent(channel_id, alice.agent_id, "k1")
        assert found is not None

    cut = tmp_path / "cut.jsonl.gz"
    with gzip.open(cut, "wt") as f:
        f.writelines(line + "\n" for line in gzip.open(out, "rt").read().splitlines()[:-1])
    with pytest.raises(ArchiveError, match="cut short"):
        read_archive(cut)
