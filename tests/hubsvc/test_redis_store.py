"""The Redis store itself: compare-and-append conflicts, and a hub process on ``--store redis://``.

The hub behaviour suite runs on Redis too (tests/hubsvc/conftest.py); these tests cover what
only Redis has: a second writer of the same keys, and the flag of ``python -m hubsvc``.
"""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest
from agentnet.v1 import channel_pb2, hub_pb2
from redis.asyncio.cluster import RedisCluster

from agentsdk.errors import Unavailable
from hubsvc.storage import AgentRow, ChannelRow, WalRow, Writes
from hubsvc.storage.base import StoreConflict
from hubsvc.storage.redis_connect import RedisClient, connect
from hubsvc.storage.redis_store import RedisHubStore
from tests.hubsvc.harness import EV_TEXT, Participant, collect, conversation
from tests.procs import ROOT, start_service
from tests.redis_server import RedisCluster as LocalCluster
from tests.redis_server import RedisServer

DB = 2
"""The DB number of these tests (flushed after each)."""


@pytest.fixture(params=["server", "cluster", "cluster-spread"])
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    """DB 2 of the session's redis-server, or its local Redis Cluster (``redis+cluster://``), the
    hub in one slot or its channels spread over the shards (``?spread=1``)."""
    if request.param == "server":
        server: RedisServer = request.getfixturevalue("redis_server")
        yield server.url(DB)
        server.flush(DB)
    else:
        cluster: LocalCluster = request.getfixturevalue("redis_cluster")
        yield cluster.url() + ("?spread=1" if request.param == "cluster-spread" else "")
        cluster.flush()


def row(channel_id: str, seq: int, *, key: str | None = None, sender: str = "a1") -> WalRow:
    envelope_id = f"{channel_id}-{seq}-{uuid.uuid4().hex[:6]}"
    return WalRow(channel_id, seq, envelope_id, sender, EV_TEXT, key, f"text {seq}", "2026-01-01T00:00:00Z",
                  envelope_id.encode())  # fmt: skip


def channel(channel_id: str, *members: str) -> ChannelRow:
    meta = channel_pb2.ChannelMetadata(channel_id=channel_id)
    for m in members:
        meta.participants.add(agent_id=m)
    return ChannelRow(channel_id, True, meta.SerializeToString())


async def dump(client: RedisClient) -> dict[bytes, object]:
    """Every key with its type and content, to compare before and after."""
    out: dict[bytes, object] = {}
    if isinstance(client, RedisCluster):
        keys = await client.keys("*", target_nodes=RedisCluster.PRIMARIES)
    else:
        keys = await client.keys("*")
    for key in sorted(cast("list[bytes]", keys)):
        kind = (await client.type(key)).decode()
        if kind == "stream":
            out[key] = await client.xrange(key)
        elif kind == "hash":
            out[key] = await client.hgetall(key)
        elif kind == "set":
            out[key] = sorted(await client.smembers(key))
        elif kind == "zset":
            out[key] = await client.zrange(key, 0, -1, withscores=True)
        else:
            out[key] = await client.get(key)
    return out


