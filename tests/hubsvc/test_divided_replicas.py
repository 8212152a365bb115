"""Channels divided among replicas (``--partitions``): each channel is held — admitted into, folded,
timed — by the replica owning its partition; the others forward what they receive for it and
deliver it to their members without a fold (docs/scale-out.md "Channels divided among the replicas").

Replicas are real gRPC servers in this process on one redis-server, each with its own store on
the same keys, with short leases so ownership moves within a second or two.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import grpc
import pytest
from agentnet.v1 import (
    channel_pb2,
    envelope_pb2,
    hub_pb2,
    operator_pb2,
    operator_pb2_grpc,
    replica_pb2,
    replica_pb2_grpc,
    task_pb2,
)

from agentsdk.operator import OperatorClient
from hubsvc.core.options import HubOptions
from hubsvc.core.ownership import Ownership
from hubsvc.core.partition_map import desired
from hubsvc.server import start_hub
from hubsvc.storage.redis_connect import connect
from hubsvc.storage.redis_store import RedisHubStore
from netkernel.envelope import EV_TASK_CANCEL_REQUEST, EV_TASK_CANCELLED
from netkernel.errors import InvalidArgument, NotYourTurn, Unauthenticated, Unavailable
from netkernel.partitions import partition_of
from netkernel.tasks import cancel_and_wait
from servicekit.metrics import MetricsSettings
from tests.eventually import assert_eventually
from tests.hubsvc import harness
from tests.hubsvc.harness import OPERATOR_TOKEN, Participant, RunningHub, conversation, data_of, open_channel, register
from tests.hubsvc.test_replica_forwarding import peers_of
from tests.hubsvc.test_replicas import REDIS_DB, on
from tests.scrape import scrape, value

PARTITIONS = 8
OPTIONS = HubOptions(replica_ttl=1.5, replica_refresh=0.2)


@pytest.fixture(params=["redis", "cluster-spread"])
def redis_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """The session's redis-server (database REDIS_DB), or its local Redis Cluster with the channels
    spread over the shards (``?spread=1``); emptied afterwards."""
    with harness.on_redis(request, request.param, REDIS_DB):
        yield harness.STORE.redis_url


class Divided:
    """Replicas dividing one store's channels, started and stopped on demand."""

    def __init__(self, stack: AsyncExitStack, url: str, prefix: str) -> None:
        self._stack, self._url, self._prefix = stack, url, prefix
        self.hubs: list[RunningHub] = []
        self.stopped: set[int] = set()

    async def stop(self, hub: RunningHub) -> None:
        """Stop ``hub`` cleanly (it hands its partitions over)."""
        self.stopped.add(id(hub))
        await hub.server.stop(0.5)

    async def start(self, options: HubOptions = OPTIONS, **serving: Any) -> RunningHub:
        """Start a replica (``serving``: more of :func:`start_hub`'s arguments, e.g. ``tls``)."""
        store = RedisHubStore(self._url, prefix=self._prefix, partitions=PARTITIONS)
        server = await start_hub(store, operator_token=OPERATOR_TOKEN, options=options, **serving)
        hub = RunningHub(server, Path("unused"))
        self._stack.push_async_callback(self._stop_unless_stopped, hub)
        self.hubs.append(hub)
        return hub

    async def _stop_unless_stopped(self, hub: RunningHub) -> None:
        if id(hub) not in self.stopped:
            await self.stop(hub)

    async def settled(self) -> None:
        """Wait until each live replica holds exactly its rendezvous share of the partitions (which
        may be none: 8 partitions over 3 replicas can leave one without any)."""
        live = [h for h in self.hubs if id(h) not in self.stopped]

        ownerships = [h.core.placement.ownership for h in live]
        assert all(o is not None for o in ownerships)
        ids = [o.replica_id for o in ownerships if o is not None]

        async def even() -> bool:
            return all(set(o.held) == desired(o.replica_id, PARTITIONS, ids) for o in ownerships if o is not None)

        await assert_eventually(even, timeout=15)


@pytest.fixture
async def divided(redis_url: str, tmp_path: Path) -> AsyncIterator[Divided]:
    prefix = f"divided:{hashlib.sha256(str(tmp_path).encode()).hexdigest()[:12]}:"
    async with AsyncExitStack() as stack:
        yield Divided(stack, redis_url, prefix)


