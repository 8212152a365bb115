"""One hub's channels spread over a Redis Cluster's shards (``redis+cluster://…?spread=1``).

The store and replica suites run on this layout too (test_redis_store.py, test_replicas.py);
this module covers what only the spread layout has: channels on several masters, the per-slot
commit whose global part is completed by another store when the writer died between the parts,
and the guard against replicas with different layouts.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import cast

import pytest
from agentnet.v1 import hub_pb2
from redis.asyncio.cluster import RedisCluster

from agentsdk.errors import Unavailable
from hubsvc.server import start_hub
from hubsvc.storage import AgentRow, Writes
from hubsvc.storage.faults import StoreFaults
from hubsvc.storage.redis_connect import connect
from hubsvc.storage.redis_store import RedisHubStore
from tests.hubsvc import harness
from tests.hubsvc.crashing_hub import EXIT_STATUS
from tests.hubsvc.harness import EV_TEXT, Participant, RunningHub, make_envelope
from tests.hubsvc.test_redis_store import channel, row
from tests.procs import ROOT, start_service
from tests.redis_server import RedisCluster as LocalCluster
from tests.redis_server import start_redis_cluster


@pytest.fixture
def spread_url(redis_cluster: LocalCluster) -> Iterator[str]:
    """The session's local Cluster with the spread layout (flushed afterwards)."""
    yield redis_cluster.url() + "?spread=1"
    redis_cluster.flush()


@pytest.fixture
async def spread_store(spread_url: str) -> AsyncIterator[RedisHubStore]:
    store = RedisHubStore(spread_url, prefix="spread:")
    await store.open()
    yield store
    await store.close()


async def test_channels_land_on_several_masters_each_channel_in_one_slot(
    spread_store: RedisHubStore, spread_url: str, redis_cluster: LocalCluster
) -> None:
    ids = [f"ch{i}" for i in range(16)]
    # Submitted together: one group, whose channel parts go to several nodes in one pipeline.
    await asyncio.gather(
        *(spread_store.commit(Writes(channels=[channel(c, "a1")], wal=[row(c, 1, key="k")])) for c in ids)
    )
    await asyncio.gather(
        *(spread_store.commit(Writes(wal=[row(c, 2)], audit=[("k", "a1", c, "{}", 1.0)])) for c in ids)
    )
    client = connect(spread_url, 5)
    assert isinstance(client, RedisCluster)
    try:
        keys = cast("list[bytes]", await client.keys("*", target_nodes=RedisCluster.PRIMARIES))
        by_channel: dict[str, set[int]] = {}
        global_slots: set[int] = set()
        for key in keys:
            tag = key[1 : key.index(b"}")].decode()
            if tag.startswith("spread:c:"):
                by_channel.setdefault(tag.removeprefix("spread:c:"), set()).add(client.keyslot(key))
            else:
                assert tag == "spread:", key
                global_slots.add(client.keyslot(key))
        assert set(by_channel) == set(ids)
        assert all(len(slots) == 1 for slots in by_channel.values())  # one channel, one slot
        assert len(global_slots) == 1
        masters = {redis_cluster.owner_of(next(iter(slots)))[0] for slots in by_channel.values()}
        assert len(masters) > 1, masters
    finally:
        await client.aclose()
    # Reads that span channels see every channel, in creation order.
    live = await spread_store.load_live_channels()
    assert sorted(r.channel_id for r in live) == sorted(ids)
    listed = await spread_store.list_channels(live_only=False, before=0, limit=100)
    assert len(listed) == len(ids) and [o for o, _ in listed] == sorted((o for o, _ in listed), reverse=True)
    walled = {c: len(d) async for c, d in spread_store.scan_wal(ids)}
    assert walled == dict.fromkeys(ids, 2)
    assert len(await spread_store.list_audit(kind="k", subject_id="", after_id=0, limit=100)) == len(ids)
    assert await spread_store.list_channels_for("a1", include_ended=True, limit=3) != []
    assert await spread_store.complete_pending(immediately=True) == 0  # every global part was applied


