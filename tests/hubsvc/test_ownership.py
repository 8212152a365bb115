"""Partition ownership: rendezvous assignment (pure) and :class:`Ownership` rounds against a real
redis-server — convergence, a join, a paused replica whose partitions move and whose fenced commit
with the old epoch is refused, also for a real process frozen with SIGSTOP (docs/scale-out.md,
"Partitions and ownership")."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator, Iterator

import pytest

from hubsvc.core.ownership import Ownership
from hubsvc.core.partition_map import assign, desired
from hubsvc.storage import Writes
from hubsvc.storage.redis_store import RedisHubStore
from netkernel.errors import PartitionMoved
from netkernel.partitions import partition_of
from tests.eventually import assert_eventually
from tests.hubsvc.test_redis_store import channel, row
from tests.procs import ROOT
from tests.redis_server import RedisCluster as LocalCluster
from tests.redis_server import RedisServer

DB = 5
"""The DB number of these tests (flushed after each)."""
COUNT = 64
TTL = 1.0
"""Seconds a lease lives in these tests (short, so a pause outlives it quickly)."""


def test_rendezvous_assigns_every_partition_once_and_a_join_moves_only_its_share() -> None:
    three = assign(COUNT, ["r1", "r2", "r3"])
    assert sorted(three) == list(range(COUNT)) and set(three.values()) == {"r1", "r2", "r3"}
    assert assign(COUNT, ["r3", "r1", "r2", "r1"]) == three  # the order and repeats of the input do not matter
    four = assign(COUNT, ["r1", "r2", "r3", "r4"])
    moved = {p for p in range(COUNT) if three[p] != four[p]}
    assert {four[p] for p in moved} == {"r4"}  # only the newcomer takes partitions
    assert 8 <= len(moved) <= 28  # about 1/4 of 64
    # A leave moves only the leaver's partitions.
    two = assign(COUNT, ["r1", "r2"])
    assert all(two[p] == three[p] for p in range(COUNT) if three[p] != "r3")
    assert desired("r2", COUNT, ["r1", "r3"]) == {p for p, r in three.items() if r == "r2"}
    assert assign(COUNT, []) == {}


@pytest.fixture
def url(redis_server: RedisServer) -> Iterator[str]:
    """DB 5 of the session's redis-server."""
    yield redis_server.url(DB)
    redis_server.flush(DB)


class Replica:
    """One replica's store and ownership loop, with what its callbacks were told."""

    def __init__(self, store: RedisHubStore) -> None:
        assert store.partitions is not None
        self.store = store
        self.gained: list[tuple[int, int]] = []
        self.lost: list[tuple[int, int]] = []
        self.ownership = Ownership(
            store.partitions, store.liveness, ttl=TTL, refresh=TTL / 5, on_gained=self._gained, on_lost=self._lost
        )

    async def _gained(self, partition: int, epoch: int) -> None:
        self.gained.append((partition, epoch))

    async def _lost(self, partition: int, epoch: int) -> None:
        self.lost.append((partition, epoch))

    async def round(self) -> None:
        """What the hub's loops do each refresh: beat the liveness key, then one ownership round."""
        await self.store.liveness.beat(TTL)
        await self.ownership.step()

    @property
    def held(self) -> set[int]:
        return set(self.ownership.held)


@pytest.fixture
async def cluster_of(url: str) -> AsyncIterator[list[Replica]]:
    """Replicas made on demand (append to the list with :func:`add`); all closed afterwards."""
    replicas: list[Replica] = []
    yield replicas
    for r in replicas:
        await r.store.close()


async def add(replicas: list[Replica], url: str) -> Replica:
    store = RedisHubStore(url, prefix="own:", partitions=COUNT)
    await store.open()
    replica = Replica(store)
    replicas.append(replica)
    return replica