def holder(hubs: list[RunningHub], channel_id: str) -> RunningHub:
    """The replica holding ``channel_id`` in memory (exactly one does)."""
    holding = [h for h in hubs if channel_id in h.core.channels.table.channels]
    assert len(holding) == 1, f"{len(holding)} replicas hold {channel_id}"
    return holding[0]


def holding_and_not(a: RunningHub, b: RunningHub) -> tuple[RunningHub, RunningHub]:
    """Of two settled replicas, one that holds partitions (a channel opened through it is held there)
    and the other: 8 partitions over two replicas can leave one of them none."""
    ownership = a.core.placement.ownership
    assert ownership is not None
    return (a, b) if ownership.held else (b, a)


async def alice_and_bob(
    divided: Divided, type: str, *, bob_on: str
) -> tuple[RunningHub, RunningHub, Participant, Participant, str]:
    """Two settled replicas ``a`` (holding partitions) and ``b``; alice connected to ``a``, bob to
    ``a`` or ``b`` (``bob_on``), and a channel of ``type`` alice opened: held by ``a``."""
    a = await divided.start()
    b = await divided.start()
    await divided.settled()
    a, b = holding_and_not(a, b)  # a opens the channel: it must hold a partition to hold it
    alice = await register(a.target, "alice")
    bob = await register(a.target, "bob")
    if bob_on == "b":
        bob = on(b, bob)
    await alice.connect()
    await bob.connect()
    channel_id = await open_channel(alice, type, [bob])
    assert holder(divided.hubs, channel_id) is a
    return a, b, alice, bob, channel_id


async def stored_wal(hub: RunningHub, channel_id: str) -> list[envelope_pb2.Envelope]:
    """The channel's whole WAL as the store holds it, checked to have contiguous seqs from 1."""
    wal = [envelope_pb2.Envelope.FromString(d) for d in await hub.core.store.read_wal(channel_id, 1, 0, 10_000)]
    assert [e.seq for e in wal] == list(range(1, len(wal) + 1)), [e.seq for e in wal]
    return wal


async def test_a_channel_is_held_by_one_replica_and_served_through_any(divided: Divided) -> None:
    a = await divided.start()
    b = await divided.start()
    c = await divided.start()
    await divided.settled()
    alice = await register(a.target, "alice")
    bob = on(b, await register(a.target, "bob"))
    carol = on(c, await register(a.target, "carol"))
    for p in (alice, bob, carol):
        await p.connect()
    # A discussion: turns go alice, bob, carol; each posts through its own replica.
    channel_id = await open_channel(alice, "discussion", [bob, carol])
    held_by = holder(divided.hubs, channel_id)
    ownership = a.core.placement.ownership
    assert ownership is not None
    assert held_by is a or not ownership.held  # opened in a partition a holds, if it holds any
    said = [await alice.say(channel_id, "one")]
    seen: dict[str, list[envelope_pb2.Envelope]] = {p.agent_id: [] for p in (alice, bob, carol)}
    for speaker, text in ((bob, "two"), (carol, "three"), (alice, "four")):
        seen[speaker.agent_id] += await speaker.until(said[-1].envelope_id)  # its turn has come
        said.append(await speaker.say(channel_id, text))
    # Out of turn through a replica that does not hold the channel: the holder's refusal comes back.
    with pytest.raises(NotYourTurn):
        await carol.say(channel_id, "not yet")
    for p in (bob, carol):  # every member got every text once, in order, wherever it is connected
        seen[p.agent_id] += await p.until(said[-1].envelope_id)
        got = [e.envelope_id for e in seen[p.agent_id] if e.event_type == "ag2.msg.text"]
        assert got == [s.envelope_id for s in said if s.sender_id != p.agent_id]
    wal = await stored_wal(b, channel_id)
    assert [e.envelope_id for e in wal if e.event_type == "ag2.msg.text"] == [s.envelope_id for s in said]
    # Only the holder folded it: the other replicas follow it, and say so in GetStatus.
    assert all(channel_id in h.core.channels.followers.channels for h in (a, b, c) if h is not held_by)
    for hub in (a, b, c):
        ownership = hub.core.placement.ownership
        assert ownership is not None

        async def status_shows_the_map(hub: RunningHub = hub, ownership: Ownership = ownership) -> bool:
            async with grpc.aio.insecure_channel(hub.target) as ch:
                status = await operator_pb2_grpc.OperatorServiceStub(ch).GetStatus(
                    operator_pb2.GetStatusRequest(),
                    metadata=(("authorization", f"Bearer {OPERATOR_TOKEN}"),),
                    timeout=10,
                )
            p = status.partitions
            assert (p.count, list(p.held)) == (PARTITIONS, sorted(ownership.held))
            assert p.followed_channels == (0 if hub is held_by else 1)
            mine = {o.replica_id for o in p.owners if o.partition in ownership.held}
            return [o.partition for o in p.owners] == list(range(PARTITIONS)) and mine <= {status.replica_id}

        await assert_eventually(status_shows_the_map)  # the map as of the replica's last ownership round
    for p in (alice, bob, carol):
        await p.close()