async def test_a_global_part_missing_after_its_writer_stopped_is_completed_once_at_open(
    spread_store: RedisHubStore, spread_url: str
) -> None:
    """Drive the commit's lower-level pieces: the channel part of a bundle commits, its global part
    never runs (the writer died). A store opening on the same keys completes it — WAL entry,
    envelope index, audit row and change-feed entry — and applying it again changes nothing."""
    await spread_store.commit(Writes(channels=[channel("c1", "a1")], wal=[row("c1", 1)]))
    position = await spread_store.feed.position()
    orphan = row("c1", 2, key="k2")
    plan = spread_store._plan()
    plan.add(Writes(wal=[orphan], audit=[("orphaned", "a1", "c1", "{}", 2.0)]))
    bundle_id, part, (global_keys, global_args) = plan.spread_calls()
    assert part is not None
    (result,) = await spread_store._script.run_many([(part[1].keys, [0, *part[1].args()])])
    assert int(result[0]) == 1
    assert len(await spread_store.read_wal("c1", 0, 0, 0)) == 2
    assert await spread_store.find_envelope(orphan.envelope_id) is None  # the global part is missing

    again = RedisHubStore(spread_url, prefix="spread:")
    await again.open()  # hydrate completes what it finds pending
    try:
        assert await again.find_envelope(orphan.envelope_id) == orphan.data
        audit = await again.list_audit(kind="orphaned", subject_id="", after_id=0, limit=10)
        assert len(audit) == 1
        _, changes = await again.feed.read(position, 0.1)
        assert [c.channels for c in changes] == [{"c1": 2}]
        assert changes[0].origin == spread_store.feed.replica_id  # the writer's, so its own replicas skip it
        # The same global part applied again (a late writer, a second completer) changes nothing.
        (late,) = await again._script.run_many([(global_keys, [0, *global_args])])
        assert int(late[0]) == 3
        assert len(await again.list_audit(kind="orphaned", subject_id="", after_id=0, limit=10)) == 1
        assert await again.complete_pending(immediately=True) == 0
        assert bundle_id
    finally:
        await again.close()


async def test_a_bundle_done_before_its_outbox_entry_was_deleted_is_not_applied_again(
    spread_store: RedisHubStore, spread_url: str
) -> None:
    """The writer died after the global part, before deleting the outbox entry: its done mark
    stays (it lapses only once the entry is gone), so whoever finds the entry, however late,
    applies nothing and deletes it."""
    await spread_store.commit(Writes(channels=[channel("c1", "a1")]))
    plan = spread_store._plan()
    plan.add(Writes(wal=[row("c1", 1)], audit=[("once", "a1", "c1", "{}", 1.0)]))
    bundle_id, part, global_call = plan.spread_calls()
    assert part is not None
    results = await spread_store._script.run_many([(part[1].keys, [0, *part[1].args()])])
    results += await spread_store._script.run_many([(global_call[0], [0, *global_call[1]])])
    assert [int(r[0]) for r in results] == [1, 1]
    client = connect(spread_url, 5)
    try:
        done = "{spread:}{g}:outbox:done"
        assert await client.zscore(done, bundle_id) == float("inf")  # kept while the entry exists
        assert await spread_store.complete_pending(immediately=True) == 0
        assert len(await spread_store.list_audit(kind="once", subject_id="", after_id=0, limit=10)) == 1
        assert not await client.exists(spread_store.channel_key("c1", "outbox"))
        assert await client.zscore(done, bundle_id) != float("inf")  # lapses some time after the deletion
    finally:
        await client.aclose()


async def test_a_group_whose_channel_parts_get_no_answer_fails_every_bundle_not_yet_written(
    tmp_path: Path,
) -> None:
    """A group with a channel bundle and a bundle that has only a global part, sent while every
    master is frozen: the channel parts' pipeline gets no answer, so neither bundle may be answered
    as written (the global-only one was never sent)."""
    cluster = start_redis_cluster(tmp_path / "cluster")
    store = RedisHubStore(cluster.url() + "?spread=1", prefix="frozen:", timeout=0.5)
    try:
        await store.open()
        await store.commit(Writes(channels=[channel("c1", "a1")], wal=[row("c1", 1)]))
        for node in cluster.nodes:
            os.kill(node.proc.pid, signal.SIGSTOP)
        try:
            # Submitted in one turn: one group for the writer.
            written = store.submit(Writes(wal=[row("c1", 2)]))
            global_only = store.submit(Writes(audit=[("k", "a1", "s", "{}", 1.0)]))
            results = await asyncio.wait_for(asyncio.gather(written, global_only, return_exceptions=True), 60)
        finally:
            for node in cluster.nodes:
                os.kill(node.proc.pid, signal.SIGCONT)
        assert [type(r) for r in results] == [Unavailable, Unavailable], results
    finally:
        await store.close()
        cluster.stop()


async def test_a_channel_write_carrying_a_global_check_is_refused_whole(spread_store: RedisHubStore) -> None:
    """Only channel parts may refuse with the spread layout, so a bundle that writes a channel and
    claims a name (a global check) is refused before anything is sent."""
    await spread_store.commit(Writes(channels=[channel("c1", "a1")]))
    with pytest.raises(Unavailable) as refused:
        await spread_store.commit(Writes(wal=[row("c1", 1)], agents=[AgentRow("a9", "zed", "h", b"r")]))
    assert "may not carry global checks" in str(refused.value.__cause__)
    await spread_store.lift_fence("c1")
    assert await spread_store.read_wal("c1", 0, 0, 0) == [] and await spread_store.get_agent("a9") is None


