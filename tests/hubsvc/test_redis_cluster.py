"""The hub on a Redis Cluster whose shard fails over: the master holding the hub's slot dies,
Redis promotes its replica, and the hub goes on with everything it acknowledged.

The store and replica tests run on a Cluster too (test_redis_store.py, test_replicas.py); this
module needs a Cluster with replicas of its own (six redis-servers, short node timeout).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from agentnet.v1 import hub_pb2
from redis.crc import key_slot

from agentsdk.errors import Unavailable
from hubsvc.storage.redis_store import RedisHubStore
from tests.hubsvc import harness
from tests.hubsvc.harness import EV_TEXT, Participant, collect, make_envelope
from tests.redis_server import RedisCluster, RedisServerMissing, start_redis_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    """Three masters with one replica each; a master unreachable for 1 s is failed over."""
    try:
        started = start_redis_cluster(
            tmp_path_factory.mktemp("redis-cluster-replicas"),
            masters=3,
            replicas=1,
            extra_args=["--cluster-node-timeout", "1000"],
        )
    except RedisServerMissing as exc:
        pytest.fail(str(exc))
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(params=["one-slot", "spread"])
def on_cluster(cluster: RedisCluster, request: pytest.FixtureRequest) -> Iterator[None]:
    """Hubs on the Cluster, the whole hub in one slot or its channels spread (``?spread=1``)."""
    spread = "?spread=1" if request.param == "spread" else ""
    harness.STORE.kind, harness.STORE.redis_url = "redis", cluster.url() + spread
    try:
        yield
    finally:
        harness.STORE.kind, harness.STORE.redis_url = "sqlite", ""
        cluster.flush()


async def test_the_hub_goes_on_after_the_master_of_its_slot_fails_over_to_a_replica(
    on_cluster: None, cluster: RedisCluster, tmp_path: Path
) -> None:
    """Two hub replicas on the Cluster; bob follows alice's posts through the other replica (the
    change feed), before and after the failover of the master holding the channel (the hub's
    one slot, or with spread=1 the channel's own slot)."""
    async with harness.running_hub(tmp_path / "hub.db") as hub, harness.running_hub(tmp_path / "hub.db") as other:
        alice, bobs, channel_id = await harness.conversation(hub.target)
        await bobs.close()
        bob = Participant(other.target, bobs.record, bobs.credential)
        await bob.connect()
        said = [await alice.say(channel_id, f"before {i}") for i in range(5)]
        assert [e.envelope_id for e in await bob.until(said[-1].envelope_id)][-1] == said[-1].envelope_id
        store = hub.core.store
        assert isinstance(store, RedisHubStore)
        slot = key_slot(store.channel_key(channel_id, "wal").encode())
        master, replicas = cluster.owner_of(slot)
        assert replicas, "the hub's slot has no replica to fail over to"
        client = redis.Redis(host="127.0.0.1", port=master)
        try:
            assert client.execute_command("WAIT", 1, 10_000) == 1  # the replica has every acked write
        finally:
            client.close()
        cluster.node(master).proc.kill()

        failures: list[Exception] = []

        async def post_after() -> hub_pb2.PostEnvelopeResponse:
            env = make_envelope(channel_id, EV_TEXT, {"text": "after the failover"}, idempotency_key="after-1")
            try:
                return await alice.rpc("PostEnvelope", hub_pb2.PostEnvelopeRequest(envelope=env))
            except Exception as exc:  # the shard is down until its replica is promoted: retry
                failures.append(exc)
                raise

        after = (await harness.assert_eventually(post_after, timeout=60, interval=0.2)).envelope
        assert all(isinstance(f, Unavailable) for f in failures), failures  # never INTERNAL
        assert cluster.owner_of(slot)[0] in replicas  # served by the promoted replica now
        # bob's replica follows the feed from the promoted replica: the post reaches him, and
        # the WAL he reads there holds every acknowledged post once, seqs contiguous.
        assert (await bob.until(after.envelope_id, timeout=30))[-1].envelope_id == after.envelope_id
        stream = bob.stub.ReadWal(hub_pb2.ReadWalRequest(channel_id=channel_id), metadata=bob.metadata, timeout=10)
        wal = [item.envelope for item in await collect(stream)]
        assert [e.seq for e in wal] == list(range(1, len(wal) + 1))
        texts = [e.envelope_id for e in wal if e.event_type == EV_TEXT]
        assert texts == [s.envelope_id for s in said] + [after.envelope_id]
        # The killed node comes back as the promoted one's replica (the next test may need it).
        cluster.node(master).restart()
        await harness.assert_eventually(lambda: master in cluster.owner_of(slot)[1], timeout=30, interval=0.2)
        await alice.close()
        await bob.close()