async def test_calls_about_a_channel_held_elsewhere_are_answered_by_its_holder(divided: Divided) -> None:
    a, b, alice, bob, channel_id = await alice_and_bob(divided, "discussion", bob_on="b")
    first = await alice.say(channel_id, "hello")
    await bob.next(lambda e: e.envelope_id == first.envelope_id)
    # CanSend, PostEnvelope and CloseChannel reach b, which does not hold the channel.
    answer = await bob.rpc("CanSend", hub_pb2.CanSendRequest(channel_id=channel_id, event_type="ag2.msg.text"))
    assert answer.allowed and list(answer.expected_next) == [bob.agent_id]
    refused = await on(b, alice).rpc("CanSend", hub_pb2.CanSendRequest(channel_id=channel_id))
    assert not refused.allowed and refused.refusal.reason == "NOT_YOUR_TURN"
    posted = await bob.rpc(
        "PostEnvelope",
        hub_pb2.PostEnvelopeRequest(envelope=harness.make_envelope(channel_id, "ag2.msg.text", {"text": "hi"})),
    )
    assert posted.envelope.seq == first.seq + 1 and posted.envelope.sender_id == bob.agent_id
    closed = await bob.rpc("CloseChannel", hub_pb2.CloseChannelRequest(channel_id=channel_id))
    assert closed.channel.state == channel_pb2.CHANNEL_STATE_CLOSED
    await alice.next_of("ag2.channel.closed")
    wal = await stored_wal(a, channel_id)
    assert wal[-1].event_type == "ag2.channel.closed"
    await alice.close()
    await bob.close()


async def test_a_replica_that_stops_hands_its_channels_over(divided: Divided) -> None:
    a = await divided.start()
    b = await divided.start()
    await divided.settled()
    a, b = holding_and_not(a, b)  # a opens the channel: it must hold a partition to hold it
    alice = on(b, await register(a.target, "alice"))
    bob = on(b, await register(a.target, "bob"))
    opener = on(a, alice)
    await opener.connect()
    await bob.connect()
    channel_id = await open_channel(opener, "conversation", [bob])
    assert holder(divided.hubs, channel_id) is a
    await opener.close()
    await alice.connect()
    sent = [await alice.say(channel_id, f"before {i}", idempotency_key=f"k{i}") for i in range(5)]
    await divided.stop(a)  # a clean stop: a releases its partitions, b takes them
    await divided.settled()
    assert holder([b], channel_id) is b
    sent += [await alice.say(channel_id, f"after {i}", idempotency_key=f"j{i}") for i in range(5)]
    got = [e.envelope_id for e in await bob.until(sent[-1].envelope_id) if e.event_type == "ag2.msg.text"]
    assert got == [s.envelope_id for s in sent]
    wal = await stored_wal(b, channel_id)
    assert [e.idempotency_key for e in wal if e.event_type == "ag2.msg.text"] == [f"k{i}" for i in range(5)] + [
        f"j{i}" for i in range(5)
    ]
    await alice.close()
    await bob.close()


async def notices_told(url: str, hub: RunningHub) -> int:
    """How many notices the store has written to ``hub``'s notice stream (docs/scale-out.md, "Channel notices")."""
    store = hub.core.store
    assert isinstance(store, RedisHubStore)
    mine = store.feed.notices_of(store.feed.replica_id)
    assert mine is not None
    client = connect(url, 5)
    try:
        return int(await client.get(mine[1]) or 0)
    finally:
        await client.aclose()


