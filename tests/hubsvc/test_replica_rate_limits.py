"""Rate limits across hub replicas on one Redis: a post that lost the compare-and-append race to
another replica (nothing of it stored) and was admitted again takes its sender's token once.

Two replicas run in this process (real gRPC servers, each with its own RedisHubStore on the same
keys). Replica ``b`` stops following the change feed, so each post through it after one through
``a`` is staged on a stale copy of the channel and loses the race, deterministically; ``b`` then
rebuilds the channel from the store and admits the post again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
from agentnet.v1 import envelope_pb2, hub_pb2

from hubsvc.governance.policy import PeerSelector, Policy, RateRule, Rule, RuleEntry
from netkernel.errors import LimitExceeded, RateLimited
from tests.clock import FakeClock
from tests.eventually import assert_eventually
from tests.hubsvc import harness
from tests.hubsvc.harness import EV_TEXT, Participant, RunningHub, make_envelope, open_channel, register

REDIS_DB = 5
"""The DB number of these tests (hub tests use 1, replica tests 2, replica limits 3 and 4)."""
LIMIT = 6
"""alice's burst on each replica; no token arrives during a test (the clock is frozen)."""


@pytest.fixture(params=["server", "cluster", "cluster-spread"])
def on_redis(request: pytest.FixtureRequest) -> Iterator[None]:
    """Hubs built by the harness use the session's redis-server or its local Redis Cluster."""
    with harness.on_redis(request, "redis" if request.param == "server" else request.param, REDIS_DB):
        yield


def alice_limited(extra: dict[str, object] | None = None) -> Policy:
    """alice may post ``LIMIT`` envelopes (and, frozen, never more); ``extra``: her other limits."""
    rule = Rule(rate=RateRule(posts_per_second=0.5, burst=LIMIT))
    if extra is not None:
        rule = Rule.model_validate({"rate": {"posts_per_second": 0.5, "burst": LIMIT}, **extra})
    return Policy(rules=(RuleEntry(id="alice-rate", match=PeerSelector(names=("alice",)), rule=rule),))


async def alice_and_bob(stack: AsyncExitStack, db: Path, policy: Policy) -> tuple[Participant, Participant, RunningHub]:
    """alice and bob through replica ``a``, and replica ``b`` (one policy), which knows them both and
    then stops following the change feed."""
    clock = FakeClock(frozen=True)
    a = await stack.enter_async_context(harness.running_hub(db, policy=policy, clock=clock))
    b = await stack.enter_async_context(harness.running_hub(db, policy=policy, clock=clock))
    alice, bob = await register(a.target, "alice"), await register(a.target, "bob")
    await assert_eventually(lambda: alice.agent_id in b.core.registry and bob.agent_id in b.core.registry)
    sync = b.core.replicas
    assert sync is not None
    sync.stop()
    await assert_eventually(lambda: all(t.done() for t in b.core._loops if t.get_name() == "hub-replica-sync"))
    return alice, bob, b


def on(hub: RunningHub, p: Participant) -> Participant:
    """``p``'s identity reaching ``hub``."""
    return Participant(hub.target, p.record, p.credential)


@pytest.fixture
async def stack(on_redis: None) -> AsyncIterator[AsyncExitStack]:
    async with AsyncExitStack() as s:
        yield s


async def test_posts_re_admitted_after_lost_races_take_their_token_once(stack: AsyncExitStack, tmp_path: Path) -> None:
    alice_a, bob, b = await alice_and_bob(stack, tmp_path / "hub.db", alice_limited())
    alice = on(b, alice_a)
    await bob.connect()
    await alice_a.connect()
    channel_id = await open_channel(alice_a, "conversation", [bob])  # no seed: takes no token
    await alice_a.close()
    await alice.connect()  # alice's stream is on b from here on
    stored: list[int] = []

    async def bob_moves_on(n: int) -> None:
        """bob posts through a: b's copy of the channel is behind the store again."""
        await bob.say(channel_id, f"bob {n}")

    async def via_post_envelope(n: int) -> list[int]:
        env = make_envelope(channel_id, EV_TEXT, {"text": f"alice {n} (PostEnvelope)"})
        return [(await alice.rpc("PostEnvelope", hub_pb2.PostEnvelopeRequest(envelope=env))).envelope.seq]

    async def via_connect_post(n: int) -> list[int]:
        return [(await alice.say(channel_id, f"alice {n} (Connect Post)")).seq]

    async def via_post_batch(n: int) -> list[int]:  # two posts: the batched admit_many path
        envelopes = [make_envelope(channel_id, EV_TEXT, {"text": f"alice {n}.{i} (PostBatch)"}) for i in range(2)]
        results = await alice.post_batch(envelopes)
        assert all(r.WhichOneof("result") == "envelope" for r in results), results
        return [r.envelope.seq for r in results]

    for n, path in enumerate(
        [via_post_envelope, via_connect_post, via_post_batch, via_post_envelope, via_connect_post]
    ):
        await bob_moves_on(n)
        stored += await path(n)
    assert len(stored) == LIMIT  # every one admitted, each after its write lost a race on b
    with pytest.raises(RateLimited):  # and the bucket held exactly LIMIT tokens
        await alice.say(channel_id, "one more")
    rows = await b.core.store.read_wal(channel_id, 1, 0, 0)
    wal = [envelope_pb2.Envelope.FromString(r) for r in rows]
    assert [e.seq for e in wal] == list(range(1, len(wal) + 1))
    assert sorted(e.seq for e in wal if e.sender_id == alice.agent_id and e.event_type == EV_TEXT) == sorted(stored)


async def test_a_seed_whose_channel_the_store_refused_takes_no_token(stack: AsyncExitStack, tmp_path: Path) -> None:
    # alice may hold one open channel: she opens it through a; b, which no longer hears of a's
    # commits, admits her second one and the store refuses it (another replica took the slot).
    policy = alice_limited({"limits": {"max_open_channels": 1}})
    alice_a, bob, b = await alice_and_bob(stack, tmp_path / "hub.db", policy)
    alice = on(b, alice_a)
    await bob.connect()
    await alice_a.connect()
    channel_id = await open_channel(alice_a, "conversation", [bob])
    await alice_a.close()
    request = hub_pb2.OpenChannelRequest(type="conversation", targets=[bob.agent_id], message="hello")
    for _ in range(LIMIT + 1):  # more than her tokens: none of these refused seeds took one
        with pytest.raises(LimitExceeded):
            await alice.rpc("OpenChannel", request)
    await alice.connect()
    for n in range(LIMIT):
        await alice.say(channel_id, f"alice {n}")
    with pytest.raises(RateLimited):
        await alice.say(channel_id, "one more")