async def test_a_second_writer_that_appended_first_makes_the_first_one_conflict_and_change_nothing(url: str) -> None:
    prefix = "cas:"
    one, two = RedisHubStore(url, prefix=prefix), RedisHubStore(url, prefix=prefix)
    await one.open()
    await two.open()
    client = connect(url, 5)
    try:
        await one.commit(Writes(channels=[channel("c1", "a1", "a2")], wal=[row("c1", 1, key="k1")]))
        # Replica two admits seq 2 first; replica one still believes the channel is at seq 1.
        await two.commit(Writes(wal=[row("c1", 2)]))
        before = await dump(client)
        stale = Writes(
            wal=[row("c1", 2, key="k2")],
            channels=[channel("c1", "a1", "a2", "a3")],
            # (spread=1 refuses a channel write carrying a name claim outright: a removed row claims none)
            agents=[AgentRow("a3", "carol", "hash", b"record", removed="spread=1" in url)],
            cursors=[("a3", "c1", 2)],
            audit=[("joined", "a3", "c1", "{}", 1.0)],
        )
        with pytest.raises(Unavailable) as refused:
            await one.commit(stale)
        assert isinstance(refused.value.__cause__, StoreConflict)
        assert "is at seq 2, not 1" in str(refused.value.__cause__)
        assert await dump(client) == before  # not one key of the bundle changed
        # A reused idempotency key conflicts the same way, even at the right seq.
        await one.lift_fence("c1")
        with pytest.raises(Unavailable) as reused:
            await one.commit(Writes(wal=[row("c1", 3, key="k1")], audit=[("x", "a1", "c1", "{}", 2.0)]))
        assert "idempotency key already taken" in str(reused.value.__cause__)
        assert await dump(client) == before
        # What the other writer stored is what both read.
        assert [d.decode().split("-")[1] for d in await one.read_wal("c1", 0, 0, 0)] == ["1", "2"]
    finally:
        await client.aclose()
        await one.close()
        await two.close()


async def test_a_conflicting_bundle_fails_alone_in_its_group_and_fences_its_channel(url: str) -> None:
    store = RedisHubStore(url, prefix="group:")
    await store.open()
    try:
        await store.commit(Writes(channels=[channel("c1", "a1")], wal=[row("c1", 1)]))
        await store.commit(Writes(channels=[channel("c2", "a1")]))  # (spread=1: one channel per bundle)
        # Queued together, so one group: the middle bundle skips a seq.
        first = store.submit(Writes(wal=[row("c1", 2)]))
        gap = store.submit(Writes(wal=[row("c2", 5)]))
        other = store.submit(Writes(wal=[row("c1", 3)], audit=[("k", "a1", "c1", "{}", 1.0)]))
        fenced = store.submit(Writes(wal=[row("c2", 1)]))
        results = await asyncio.gather(first, gap, other, fenced, return_exceptions=True)
        assert results[0] is None and results[2] is None
        assert isinstance(results[1], Unavailable) and isinstance(results[3], Unavailable)
        assert "earlier write to channel 'c2' failed" in str(results[3])
        await store.lift_fence("c2")
        await store.commit(Writes(wal=[row("c2", 1)]))
        assert len(await store.read_wal("c1", 0, 0, 0)) == 3 and len(await store.read_wal("c2", 0, 0, 0)) == 1
        assert [r.kind for r in await store.list_audit(kind="", subject_id="", after_id=0, limit=10)] == ["k"]
    finally:
        await store.close()


async def test_a_live_agent_name_is_unique_like_sqlites_index(url: str) -> None:
    store = RedisHubStore(url, prefix="names:")
    await store.open()
    try:
        await store.commit(Writes(agents=[AgentRow("a1", "alice", "h", b"r")]))
        with pytest.raises(Unavailable) as taken:
            await store.commit(Writes(agents=[AgentRow("a2", "alice", "h", b"r")]))
        assert "agent name alice is taken" in str(taken.value.__cause__)
        await store.commit(Writes(agents=[AgentRow("a1", "alice", "h", b"r", removed=True)]))
        await store.commit(Writes(agents=[AgentRow("a2", "alice", "h", b"r")]))  # free once removed
        assert {(a.agent_id, a.removed) for a in await store.load_agents()} == {("a1", True), ("a2", False)}
    finally:
        await store.close()