async def test_texts_reach_members_wherever_they_connect_and_no_other_replica_is_told(
    divided: Divided, redis_url: str
) -> None:
    for _ in range(3):
        await divided.start()
    await divided.settled()
    a = next(h for h in divided.hubs if h.core.placement.ownership and h.core.placement.ownership.held)
    b, c = [h for h in divided.hubs if h is not a]  # a opens the channel, so holds it
    alice = await register(a.target, "alice")
    bobs = await register(a.target, "bob")
    bob = on(b, bobs)
    await alice.connect()
    await bob.connect()
    channel_id = await open_channel(alice, "conversation", [bob])
    assert holder(divided.hubs, channel_id) is a
    said = [await alice.say(channel_id, "one")]
    await bob.until(said[-1].envelope_id)
    # c has no member of the channel: it learnt of the channel's opening from the feed, not of its texts.
    assert await notices_told(redis_url, c) == 0 and await notices_told(redis_url, b) > 0
    followed = c.core.channels.followers.channels[channel_id]
    assert followed.committed_seq < said[-1].seq
    # Bob leaves; texts posted meanwhile are told to nobody but reach him wherever he comes back.
    cursor = said[-1].seq
    await bob.close()
    said += [await alice.say(channel_id, t) for t in ("two", "three")]
    for hub in (c, b):  # c never told, b no longer told: both deliver from the WAL
        bob = on(hub, bobs)
        welcome = await bob.connect(cursors={channel_id: cursor})
        assert welcome.cursors[channel_id] == cursor
        said.append(await alice.say(channel_id, f"to bob on {hub.target}"))
        got = await bob.until(said[-1].envelope_id)
        texts = [e.envelope_id for e in got if e.event_type == "ag2.msg.text"]
        assert texts == [s.envelope_id for s in said if s.seq > cursor]
        cursor = said[-1].seq
        await bob.close()
    await alice.close()


async def test_a_watcher_on_a_replica_without_members_sees_every_text(divided: Divided) -> None:
    _a, b, alice, bob, channel_id = await alice_and_bob(divided, "conversation", bob_on="a")
    earlier = await alice.say(channel_id, "before the watch")
    watched: list[envelope_pb2.Envelope] = []
    unwatch = b.core.watch(channel_id, watched.append)  # b holds nothing of it and has no member of it
    said = [await alice.say(channel_id, str(n)) for n in range(3)]

    async def all_seen() -> bool:
        return [e.envelope_id for e in watched if e.seq > earlier.seq] == [s.envelope_id for s in said]

    await assert_eventually(all_seen)
    unwatch()
    await alice.close()
    await bob.close()


async def test_reads_through_a_replica_that_does_not_hold_the_channel_see_it_live(divided: Divided) -> None:
    _a, b, alice, bob, channel_id = await alice_and_bob(divided, "discussion", bob_on="a")
    # The operator's DescribeChannel through b: answered by the holder (live, whose turn, state).
    async with OperatorClient(b.target, OPERATOR_TOKEN) as operator:
        described = await operator.describe_channel(channel_id)
    assert described.live and list(described.expected_next) == [alice.agent_id]
    assert json.loads(described.adapter_state_json)
    # A ReadWal that follows, through b: the live texts come, until the channel ends.
    follower = on(b, bob)
    seen: list[str] = []

    async def follow() -> None:
        request = hub_pb2.ReadWalRequest(channel_id=channel_id, follow=True)
        async for item in follower.stub.ReadWal(request, metadata=follower.metadata):
            seen.append(item.envelope.event_type)

    task = asyncio.create_task(follow())
    said = await alice.say(channel_id, "one")
    await bob.until(said.envelope_id)
    await bob.say(channel_id, "two")
    await alice.rpc("CloseChannel", hub_pb2.CloseChannelRequest(channel_id=channel_id))
    await asyncio.wait_for(task, 10)
    assert seen[-3:] == ["ag2.msg.text", "ag2.msg.text", "ag2.channel.closed"]
    for p in (alice, bob, follower):
        await p.close()


