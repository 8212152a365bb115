"""Several hub replicas on one Redis: each applies the others' commits (the change feed).

The replicas run in this process (each a real gRPC server on its own port, each with its own
RedisHubStore on the same keys); participants reach different replicas.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import grpc
import pytest
import redis.asyncio
from agentnet.v1 import envelope_pb2, hub_pb2

from netkernel.errors import InboxFull, NotFound, NotYourTurn, Superseded, Unauthenticated, error_from_rpc
from tests.eventually import assert_eventually
from tests.hubsvc import harness
from tests.hubsvc.harness import Participant, RunningHub, data_of, make_envelope, open_channel, register
from tests.hubsvc.test_inbox_caps import inbox_policy
from tests.redis_server import RedisServer

REDIS_DB = 2
"""The DB number of these tests (hub tests use 1, knowledge tests 0)."""


@pytest.fixture(params=["server", "cluster", "cluster-spread"])
def on_redis(request: pytest.FixtureRequest) -> Iterator[None]:
    """Hubs built by the harness use the session's redis-server, or its local Redis Cluster with
    the hub in one slot or its channels spread over the shards (flushed afterwards)."""
    with harness.on_redis(request, "redis" if request.param == "server" else request.param, REDIS_DB):
        yield


class Replicas:
    """Replicas sharing one store, started on demand."""

    def __init__(self, stack: AsyncExitStack, db: Path) -> None:
        self._stack, self._db = stack, db
        self.hubs: list[RunningHub] = []

    async def start(self, **kwargs: Any) -> RunningHub:
        hub = await self._stack.enter_async_context(harness.running_hub(self._db, **kwargs))
        self.hubs.append(hub)
        return hub


@pytest.fixture
async def replicas(on_redis: None, tmp_path: Path) -> AsyncIterator[Replicas]:
    async with AsyncExitStack() as stack:
        yield Replicas(stack, tmp_path / "hub.db")


async def read_wal(p: Participant, channel_id: str) -> list[envelope_pb2.Envelope]:
    """The channel's whole WAL as ``p`` reads it through its replica."""
    stream = p.stub.ReadWal(hub_pb2.ReadWalRequest(channel_id=channel_id), metadata=p.metadata, timeout=10)
    return [item.envelope async for item in stream]


def on(hub: RunningHub, p: Participant) -> Participant:
    """``p``'s identity reaching ``hub``."""
    return Participant(hub.target, p.record, p.credential)


async def test_a_conversation_across_replicas(replicas: Replicas) -> None:
    a = await replicas.start()
    alice = await register(a.target, "alice")
    bobs = await register(a.target, "bob")
    b = await replicas.start()
    bob = on(b, bobs)
    await alice.connect()
    await bob.connect()
    channel_id = await open_channel(alice, "conversation", [bob])  # bob's invite and ack go through b
    sent = await alice.say(channel_id, "hello from a")
    got = await bob.next(lambda e: e.event_type == "ag2.msg.text")
    assert (got.seq, got.envelope_id) == (sent.seq, sent.envelope_id)
    answer = await bob.say(channel_id, "hello from b")
    back = await alice.next(lambda e: e.event_type == "ag2.msg.text")
    assert (back.seq, back.envelope_id) == (answer.seq, answer.envelope_id)
    await alice.close()
    await bob.close()


async def three_in_a_discussion(replicas: Replicas) -> tuple[list[list[Participant]], str]:
    """alice, bob and carol in an opened discussion; each identity reachable through every replica
    (``people[i][r]`` is identity i on replica r; the streams of replica 0 are connected)."""
    a = await replicas.start()
    names = [await register(a.target, n) for n in ("alice", "bob", "carol")]
    for _ in range(2):
        await replicas.start()
    people = [[on(hub, p) for hub in replicas.hubs] for p in names]
    for per_replica in people:
        await per_replica[0].connect()
    channel_id = await open_channel(people[0][0], "discussion", [people[1][0], people[2][0]])
    return people, channel_id


