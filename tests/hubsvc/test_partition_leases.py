"""Partition leases with a fencing epoch on Redis, and fenced commits (docs/scale-out.md,
"Partitions and ownership"): real redis-server processes, one server and a three-master Cluster
(the hub in one slot, and the spread layout where each channel has a slot of its own)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator

import pytest

from hubsvc.storage import Writes
from hubsvc.storage.base import FeedGap, Fenced
from hubsvc.storage.leases import Lease
from hubsvc.storage.redis_connect import connect
from hubsvc.storage.redis_store import RedisHubStore
from netkernel.errors import LostRace, PartitionMoved, Unavailable
from netkernel.partitions import partition_of
from tests.eventually import assert_eventually
from tests.hubsvc.test_redis_store import channel, dump, row
from tests.redis_server import RedisCluster as LocalCluster
from tests.redis_server import RedisServer

DB = 4
"""The DB number of these tests (flushed after each)."""
COUNT = 8


@pytest.fixture(params=["server", "cluster", "spread"])
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    """DB 4 of the session's redis-server, or its local Redis Cluster (the hub in one slot, or spread)."""
    if request.param == "server":
        server: RedisServer = request.getfixturevalue("redis_server")
        yield server.url(DB)
        server.flush(DB)
    else:
        cluster: LocalCluster = request.getfixturevalue("redis_cluster")
        yield cluster.url() + ("?spread=1" if request.param == "spread" else "")
        cluster.flush()


@pytest.fixture
async def stores(url: str) -> AsyncIterator[list[RedisHubStore]]:
    """Two replicas' stores on one prefix, partitioned into :data:`COUNT` partitions."""
    opened = [RedisHubStore(url, prefix="parts:", partitions=COUNT) for _ in range(2)]
    for store in opened:
        await store.open()
    yield opened
    for store in opened:
        await store.close()


def channel_in(partition: int, *, skip: int = 0) -> str:
    """A channel id whose partition (among :data:`COUNT`) is ``partition``."""
    found = (f"ch{i}" for i in range(10_000) if partition_of(f"ch{i}", COUNT) == partition)
    for _ in range(skip):
        next(found)
    return next(found)


async def opened_under_lease(store: RedisHubStore, partition: int, ttl: float) -> tuple[str, int]:
    """``store`` takes ``partition``'s lease for ``ttl`` seconds and opens a channel of that partition
    with its first WAL row, fenced with the lease; (the channel id, the lease's epoch)."""
    assert store.partitions is not None
    ch = channel_in(partition)
    epoch = (await store.partitions.acquire([partition], ttl=ttl)).gained[partition]
    await store.commit(Writes(channels=[channel(ch, "a1")], wal=[row(ch, 1)], fence={partition: epoch}))
    return ch, epoch