async def test_a_long_call_forwarded_to_the_holder_waits_as_long_as_its_caller_does(redis_url: str) -> None:
    """A Delegate through a replica that holds no partition is served by the holder and may wait for
    its reply longer than a forwarded post may take (the caller's own deadline bounds it)."""
    async with AsyncExitStack() as stack:
        servers = []
        for _ in range(2):  # one partition: one replica holds every channel, the other none
            store = RedisHubStore(redis_url, prefix="long-call:", partitions=1, timeout=0.3)
            servers.append(await start_hub(store, operator_token=OPERATOR_TOKEN, options=OPTIONS))
            stack.push_async_callback(servers[-1].stop, 0.5)

        async def one_holds() -> bool:
            return sum(bool(s.core.placement.ownership and s.core.placement.ownership.held) for s in servers) == 1

        await assert_eventually(one_holds)
        front = RunningHub(next(s for s in servers if not s.core.placement.ownership.held), Path("unused"))
        alice, bob = [await register(front.target, n) for n in ("alice", "bob")]
        for p in (alice, bob):
            await p.connect()
        bob.auto_accept_invites = True
        asked = asyncio.create_task(
            alice.rpc("Delegate", hub_pb2.DelegateRequest(target="bob", prompt="q?", timeout_seconds=10), timeout=15)
        )
        question = await bob.next(lambda e: e.event_type == "ag2.msg.text" and e.sender_id == alice.agent_id)
        await asyncio.sleep(2.5)  # longer than a forwarded post may take here (2 x 0.3 s + 1 s)
        await bob.say(question.channel_id, "the answer", causation_id=question.envelope_id)
        assert (await asyncio.wait_for(asked, 15)).text == "the answer"
        for p in (alice, bob):
            await p.close()


async def test_a_turn_in_a_channel_held_elsewhere_is_listed_through_any_replica(divided: Divided) -> None:
    _a, _b, alice, bob, channel_id = await alice_and_bob(divided, "discussion", bob_on="b")
    first = await alice.say(channel_id, "your turn")
    delivered = await bob.next(lambda e: e.envelope_id == first.envelope_id)
    bob.ack(channel_id, delivered.seq)  # acked, not answered: bob "crashed" while handling it
    await bob.sync()
    await bob.disconnect()
    welcome = await bob.connect()  # through b again, which does not hold the channel
    assert [(t.channel_id, t.envelope_id) for t in welcome.pending_turns] == [(channel_id, first.envelope_id)]
    assert not welcome.pending_turns_truncated
    listed = await bob.rpc("ListPendingTurns", hub_pb2.ListPendingTurnsRequest())
    assert [(t.channel_id, t.seq) for t in listed.turns] == [(channel_id, first.seq)]
    # Once answered, it is listed nowhere.
    answer = await bob.say(channel_id, "done")
    await alice.next(lambda e: e.envelope_id == answer.envelope_id)
    assert not (await bob.rpc("ListPendingTurns", hub_pb2.ListPendingTurnsRequest())).turns
    await bob.disconnect()
    assert not (await bob.connect()).pending_turns
    await alice.close()
    await bob.close()


async def test_pending_turns_calls_are_bounded_and_need_the_replica_key(divided: Divided) -> None:
    a = await divided.start()
    b = await divided.start()
    alice = await register(a.target, "alice")
    request = replica_pb2.PendingTurnsRequest(agent_id=alice.agent_id, channel_ids=["c"])
    async with grpc.aio.insecure_channel(a.target) as channel:
        stub = replica_pb2_grpc.ReplicaServiceStub(channel)
        for metadata in ((), (("authorization", f"Bearer {alice.credential}"),)):
            with pytest.raises(Unauthenticated, match="replica key"):
                await harness.call(stub.PendingTurns(request, metadata=metadata, timeout=10))
    peers = peers_of(b)
    with pytest.raises(InvalidArgument, match="channel_ids") as empty:
        await peers.pending_turns(a.target, alice.agent_id, [], 10)
    assert empty.value.metadata["field"] == "channel_ids"
    with pytest.raises(InvalidArgument, match="1000"):
        await peers.pending_turns(a.target, alice.agent_id, [f"c{i}" for i in range(1001)], 10)
    with pytest.raises(InvalidArgument, match="128"):
        await peers.pending_turns(a.target, alice.agent_id, ["c" * 129], 10)
    assert await peers.pending_turns(a.target, alice.agent_id, ["no-such-channel"], 10) == []