async def test_a_turn_raced_through_every_replica_is_admitted_once(replicas: Replicas) -> None:
    people, channel_id = await three_in_a_discussion(replicas)
    admitted: list[int] = []
    for turn in range(9):
        speaker = people[turn % 3]  # strict round robin: alice, bob, carol, alice, ...

        async def attempt(p: Participant, n: int = turn) -> int | str:
            env = make_envelope(channel_id, "ag2.msg.text", {"text": f"turn {n} via {p.channel}"})
            try:
                response = await p.rpc("PostEnvelope", hub_pb2.PostEnvelopeRequest(envelope=env))
            except NotYourTurn:
                return "not your turn"
            return int(response.envelope.seq)

        outcomes = await asyncio.gather(*(attempt(p) for p in speaker))
        seqs = [o for o in outcomes if isinstance(o, int)]
        assert len(seqs) == 1, outcomes  # exactly one replica's write won the turn
        assert outcomes.count("not your turn") == 2, outcomes
        admitted += seqs
    rows = await replicas.hubs[0].core.store.read_wal(channel_id, 1, 0, 0)
    stored = [envelope_pb2.Envelope.FromString(row) for row in rows]
    assert [e.seq for e in stored] == list(range(1, len(stored) + 1))  # contiguous, no seq twice
    texts = [e for e in stored if e.event_type == "ag2.msg.text"]
    assert [e.seq for e in texts] == admitted
    assert [e.sender_id for e in texts] == [people[t % 3][0].agent_id for t in range(9)]


async def spread_trio(replicas: Replicas) -> list[Participant]:
    """alice, bob and carol, each connected to a different one of three replicas."""
    a = await replicas.start()
    names = [await register(a.target, n) for n in ("alice", "bob", "carol")]
    for _ in range(2):
        await replicas.start()
    people = [on(hub, p) for hub, p in zip(replicas.hubs, names, strict=True)]
    for p in people:
        await p.connect()
    return people


async def test_a_discussion_and_a_workflow_run_to_completion_across_replicas(replicas: Replicas) -> None:
    alice, bob, carol = await spread_trio(replicas)
    disc = await open_channel(alice, "discussion", [bob, carol], knobs={"max_rounds": 2})
    with pytest.raises(NotYourTurn):
        await carol.say(disc, "me first")  # refused by carol's replica, which applied the opening
    for speaker in (alice, bob, carol) * 2:
        await speaker.say(disc, f"turn of {speaker.name}")
    for p in (alice, bob, carol):
        closed = await p.next(lambda e: e.event_type == "ag2.channel.closed" and e.channel_id == disc)
        assert data_of(closed)["reason"] == "max_turns"
    knobs = {
        "transitions": [
            {"condition": {"type": "tool_called", "tool": "approve"}, "target": {"type": "terminate"}, "priority": -5},
            {"condition": {"type": "always"}, "target": {"type": "round_robin"}},
        ]
    }
    flow = await open_channel(bob, "workflow", [carol, alice], knobs=knobs)
    await bob.say(flow, "kick off")
    await carol.post(flow, "ag2.packet", {"routing": {"tool_called": None}, "context_updates": {}, "body": "draft"})
    with pytest.raises(NotYourTurn):
        await carol.post(flow, "ag2.packet", {"routing": {}, "context_updates": {}, "body": "again"})
    await alice.post(flow, "ag2.packet", {"routing": {"tool_called": "approve"}, "context_updates": {}, "body": "ok"})
    for p in (alice, bob, carol):
        closed = await p.next(lambda e: e.event_type == "ag2.channel.closed" and e.channel_id == flow)
        assert data_of(closed)["reason"] == "after_work"
    # Every member got every envelope addressed to it (its own posts come back as PostResults), in
    # seq order, with an unbroken prev_seq chain.
    for p in (alice, bob, carol):
        for channel_id in (disc, flow):
            chain = [(prev, seq) for cid, prev, seq in p.chain if cid == channel_id]
            assert [prev for prev, _ in chain[1:]] == [seq for _, seq in chain[:-1]], (p.name, chain)
            visible = [e.seq for e in await read_wal(p, channel_id) if e.sender_id != p.agent_id]
            assert [seq for _, seq in chain] == visible