async def test_a_hub_process_on_redis_serves_and_hydrates_after_a_kill(url: str, tmp_path: Path) -> None:
    args = ["--store", url, "--data-dir", str(tmp_path)]
    hub = start_service("hubsvc", args, cwd=ROOT)
    try:
        where = "Redis cluster 127.0.0.1:" if url.startswith("redis+cluster") else "Redis 127.0.0.1:"
        assert any(where in line for line in hub.output)
        alice, bob, cid = await conversation(hub.target)
        said = [await alice.say(cid, f"m{i}") for i in range(5)]
        for p in (alice, bob):
            await p.close()
    finally:
        hub.terminate(signal.SIGKILL)  # every post above was acknowledged: Redis has it

    restarted = start_service("hubsvc", args, cwd=ROOT)
    try:
        bob2 = Participant(restarted.target, bob.record, bob.credential)
        wal = [
            item.envelope
            for item in await collect(bob2.stub.ReadWal(hub_pb2.ReadWalRequest(channel_id=cid), metadata=bob2.metadata))
        ]
        assert [w.seq for w in wal] == list(range(1, len(wal) + 1))
        assert [w.envelope_id for w in wal if w.event_type == EV_TEXT] == [s.envelope_id for s in said]
        desc = await bob2.rpc("DescribeChannel", hub_pb2.DescribeChannelRequest(channel_id=cid))
        assert desc.channel.last_seq == len(wal)
        alice2 = Participant(restarted.target, alice.record, alice.credential)
        await alice2.connect()
        await bob2.connect(cursors={cid: said[-1].seq})
        after = await alice2.say(cid, "after the restart")
        assert after.seq == len(wal) + 1
        assert (await bob2.next_of(EV_TEXT)).envelope_id == after.envelope_id
        for p in (alice2, bob2):
            await p.close()
    finally:
        assert restarted.terminate(signal.SIGTERM) == 0


@pytest.mark.parametrize("scheme", ["redis", "redis+cluster"])
async def test_an_unreachable_redis_stops_the_hub_with_a_message_naming_the_flag(tmp_path: Path, scheme: str) -> None:
    from tests.redis_server import free_port

    url = f"{scheme}://127.0.0.1:{free_port()}" + ("/0" if scheme == "redis" else "")
    with pytest.raises(RuntimeError) as failed:
        start_service("hubsvc", ["--store", url, "--data-dir", str(tmp_path)], cwd=ROOT)
    where = "cluster 127.0.0.1:" if scheme == "redis+cluster" else "127.0.0.1:"
    assert f"agentnet-hub: --store: cannot reach Redis at {where}" in str(failed.value)


async def test_on_a_cluster_every_key_of_the_hub_is_in_the_one_slot_its_prefix_names(
    redis_cluster: LocalCluster,
) -> None:
    """The prefix is the hash tag: the single atomic commit script can run (no CROSSSLOT), and
    two hubs with different prefixes may live on different shards of one Cluster."""
    store = RedisHubStore(redis_cluster.url(), prefix="slot:")
    await store.open()
    client = connect(redis_cluster.url(), 5)
    assert isinstance(client, RedisCluster)
    try:
        await store.commit(
            Writes(
                channels=[channel("c1", "a1"), channel("c2", "a1")],
                wal=[row("c1", 1, key="k")],
                agents=[AgentRow("a1", "alice", "h", b"r")],
                audit=[("k", "a1", "c1", "{}", 1.0)],
            )
        )
        keys = cast("list[bytes]", await client.keys("*", target_nodes=RedisCluster.PRIMARIES))
        assert {k.split(b"}", 1)[0] for k in keys} == {b"{slot:"}
        assert {b"{slot:}{c:c1}:wal", b"{slot:}{g}:feed", b"{slot:}{g}:audit"} <= set(keys)
        assert len({client.keyslot(k) for k in keys}) == 1
        assert [d.decode().split("-")[1] for d in await store.read_wal("c1", 0, 0, 0)] == ["1"]
    finally:
        await client.aclose()
        await store.close()
        redis_cluster.flush()