async def test_a_cancel_through_a_non_holder_posts_its_envelope_once(divided: Divided) -> None:
    a, b, alice, bob, channel_id = await alice_and_bob(divided, "conversation", bob_on="b")
    started = task_pb2.TASK_EVENT_KIND_STARTED
    tasks = [
        (await alice.rpc("ReportTask", hub_pb2.ReportTaskRequest(kind=started, title=t, channel_id=channel_id))).task
        for t in ("asked", "ended")
    ]
    # bob, connected through b (not the holder), asks alice to cancel the first task.
    cancelled = await bob.rpc("CancelTask", hub_pb2.CancelTaskRequest(task_id=tasks[0].task_id, reason="stop"))
    assert cancelled.envelope_id and cancelled.task.cancel_requested
    request = await alice.next_of(EV_TASK_CANCEL_REQUEST)
    assert request.envelope_id == cancelled.envelope_id and request.sender_id == bob.agent_id
    # alice reports the second one CANCELLED through b: its terminal envelope is posted by the holder.
    ended = await on(b, alice).rpc(
        "ReportTask",
        hub_pb2.ReportTaskRequest(
            kind=task_pb2.TASK_EVENT_KIND_CANCELLED, task_id=tasks[1].task_id, error="not needed"
        ),
    )
    assert ended.task.state == task_pb2.TASK_STATE_CANCELLED
    told = await bob.next_of(EV_TASK_CANCELLED)
    assert told.sender_id == alice.agent_id
    wal = await stored_wal(a, channel_id)
    assert [e.envelope_id for e in wal if e.event_type == EV_TASK_CANCEL_REQUEST] == [cancelled.envelope_id]
    assert [e.envelope_id for e in wal if e.event_type == EV_TASK_CANCELLED] == [told.envelope_id]
    await alice.close()
    await bob.close()


async def test_a_holder_that_does_not_answer_leaves_its_turns_to_list_later(divided: Divided) -> None:
    a, _b, alice, bob, channel_id = await alice_and_bob(divided, "discussion", bob_on="b")
    first = await alice.say(channel_id, "your turn")
    await bob.next(lambda e: e.envelope_id == first.envelope_id)
    await alice.close()
    await bob.disconnect()
    # a stops answering gRPC but keeps its leases (its core runs on): b cannot ask it.
    await a.server.running.server.stop(0)
    assert holder(divided.hubs, channel_id) is a
    welcome = await bob.connect()  # not held back by the silent holder
    assert not welcome.pending_turns and welcome.pending_turns_truncated
    with pytest.raises(Unavailable) as listed:
        await bob.rpc("ListPendingTurns", hub_pb2.ListPendingTurnsRequest())
    assert listed.value.metadata["cause"] == "replica_unreachable"
    await bob.close()


async def test_a_watch_is_recorded_only_once_the_channel_is_held_elsewhere(divided: Divided, redis_url: str) -> None:
    """A replica watching a channel it holds writes nothing for it (it publishes the commits itself);
    when the channel moves to another replica while watched, the watch is recorded then and the
    watcher keeps seeing every text."""
    a = await divided.start()
    b = await divided.start()
    await divided.settled()
    a, b = holding_and_not(a, b)
    alice = on(b, await register(a.target, "alice"))
    bob = on(b, await register(a.target, "bob"))
    opener = on(a, alice)
    await opener.connect()
    await bob.connect()
    # Channels held by a (opened through it), one at least in each partition a holds.
    ownership = a.core.placement.ownership
    assert ownership is not None and ownership.held
    channels: list[str] = []
    while {partition_of(c, PARTITIONS) for c in channels} != set(ownership.held) and len(channels) < 100:
        channels.append(await open_channel(opener, "conversation", [bob]))
    await opener.close()
    await alice.connect()
    watched: dict[str, list[str]] = {c: [] for c in channels}
    for channel_id in channels:
        a.core.watch(channel_id, lambda wire, seen=watched[channel_id]: seen.append(wire.envelope_id))
    store = a.core.store
    assert isinstance(store, RedisHubStore)
    client = connect(redis_url, 5)
    try:
        watch_sets = [f"{store._keys.g}watch:{c}" for c in channels]
        assert [await client.smembers(key) for key in watch_sets] == [set()] * len(channels)
        for _ in range(30):  # a replica joins; kept if it takes one of a's partitions (rendezvous decides)
            joined = await divided.start()
            ids = [
                o.replica_id
                for h in divided.hubs
                if id(h) not in divided.stopped
                for o in [h.core.placement.ownership]
                if o
            ]
            if set(ownership.held) - desired(ownership.replica_id, PARTITIONS, ids):
                break
            await divided.stop(joined)
        await divided.settled()
        moved = [c for c in channels if c not in a.core.channels.table.channels]
        assert moved, "no channel moved away from a"
        for channel_id in moved:

            async def recorded(channel_id: str = channel_id) -> bool:
                return await client.sismember(f"{store._keys.g}watch:{channel_id}", store.feed.replica_id) == 1

            await assert_eventually(recorded)
            said = await alice.say(channel_id, "after the move")

            async def seen(channel_id: str = channel_id, said_id: str = said.envelope_id) -> bool:
                return said_id in watched[channel_id]

            await assert_eventually(seen)
    finally:
        await client.aclose()
    await alice.close()
    await bob.close()