async def test_a_stream_post_racing_unary_posts_for_one_turn_is_admitted_once(replicas: Replicas) -> None:
    # One identity holds one Connect stream (a second one, through any replica, replaces it), so
    # the stream post through replica 0 races unary PostEnvelope calls through replicas 1 and 2.
    people, channel_id = await three_in_a_discussion(replicas)
    for turn in range(6):
        speaker = people[turn % 3]
        text = {"text": f"turn {turn}"}
        outcomes = await asyncio.gather(
            speaker[0].say(channel_id, f"turn {turn} on the stream"),
            *(
                p.rpc(
                    "PostEnvelope",
                    hub_pb2.PostEnvelopeRequest(envelope=make_envelope(channel_id, "ag2.msg.text", text)),
                )
                for p in speaker[1:]
            ),
            return_exceptions=True,
        )
        won = [o for o in outcomes if not isinstance(o, BaseException)]
        assert len(won) == 1, outcomes
        assert all(isinstance(o, NotYourTurn) for o in outcomes if isinstance(o, BaseException)), outcomes
    rows = await replicas.hubs[0].core.store.read_wal(channel_id, 1, 0, 0)
    assert [envelope_pb2.Envelope.FromString(r).seq for r in rows] == list(range(1, len(rows) + 1))


async def test_a_stream_through_another_replica_replaces_the_first_and_presence_is_shared(
    replicas: Replicas,
) -> None:
    a = await replicas.start()
    alice = await register(a.target, "alice")
    bobs = await register(a.target, "bob")
    b, c = await replicas.start(), await replicas.start()
    bob_on_a, bob_on_b = bobs, on(b, bobs)
    watcher = on(c, alice)

    async def online() -> bool:
        listing = await watcher.rpc("ListAgents", hub_pb2.ListAgentsRequest())
        return any(r.online for r in listing.agents if r.agent_id == bobs.agent_id)

    assert not await online()
    await bob_on_a.connect()
    await assert_eventually(online)
    newer = await bob_on_b.connect()  # the same identity again, through another replica
    await assert_eventually(lambda: bob_on_a.stream_error is not None)
    # The one mechanism of one hub: SUPERSEDED (permanent, no reconnect), naming the newer stream.
    assert bob_on_a.stream_error is not None and bob_on_a.stream_error.code() == grpc.StatusCode.FAILED_PRECONDITION
    superseded = error_from_rpc(bob_on_a.stream_error)
    assert isinstance(superseded, Superseded)
    assert superseded.metadata == {"cause": "replaced", "superseded_by": newer.session_id}
    assert "replaced by a newer Connect stream" in superseded.message
    assert await online()  # still connected (through b), though a's stream ended
    await bob_on_b.close()

    async def offline() -> bool:
        return not await online()

    await assert_eventually(offline)


async def test_an_inbox_cap_counts_answers_made_through_another_replica(replicas: Replicas) -> None:
    policy = inbox_policy("bob", 2)
    a = await replicas.start(policy=policy)
    alice = await register(a.target, "alice")
    bobs = await register(a.target, "bob")
    b = await replicas.start(policy=policy)
    bob = on(b, bobs)
    await alice.connect()
    await bob.connect()
    channel_id = await open_channel(alice, "conversation", [bob])

    def pending_on(hub: RunningHub, n: int) -> Callable[[], bool]:
        return lambda: hub.core.inboxes.pending(bobs.agent_id) == n

    assert a.core.inboxes.pending(bobs.agent_id) == 0  # the invite and the opening do not count
    await alice.say(channel_id, "one")
    await alice.say(channel_id, "two")
    await bob.sync()  # bob acked both through b: acks do not answer
    await assert_eventually(pending_on(b, 2))
    with pytest.raises(InboxFull):  # refused by a, which counts from the WAL what bob has not answered
        await alice.say(channel_id, "three")
    await bob.say(channel_id, "answering both, through b")
    await assert_eventually(pending_on(a, 0))  # a folded bob's answer from the change feed
    await alice.say(channel_id, "three, now that bob answered")
    await assert_eventually(pending_on(b, 1))