async def test_close_writes_what_was_queued_cursors_included_and_returns(url: str) -> None:
    """Close writes the queued cursor-only bundles (written after their group) and returns.

    The writer used to be cancelled at close, possibly mid-call; redis-py sometimes swallows a
    cancellation, which left the writer waiting forever and close() hanging (seen in the hub
    suite, not reproducible on demand). It now ends at a stop marker instead."""
    store = RedisHubStore(url, prefix="close:")
    await store.open()
    await store.commit(Writes(channels=[channel("c1", "a1")], wal=[row("c1", 1)]))
    await store.close()
    for attempt in range(1, 21):
        store = RedisHubStore(url, prefix="close:")
        await store.open()
        for seq in range(1, 4):
            store.submit(Writes(cursors=[(f"a{attempt}", "c1", seq)]))  # advisory: nobody awaits them
        await asyncio.wait_for(store.close(), 10)
        again = RedisHubStore(url, prefix="close:")
        await again.open()
        try:
            assert await again.load_cursors(f"a{attempt}") == {"c1": 3}
        finally:
            await again.close()


async def test_a_bundle_queued_behind_a_refused_one_of_its_channel_is_not_written_either(url: str) -> None:
    """The second bundle's own seq check would pass (the other writer's row sits where the first
    bundle's should), but it was admitted on top of the first: it must not land on the other's row."""
    one, two = RedisHubStore(url, prefix="chain:"), RedisHubStore(url, prefix="chain:")
    await one.open()
    await two.open()
    try:
        await one.commit(Writes(channels=[channel("c1", "a1")], wal=[row("c1", 1)]))
        theirs = row("c1", 2, sender="a2")
        await two.commit(Writes(wal=[theirs]))
        # Queued together (one group): replica one still believes the channel is at seq 1.
        stale = one.submit(Writes(wal=[row("c1", 2, key="s2")]))
        behind = one.submit(Writes(wal=[row("c1", 3, key="s3")]))
        results = await asyncio.gather(stale, behind, return_exceptions=True)
        assert all(isinstance(r, Unavailable) for r in results), results
        wal = await one.read_wal("c1", 0, 0, 0)
        assert len(wal) == 2 and wal[1] == theirs.data
        assert await one.channel_seq("c1") == 2
    finally:
        await one.close()
        await two.close()


def reply_row(channel_id: str, seq: int, sender: str, causation_id: str | None) -> WalRow:
    from agentnet.v1 import envelope_pb2

    wire = envelope_pb2.Envelope(channel_id=channel_id, seq=seq, envelope_id=f"{channel_id}-e{seq}", sender_id=sender)
    if causation_id is not None:
        wire.causation_id = causation_id
    return WalRow(channel_id, seq, wire.envelope_id, sender, EV_TEXT, None, None, "2026-01-01T00:00:00Z",
                  wire.SerializeToString(), causation_id)  # fmt: skip


async def test_find_reply_keeps_the_first_reply_and_an_older_store_gets_indexed(url: str) -> None:
    rows = [
        reply_row("c1", 1, "a1", None),
        reply_row("c1", 2, "b2", "c1-e1"),
        reply_row("c1", 3, "b2", "c1-e1"),  # a second reply to the same envelope: not the one found
        reply_row("c1", 4, "a1", "c1-e2"),
    ]
    store = RedisHubStore(url, prefix="replies:")
    await store.open()
    try:
        await store.commit(Writes(wal=rows[:2], channels=[channel("c1", "a1", "b2")]))
        await store.commit(Writes(wal=rows[2:]))
        assert await store.find_reply("c1", "b2", "c1-e1") == rows[1].data
        assert await store.find_reply("c1", "a1", "c1-e2") == rows[3].data
        assert await store.find_reply("c1", "a1", "c1-e1") is None
        # A store written before the replies hashes: they are filled from the WALs at open.
        client = store._client
        await client.delete(store.channel_key("c1", "replies"), store._keys.g + "replies_indexed")
        assert await store.find_reply("c1", "b2", "c1-e1") is None
    finally:
        await store.close()
    reopened = RedisHubStore(url, prefix="replies:")
    await reopened.open()
    try:
        assert await reopened.find_reply("c1", "b2", "c1-e1") == rows[1].data
        assert await reopened.find_reply("c1", "a1", "c1-e2") == rows[3].data
    finally:
        await reopened.close()