async def test_the_count_is_fixed_by_the_first_store_and_a_different_one_is_warned_about(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    first = RedisHubStore(url, prefix="count:", partitions=16)
    await first.open()
    later = RedisHubStore(url, prefix="count:", partitions=64)
    try:
        with caplog.at_level(logging.WARNING, logger="agentnet.hub.storage"):
            await later.open()
        assert first.partitions is not None and later.partitions is not None
        assert first.partitions.count == later.partitions.count == 16
        assert "--partitions is 64 but the store under prefix 'count:' was created with 16 partitions" in caplog.text
        assert len(await later.partitions.read_map()) == 16
    finally:
        await first.close()
        await later.close()


async def test_a_store_without_partitions_offers_no_leases_and_refuses_a_fenced_bundle(url: str) -> None:
    store = RedisHubStore(url, prefix="plain:")
    await store.open()
    try:
        assert store.partitions is None
        with pytest.raises(Unavailable) as refused:
            await store.commit(Writes(channels=[channel("c1", "a1")], fence={0: 1}))
        assert isinstance(refused.value.__cause__, ValueError)
        assert "needs a store opened with partitions" in str(refused.value.__cause__)
    finally:
        await store.close()


async def test_acquire_renew_release_and_the_epoch_only_grows(stores: list[RedisHubStore]) -> None:
    one, two = (s.partitions for s in stores)
    assert one is not None and two is not None
    got = await one.acquire([0, 1, 2], ttl=30)
    assert got.gained == {0: 1, 1: 1, 2: 1} and not got.kept and not got.taken
    # Already ours: renewed, same epoch. Another's: left alone, its owner named.
    again = await one.acquire([1], ttl=30)
    assert again.kept == {1: 1} and not again.gained
    other = await two.acquire([1, 3], ttl=30)
    assert other.taken == {1: one.replica_id} and other.gained == {3: 1}
    leases = {lease.partition: lease for lease in await one.read_map()}
    assert (leases[1].owner, leases[1].epoch) == (one.replica_id, 1) and leases[1].ttl_ms > 0
    assert (leases[3].owner, leases[5].owner, leases[5].epoch) == (two.replica_id, None, 0)
    # A release with another epoch, or by another replica, frees nothing.
    await one.release({1: 7})
    await two.release({0: 1})
    assert (await one.renew({0: 1, 1: 1, 2: 1}, ttl=30)) == set()
    # Released: the next acquisition, by anyone, gets a higher epoch; the old holder's renewal reports it lost.
    await one.release({1: 1})
    assert (await one.read_map())[1] == Lease(1, None, 1)
    assert (await two.acquire([1], ttl=30)).gained == {1: 2}
    assert await one.renew({0: 1, 1: 1, 2: 1}, ttl=30) == {1}
    assert (await one.acquire([1], ttl=30)).taken == {1: two.replica_id}
    with pytest.raises(ValueError, match=r"partitions \[8\] are not in \[0, 8\)"):
        await one.acquire([8], ttl=30)


async def test_a_lease_lapses_by_redis_clock_and_its_epoch_survives(stores: list[RedisHubStore]) -> None:
    one, two = (s.partitions for s in stores)
    assert one is not None and two is not None
    assert (await one.acquire([4], ttl=0.2)).gained == {4: 1}

    async def lapsed() -> bool:
        return (await one.read_map())[4].owner is None

    await assert_eventually(lapsed)
    assert (await one.read_map())[4].epoch == 1  # the epoch stays after the lapse
    assert await one.renew({4: 1}, ttl=30) == {4}  # too late: lost, and not brought back
    assert (await two.acquire([4], ttl=30)).gained == {4: 2}
    assert (await one.acquire([4], ttl=30)).taken == {4: two.replica_id}


async def test_a_fenced_commit_is_written_only_while_its_lease_is_held_with_that_epoch(
    url: str, stores: list[RedisHubStore]
) -> None:
    one_store, two_store = stores
    two = two_store.partitions
    assert two is not None
    ch, epoch = await opened_under_lease(one_store, 2, ttl=0.3)
    assert await one_store.channel_seq(ch) == 1

    # The lease lapses (replica one paused) and replica two takes the partition with a higher epoch.
    async def taken() -> bool:
        return (await two.acquire([2], ttl=30)).gained == {2: epoch + 1}

    await assert_eventually(taken)
    client = connect(url, 5)
    try:
        before = await dump(client)
        with pytest.raises(PartitionMoved) as refused:
            await one_store.commit(Writes(wal=[row(ch, 2)], audit=[("x", "a1", ch, "{}", 1.0)], fence={2: epoch}))
        assert refused.value.metadata == {"cause": "partition_moved", "partition": "2", "channel_id": ch}
        assert isinstance(refused.value.__cause__, Fenced) and not isinstance(refused.value, LostRace)
        assert await dump(client) == before  # nothing of the bundle: no WAL row, no last seq, no audit, no feed
        assert await one_store.channel_seq(ch) == 1 and len(await one_store.read_wal(ch, 0, 0, 0)) == 1
        # The new owner commits with its epoch.
        await two_store.commit(Writes(wal=[row(ch, 2)], fence={2: epoch + 1}))
        assert await two_store.channel_seq(ch) == 2
    finally:
        await client.aclose()


async def test_a_fenced_commit_after_its_lease_ran_out_is_refused_though_nobody_took_it(
    url: str, stores: list[RedisHubStore]
) -> None:
    store = stores[0]
    leases = store.partitions
    assert leases is not None
    ch, epoch = await opened_under_lease(store, 7, ttl=0.3)

    async def lapsed() -> bool:  # no renewal within the TTL (the replica was paused): Redis let it lapse
        return (await leases.read_map())[7].owner is None

    await assert_eventually(lapsed)
    with pytest.raises(PartitionMoved):
        await store.commit(Writes(wal=[row(ch, 2)], fence={7: epoch}))
    assert await store.channel_seq(ch) == 1


async def test_a_lease_redis_lost_and_another_replica_took_fences_off_the_old_holder(
    url: str, stores: list[RedisHubStore]
) -> None:
    """The old holder still counts on its lease (a Redis failover dropped the key before it reached
    the replica, say): once the new owner wrote to the channel, the old holder's commit is refused."""
    old_store, new_store = stores
    old, new = old_store.partitions, new_store.partitions
    assert old is not None and new is not None
    ch, epoch = await opened_under_lease(old_store, 3, ttl=30)
    client = connect(url, 5)
    try:
        await client.delete(old.fence_check(3, epoch)[0])  # the lease key
        assert (await new.acquire([3], ttl=30)).gained == {3: epoch + 1}
        await new_store.commit(Writes(wal=[row(ch, 2)], fence={3: epoch + 1}))
        before = await dump(client)
        with pytest.raises(PartitionMoved) as refused:
            await old_store.commit(Writes(wal=[row(ch, 3)], fence={3: epoch}))
        assert isinstance(refused.value.__cause__, Fenced)
        assert await dump(client) == before
        assert await new_store.channel_seq(ch) == 2
    finally:
        await client.aclose()


async def test_a_fenced_bundle_fails_alone_in_its_group_and_fences_its_channel(stores: list[RedisHubStore]) -> None:
    store, thief = stores
    mine, theirs = channel_in(5), channel_in(6)
    leases, other = store.partitions, thief.partitions
    assert leases is not None and other is not None
    got = (await leases.acquire([5, 6], ttl=30)).gained
    await store.commit(Writes(channels=[channel(mine, "a1")], fence={5: got[5]}))
    await store.commit(Writes(channels=[channel(theirs, "a1")], fence={6: got[6]}))
    await leases.release({6: got[6]})
    assert (await other.acquire([6], ttl=30)).gained == {6: got[6] + 1}
    # Queued together, so one group: the stale fenced bundle fails; a fenced and an unfenced one still commit.
    first = store.submit(Writes(wal=[row(mine, 1)], fence={5: got[5]}))
    stale = store.submit(Writes(wal=[row(theirs, 1)], fence={6: got[6]}))
    behind = store.submit(Writes(wal=[row(theirs, 2)], fence={6: got[6]}))
    plain = store.submit(Writes(audit=[("k", "a1", "x", "{}", 1.0)], cursors=[("a1", mine, 1)]))
    results = await asyncio.gather(first, stale, behind, plain, return_exceptions=True)
    assert results[0] is None and results[3] is None
    assert isinstance(results[1], PartitionMoved) and isinstance(results[2], PartitionMoved)
    assert "no longer owns the channel's partition" in str(results[2])
    assert await store.channel_seq(mine) == 1 and await store.channel_seq(theirs) == 0
    assert [r.kind for r in await store.list_audit(kind="k", subject_id="", after_id=0, limit=10)] == ["k"]


async def test_a_fenced_bundle_must_fence_every_channel_it_writes(stores: list[RedisHubStore]) -> None:
    store = stores[0]
    assert store.partitions is not None
    epoch = (await store.partitions.acquire([1], ttl=30)).gained[1]
    inside, outside = channel_in(1), channel_in(3)
    with pytest.raises(Unavailable) as refused:
        await store.commit(Writes(wal=[row(inside, 1), row(outside, 1)], fence={1: epoch}))
    assert f"writes channels ['{outside}'] outside its fenced partitions" in str(refused.value.__cause__)
    assert await store.channel_seq(inside) == 0


async def test_the_replica_directory_lists_live_replicas_with_their_addresses(stores: list[RedisHubStore]) -> None:
    one, two = (s.liveness for s in stores)
    one.address, two.address = "10.0.0.1:50051", "10.0.0.2:50051"
    await one.beat(30)
    await two.beat(0.2)
    assert await one.replicas() == {one.replica_id: "10.0.0.1:50051", two.replica_id: "10.0.0.2:50051"}

    async def lapsed() -> bool:
        return await one.replicas() == {one.replica_id: "10.0.0.1:50051"}

    await assert_eventually(lapsed)
    await two.beat(30)  # a replica that beats again is listed again
    assert set(await one.replicas()) == {one.replica_id, two.replica_id}
    await one.leave()
    assert set(await two.replicas()) == {two.replica_id}


async def test_a_channels_appends_are_told_only_to_the_replicas_of_its_members_and_watchers(
    url: str, stores: list[RedisHubStore]
) -> None:
    holder, bobs = stores  # holder holds the channel's partition; bob's Connect stream is on bobs
    bystander = RedisHubStore(url, prefix="parts:", partitions=COUNT)
    await bystander.open()
    try:
        for store in (holder, bobs, bystander):
            await store.liveness.beat(30)
        assert holder.partitions is not None
        ch = channel_in(4)
        fence = (await holder.partitions.acquire([4], ttl=30)).gained
        members = ("alice", "bob")

        async def append(*seqs: int) -> None:
            await holder.commit(Writes(wal=[row(ch, s) for s in seqs], fence=fence, notify={ch: members}))

        async def told(store: RedisHubStore, position: str) -> tuple[str, list[dict[str, int]]]:
            moved, changes = await store.feed.read(position, 0.01)
            return moved, [c.channels for c in changes if c.origin == holder.feed.replica_id]

        await bobs.commit(Writes(sessions=[("bob", "s1", True)]))
        seen = [await s.feed.position() for s in (bobs, bystander)]
        # Opening writes the channel's row: every replica reads that from the feed.
        await holder.commit(
            Writes(channels=[channel(ch, *members)], wal=[row(ch, 1)], fence=fence, notify={ch: members})
        )
        await append(2, 3)
        seen[0], got = await told(bobs, seen[0])
        assert got == [{ch: 1}, {ch: 3}]  # the open from the feed, the appends as bob's replica's notice
        seen[1], got = await told(bystander, seen[1])
        assert got == [{ch: 1}]  # nobody of the channel is there: not told of the appends
        # A replica that watches the channel is told although no member is there, until it stops.
        await bystander.commit(Writes(watches=[(ch, True)]))
        await append(4)
        for i, store in enumerate((bobs, bystander)):
            seen[i], got = await told(store, seen[i])
            assert got == [{ch: 4}]
        # Bob's own post: nothing to deliver on his replica (the post's answer returned it).
        await holder.commit(Writes(wal=[row(ch, 5, sender="bob")], fence=fence, notify={ch: members}))
        for i, store in enumerate((bobs, bystander)):
            seen[i], got = await told(store, seen[i])
            assert got == ([] if store is bobs else [{ch: 5}])
        await bystander.commit(Writes(watches=[(ch, False)]))
        # Bob's stream ends: his replica is told no more either.
        await bobs.commit(Writes(sessions=[("bob", "s1", False)]))
        await append(6)
        for i, store in enumerate((bobs, bystander)):
            seen[i], got = await told(store, seen[i])
            assert got == []
        # A replica whose liveness key lapsed (paused past its time to live) is not told; its next
        # beat finds the key gone, and its next read says it must refresh everything.
        await bobs.commit(Writes(sessions=[("bob", "s2", True)]))
        await bobs.liveness.leave()
        await append(7)
        assert (await told(bobs, seen[0]))[1] == []
        await bobs.liveness.beat(30)
        with pytest.raises(FeedGap, match="liveness key lapsed"):
            await bobs.feed.read(seen[0], 0.01)
        seen[0] = await bobs.feed.position()
        await append(8)
        assert (await told(bobs, seen[0]))[1] == [{ch: 8}]
    finally:
        await bystander.close()