async def test_pending_turns_through_another_replica(replicas: Replicas) -> None:
    a = await replicas.start()
    alice = await register(a.target, "alice")
    bobs = await register(a.target, "bob")
    b = await replicas.start()
    await alice.connect()
    bob = on(a, bobs)
    await bob.connect()
    channel_id = await open_channel(alice, "consulting", [bob])
    question = await alice.say(channel_id, "asked through a")
    await bob.next_of("ag2.msg.text")
    await bob.sync()
    await bob.close()
    # bob comes back through b: b folded a's commit from the change feed and lists the turn.
    bob = on(b, bobs)

    async def listed() -> bool:
        welcome = await bob.connect()
        await bob.disconnect()
        return [(t.channel_id, t.envelope_id) for t in welcome.pending_turns] == [(channel_id, question.envelope_id)]

    await assert_eventually(listed)
    # a stops following the change feed: it can learn of b's commit only from the store.
    sync = a.core.replicas
    assert sync is not None
    sync.stop()
    await assert_eventually(lambda: all(t.done() for t in a.core._loops if t.get_name() == "hub-replica-sync"))
    await bob.connect()
    await bob.say(channel_id, "answered through b", causation_id=question.envelope_id)
    await bob.close()
    # A client reaching a is not told of the turn b saw answered (it would answer it again):
    # a reads the store before listing it, in ListPendingTurns and in the Welcome.
    late = on(a, bobs)
    assert list((await late.rpc("ListPendingTurns", hub_pb2.ListPendingTurnsRequest())).turns) == []
    assert list((await late.connect()).pending_turns) == []
    await late.close()
    await alice.close()


async def test_a_replica_the_feed_has_not_told_yet_reads_the_store_before_refusing(replicas: Replicas) -> None:
    a = await replicas.start()
    names = [await register(a.target, n) for n in ("alice", "bob")]
    b = await replicas.start()
    alice, bob = on(a, names[0]), on(b, names[1])
    await alice.connect()
    await bob.connect()
    channel_id = await open_channel(alice, "discussion", [bob])
    # b stops following the change feed: from here on it learns of a's commits only from the store.
    sync = b.core.replicas
    assert sync is not None
    sync.stop()
    await assert_eventually(lambda: all(t.done() for t in b.core._loops if t.get_name() == "hub-replica-sync"))
    await alice.say(channel_id, "alice's turn, admitted through a")
    # b's copy still says it is alice's turn; before refusing bob it finds the store ahead and catches up.
    await bob.say(channel_id, "bob's turn, through b")
    await alice.say(channel_id, "alice again")
    [result] = await bob.post_batch([make_envelope(channel_id, "ag2.msg.text", {"text": "bob, in a batch"})])
    assert result.WhichOneof("result") == "envelope", result
    with pytest.raises(NotYourTurn):  # a real refusal is still given (the store is not ahead)
        await bob.say(channel_id, "bob twice")
    # A channel opened through a that b does not hold at all: bob's invite ack through b finds it.
    request = hub_pb2.OpenChannelRequest(type="conversation", targets=[bob.agent_id])
    opened = (await alice.rpc("OpenChannel", request)).channel.channel_id
    assert (await bob.post(opened, "ag2.channel.invite_ack", {})).seq > 0