async def test_replicas_must_agree_on_the_layout(redis_cluster: LocalCluster) -> None:
    single = RedisHubStore(redis_cluster.url(), prefix="layout:")
    await single.open()
    try:
        await single.commit(Writes(channels=[channel("c1", "a1")]))
        spread = RedisHubStore(redis_cluster.url() + "?spread=1", prefix="layout:")
        with pytest.raises(ValueError, match="written with spread=0 and this store has spread=1"):
            await spread.open()
        await spread.close()
    finally:
        await single.close()
        redis_cluster.flush()


@pytest.mark.parametrize("query", ["?spread=2", "?spreads=1", "?spread=1&x=1"])
def test_a_bad_cluster_url_option_is_named(query: str) -> None:
    with pytest.raises(ValueError, match="takes one option, spread=0 or spread=1"):
        RedisHubStore("redis+cluster://127.0.0.1:7000" + query)


async def test_a_replica_that_dies_between_the_parts_is_made_up_for_by_another(
    spread_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A hub process exits (for real) right after a post's channel part committed, before its
    global part (envelope index, change-feed entry). The surviving replica's sweep completes it:
    the participant connected there receives the post, and the index finds it."""
    async with AsyncExitStack() as stack:
        store = RedisHubStore(spread_url, sweep_interval=0.2)
        server = await start_hub(store, operator_token=harness.OPERATOR_TOKEN)
        stack.push_async_callback(server.stop, 0.5)
        survivor = RunningHub(server, Path("unused"))
        alice, bob, channel_id = await harness.conversation(survivor.target)
        stack.push_async_callback(alice.close)
        stack.push_async_callback(bob.close)
        first = await alice.say(channel_id, "through the survivor")
        assert (await bob.next_of(EV_TEXT)).envelope_id == first.envelope_id

        doomed = start_service(  # the hub, exiting between the parts of the bundle keyed "die-here"
            "tests.hubsvc.crashing_hub",
            ["--exit-between-parts", "die-here", "--store", spread_url, "--data-dir", str(tmp_path)],
            cwd=ROOT,
        )
        try:
            bobs_turn = await bob.say(channel_id, "your turn")
            alice_there = Participant(doomed.target, alice.record, alice.credential)
            post = make_envelope(channel_id, EV_TEXT, {"text": "lost writer"}, idempotency_key="die-here")

            with pytest.raises(Exception):  # noqa: B017 - the process dies mid-call: any transport error
                await alice_there.rpc("PostEnvelope", hub_pb2.PostEnvelopeRequest(envelope=post), timeout=10)
            assert doomed.proc.wait(timeout=15) == EXIT_STATUS  # it exited between the parts, not otherwise
        finally:
            doomed.terminate(signal.SIGKILL)
        assert bobs_turn.seq == first.seq + 1

        # The survivor completes the global part; bob, connected there, receives the post.
        got = await bob.next(lambda e: e.idempotency_key == "die-here", timeout=30)
        assert got.seq == bobs_turn.seq + 1 and got.idempotency_key == "die-here"
        assert await store.find_envelope(got.envelope_id) is not None
        assert any("its writer stopped between the parts" in r.getMessage() for r in caplog.records)
        # The channel goes on: alice's next post through the survivor follows it.
        after = await alice.say(channel_id, "after")
        assert after.seq == got.seq + 1


class StopBetweenParts(StoreFaults):
    """Records the idempotency keys of the bundles each call of the fault point is told of, and
    stops the writer there (raises) when it meets the bundle keyed ``key``."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.seen: list[list[str | None]] = []

    def between_parts(self, written: Sequence[Writes]) -> None:
        keys = [w.idempotency_key for writes in written for w in writes.wal]
        self.seen.append(keys)
        if self.key in keys:
            raise RuntimeError("the writer stopped between the parts")


async def test_the_fault_seam_is_told_of_each_bundle_between_its_parts(spread_url: str) -> None:
    """The store's fault point between the parts is told of exactly the bundles whose channel part
    committed; a writer stopped there leaves the global part to another store, which completes it."""
    faults = StopBetweenParts("k2")
    store = RedisHubStore(spread_url, prefix="faults:", faults=faults)
    await store.open()
    try:
        await store.commit(Writes(channels=[channel("c1", "a1")], wal=[row("c1", 1, key="k1")]))
        stopped = row("c1", 2, key="k2")
        with pytest.raises(Unavailable):
            await store.commit(Writes(wal=[stopped]))
        assert faults.seen == [["k1"], ["k2"]]
        assert await store.find_envelope(stopped.envelope_id) is None  # its global part never ran
        # A bundle whose channel part is refused (seq 2 is taken) never reaches the point.
        await store.lift_fence("c1")
        with pytest.raises(Unavailable):
            await store.commit(Writes(wal=[row("c1", 2, key="k3")]))
        assert faults.seen == [["k1"], ["k2"], []]
        other = RedisHubStore(spread_url, prefix="faults:")
        await other.open()  # completes what it finds pending
        try:
            assert await other.find_envelope(stopped.envelope_id) == stopped.data
        finally:
            await other.close()
    finally:
        await store.close()