async def converge(replicas: list[Replica]) -> None:
    """Run rounds of every replica until they hold disjoint sets covering every partition, each
    exactly its rendezvous share of the replicas."""

    async def settled() -> bool:
        for r in replicas:
            await r.round()
        ids = [r.ownership.replica_id for r in replicas]
        return all(r.held == desired(r.ownership.replica_id, COUNT, ids) for r in replicas)

    await assert_eventually(settled)
    owned = [p for r in replicas for p in r.held]
    assert sorted(owned) == list(range(COUNT))  # disjoint and covering


async def check_map(replicas: list[Replica], epochs: dict[int, int]) -> None:
    """The store's map names each holder with the epoch it holds; no epoch went back since ``epochs``."""
    leases = await replicas[0].store.partitions.read_map()  # type: ignore[union-attr]
    holders = {p: r.ownership for r in replicas for p in r.held}
    for lease in leases:
        assert lease.epoch >= epochs.get(lease.partition, 0)
        epochs[lease.partition] = lease.epoch
        if lease.partition in holders:
            own = holders[lease.partition]
            assert (lease.owner, lease.epoch) == (own.replica_id, own.held[lease.partition])


async def test_three_replicas_converge_and_a_join_moves_about_a_quarter(url: str, cluster_of: list[Replica]) -> None:
    for _ in range(3):
        await add(cluster_of, url)
    await converge(cluster_of)
    epochs: dict[int, int] = {}
    await check_map(cluster_of, epochs)
    for r in cluster_of:  # told of each partition it holds, with its epoch
        assert set(r.gained) - set(r.lost) >= set(r.ownership.held.items())
    before = {p: r.ownership.replica_id for r in cluster_of for p in r.held}
    for r in cluster_of:
        r.lost.clear()
    newcomer = await add(cluster_of, url)
    await converge(cluster_of)
    after = {p: r.ownership.replica_id for r in cluster_of for p in r.held}
    moved = {p for p in range(COUNT) if before[p] != after[p]}
    assert moved == newcomer.held  # only partitions the newcomer now owns moved
    # exactly the newcomer's rendezvous share (its ids are random, so its size varies: the share's
    # size for fixed ids is checked in test_rendezvous_assigns_every_partition_once_and_...)
    assert moved == desired(newcomer.ownership.replica_id, COUNT, [r.ownership.replica_id for r in cluster_of])
    for r in cluster_of[:3]:  # the others were told before they let go
        assert {p for p, _ in r.lost} == {p for p in moved if before[p] == r.ownership.replica_id}
    await check_map(cluster_of, epochs)
    assert all(epochs[p] >= 2 for p in moved)  # each moved partition was taken with a new epoch


async def test_a_paused_replica_loses_its_partitions_and_cannot_commit_with_its_old_epoch(
    url: str, cluster_of: list[Replica]
) -> None:
    for _ in range(3):
        await add(cluster_of, url)
    await converge(cluster_of)
    paused, survivors = cluster_of[0], cluster_of[1:]
    epochs: dict[int, int] = {}
    await check_map(cluster_of, epochs)
    partition = min(paused.held)
    epoch = paused.ownership.held[partition]
    ch = next(f"ch{i}" for i in range(10_000) if partition_of(f"ch{i}", COUNT) == partition)
    fence = paused.ownership.fence_for([ch])
    assert fence == {partition: epoch}
    await paused.store.commit(Writes(channels=[channel(ch, "a1")], wal=[row(ch, 1)], fence=fence))
    stolen = set(paused.held)
    paused.lost.clear()

    # The paused replica runs no round (no beat, no renewal) past the TTL; the survivors take its partitions.
    async def taken_over() -> bool:
        for r in survivors:
            await r.round()
        ids = [r.ownership.replica_id for r in survivors]
        return all(r.held == desired(r.ownership.replica_id, COUNT, ids) for r in survivors)

    await assert_eventually(taken_over)
    assert sorted(p for r in survivors for p in r.held) == list(range(COUNT))
    await check_map(survivors, epochs)
    # Still believing it owns the partition, it commits with the old epoch: refused, nothing written.
    assert paused.ownership.fence_for([ch]) == {partition: epoch}
    with pytest.raises(PartitionMoved):
        await paused.store.commit(Writes(wal=[row(ch, 2)], fence={partition: epoch}))
    assert await paused.store.channel_seq(ch) == 1
    assert len(await paused.store.read_wal(ch, 0, 0, 0)) == 1
    # The new owner commits with its own, higher epoch.
    owner = next(r for r in survivors if partition in r.held)
    new_fence = owner.ownership.fence_for([ch])
    assert new_fence is not None and new_fence[partition] > epoch
    await owner.store.lift_fence(ch)
    await owner.store.commit(Writes(wal=[row(ch, 2)], fence=new_fence))
    assert await owner.store.channel_seq(ch) == 2
    # Resumed, its first renewal reports every lease lost: dropped at once, on_lost told, no fence offered.
    await paused.ownership.step()
    assert {p for p, _ in paused.lost} == stolen
    assert paused.ownership.fence_for([ch]) is None
    # And it rejoins: the partitions are shared again, each moved one with a higher epoch than before.
    await converge(cluster_of)
    await check_map(cluster_of, epochs)