@pytest.mark.parametrize("on_redis", ["server"], indirect=True)
async def test_a_holder_read_answered_before_a_new_stream_is_recorded_does_not_end_that_stream(
    replicas: Replicas, redis_server: RedisServer
) -> None:
    """A replica that reads the identity's holder while its own newer stream's record is still on
    its way to the store (a change of another replica applied late) reads the older stream: it must
    not end its own stream for it, but read again once the record is written."""
    a = await replicas.start()
    bobs = await register(a.target, "bob")
    b = await replicas.start()
    watcher = on(b, await register(a.target, "alice"))

    async def online() -> bool:
        listing = await watcher.rpc("ListAgents", hub_pb2.ListAgentsRequest())
        return any(r.online for r in listing.agents if r.agent_id == bobs.agent_id)

    await bobs.connect()
    await assert_eventually(online)  # b has read a's record of the first stream
    bob_on_b = on(b, bobs)
    pauser = redis.asyncio.Redis.from_url(redis_server.url(REDIS_DB))
    try:
        await pauser.execute_command("CLIENT", "PAUSE", 10_000, "WRITE")  # reads still answered
        try:
            newer = await bob_on_b.connect()
            await b.core.sessions.check_holder(bobs.agent_id)  # still reads the first stream
        finally:
            await pauser.execute_command("CLIENT", "UNPAUSE")
    finally:
        await pauser.aclose()
    await assert_eventually(lambda: bobs.stream_error is not None)  # the first stream is replaced
    assert isinstance(error_from_rpc(bobs.stream_error), Superseded)

    async def recorded() -> bool:
        return await b.core.store.session_of(bobs.agent_id) == newer.session_id

    await assert_eventually(recorded)
    await b.core.sessions.check_holder(bobs.agent_id)  # as the next change naming bob would
    assert bob_on_b.stream_error is None
    assert await online()
    await bob_on_b.close()

    async def offline() -> bool:
        return not await online()

    await assert_eventually(offline)


async def test_an_open_names_a_peer_registered_through_another_replica_a_moment_ago(replicas: Replicas) -> None:
    a = await replicas.start()
    b = await replicas.start()
    # a stops following the change feed: it learns of b's registrations only from the store.
    sync = a.core.replicas
    assert sync is not None
    sync.stop()
    await assert_eventually(lambda: all(t.done() for t in a.core._loops if t.get_name() == "hub-replica-sync"))
    alice = await register(a.target, "alice")
    bob = await register(b.target, "bob")  # through b: a has not heard of bob
    assert bob.agent_id not in a.core.registry
    for target in (bob.agent_id, "bob"):  # by id, and by name
        request = hub_pb2.OpenChannelRequest(type="conversation", targets=[target])
        opened = await alice.rpc("OpenChannel", request)
        assert [p.agent_id for p in opened.channel.participants] == [alice.agent_id, bob.agent_id]
    with pytest.raises(NotFound, match="no agent named or with id 'carol'"):  # unknown everywhere: still NotFound
        await alice.rpc("OpenChannel", hub_pb2.OpenChannelRequest(type="conversation", targets=["carol"]))


async def test_a_credential_registered_through_another_replica_a_moment_ago_is_accepted(replicas: Replicas) -> None:
    a = await replicas.start()
    b = await replicas.start()
    sync = a.core.replicas  # a stops following the change feed: it learns of b's identities only from the store
    assert sync is not None
    sync.stop()
    await assert_eventually(lambda: all(t.done() for t in a.core._loops if t.get_name() == "hub-replica-sync"))
    bob = await register(b.target, "bob")
    assert bob.agent_id not in a.core.registry
    bob_on_a = on(a, bob)
    channels = await bob_on_a.rpc("ListChannels", hub_pb2.ListChannelsRequest())  # a unary call through a
    assert list(channels.channels) == []
    assert bob.agent_id in a.core.registry
    carol = await register(b.target, "carol")
    await on(a, carol).connect()  # a Connect stream through a: its Hello's credential
    await assert_eventually(lambda: a.core.sessions.streams_here(carol.agent_id))
    # A credential the store does not know either is refused as before, and a wrong secret for a known id too.
    for credential in (f"no-such-agent.{bob.credential.partition('.')[2]}", f"{bob.agent_id}.wrong-secret"):
        stranger = Participant(a.target, bob.record, credential)
        with pytest.raises(Unauthenticated):
            await stranger.rpc("ListChannels", hub_pb2.ListChannelsRequest())