async def test_metrics_show_each_held_partition_with_its_channels_and_epoch(divided: Divided) -> None:
    a = await divided.start(metrics=MetricsSettings(port=0))
    b = await divided.start(metrics=MetricsSettings(port=0))
    await divided.settled()
    a, b = holding_and_not(a, b)
    alice, bob, channel_id = await conversation(a.target)
    ownership = a.core.placement.ownership
    assert ownership is not None and a.server.metrics_server is not None
    samples = await scrape(a.server.metrics_server.url)
    held = ownership.held
    partition = str(a.core.placement.partition(channel_id))
    for p, epoch in held.items():
        assert value(samples, "agentnet_hub_partition_epoch", partition=str(p)) == epoch >= 1
        channels = 1 if str(p) == partition else 0
        assert value(samples, "agentnet_hub_partition_live_channels", partition=str(p)) == channels
    exported = {dict(labels)["partition"] for name, labels in samples if name == "agentnet_hub_partition_epoch"}
    assert exported == {str(p) for p in held}  # only the partitions a holds
    await alice.close()
    await bob.close()


async def test_a_member_unregistered_while_the_holder_is_dead_has_its_channel_closed_by_the_next_holder(
    divided: Divided,
) -> None:
    a, b, alice, bob, channel_id = await alice_and_bob(divided, "conversation", bob_on="b")
    await alice.close()
    # a dies as a SIGKILL would leave it: no gRPC, no lease renewal, no change feed (it never learns of
    # the unregister below, so it cannot close the channel).
    await a.server.running.server.stop(0)
    await cancel_and_wait(a.core._loops)
    answer = await bob.rpc("Unregister", hub_pb2.UnregisterRequest())
    assert set(answer.closed_channel_ids) <= {channel_id}  # listed if b took the channel over within the wait

    async def closed_by_b() -> bool:
        row = await b.core.store.get_channel(channel_id)
        assert row is not None
        meta = channel_pb2.ChannelMetadata.FromString(row.record)
        return not row.live and meta.close_reason == "participant_left"

    await assert_eventually(closed_by_b, timeout=20)
    await bob.close()


async def test_unregister_through_a_replica_the_feed_has_not_told_of_the_channel_lists_it(divided: Divided) -> None:
    """The answer names a channel opened through another replica although the serving replica does not
    follow it yet (its change feed is stopped here: it lags forever); the store lists it as live."""
    a = await divided.start()
    b = await divided.start()
    await divided.settled()
    a, b = holding_and_not(a, b)
    alice = await register(a.target, "alice")
    bob = on(b, await register(a.target, "bob"))
    await alice.connect()
    await bob.connect()
    await cancel_and_wait(b.core._loops)  # b hears nothing more from the feed, the notices or the leases
    opened = await alice.rpc("OpenChannel", hub_pb2.OpenChannelRequest(type="conversation", targets=[bob.agent_id]))
    channel_id = opened.channel.channel_id  # pending (bob's invite cannot reach him through b): live
    assert channel_id not in b.core.channels.followers.channels
    answer = await bob.rpc("Unregister", hub_pb2.UnregisterRequest())
    assert list(answer.closed_channel_ids) == [channel_id]
    assert data_of(await alice.next_of("ag2.channel.closed"))["reason"] == "participant_left"
    await alice.close()
    await bob.close()