async def test_a_clean_stop_hands_its_partitions_over(url: str, cluster_of: list[Replica]) -> None:
    for _ in range(2):
        await add(cluster_of, url)
    await converge(cluster_of)
    leaving, staying = cluster_of
    given = set(leaving.held)
    leaving.lost.clear()
    await leaving.ownership.stop()
    await leaving.store.liveness.leave()
    assert {p for p, _ in leaving.lost} == given and not leaving.held
    await staying.round()  # freed leases: taken at the next round, no lapse to wait for
    assert staying.held == set(range(COUNT))


@pytest.mark.parametrize("layout", ["server", "spread"])
async def test_a_sigstopped_lease_holder_cannot_commit_once_its_partition_moved(
    layout: str, request: pytest.FixtureRequest
) -> None:
    """A real process holds the lease, is frozen (SIGSTOP) past its TTL, another replica takes the
    partition and commits; thawed (SIGCONT), the frozen process's in-flight commit with its old
    epoch is refused and writes nothing. On one redis-server, and on a Cluster with the spread
    layout (the channel part checks the lease's end and the channel's fence, not the lease key)."""
    if layout == "server":
        url = request.getfixturevalue("url")
    else:
        cluster: LocalCluster = request.getfixturevalue("redis_cluster")
        url = cluster.url() + "?spread=1"
        request.addfinalizer(cluster.flush)
    partition = 3
    ch = next(f"ch{i}" for i in range(10_000) if partition_of(f"ch{i}", COUNT) == partition)
    holder = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.hubsvc.lease_holder", url, "frozen:", str(COUNT), str(partition), str(TTL),
        cwd=ROOT, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert holder.stdin is not None and holder.stdout is not None
    store = RedisHubStore(url, prefix="frozen:", partitions=COUNT)
    await store.open()
    try:
        line = await asyncio.wait_for(holder.stdout.readline(), 30)
        old = int(line.split()[1])
        holder.stdin.write(f"commit {ch} 1\n".encode())
        assert await asyncio.wait_for(holder.stdout.readline(), 30) == b"ok\n"
        leases = store.partitions
        assert leases is not None
        holder.send_signal(signal.SIGSTOP)

        async def taken() -> bool:
            return (await leases.acquire([partition], 30)).gained.get(partition) == old + 1

        await assert_eventually(taken)  # its lease lapsed by Redis's clock while it was frozen
        await store.commit(Writes(wal=[row(ch, 2)], fence={partition: old + 1}))
        holder.send_signal(signal.SIGCONT)
        holder.stdin.write(f"commit {ch} 3\n".encode())
        assert await asyncio.wait_for(holder.stdout.readline(), 30) == b"moved\n"
        assert await store.channel_seq(ch) == 2
        assert len(await store.read_wal(ch, 0, 0, 0)) == 2
        assert (await leases.read_map())[partition].epoch == old + 1
    finally:
        holder.send_signal(signal.SIGCONT)
        holder.kill()
        await holder.wait()
        await store.close()
