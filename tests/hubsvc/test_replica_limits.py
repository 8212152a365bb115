"""Governance counts across hub replicas on one Redis: ``max_open_channels`` and ``max_running_tasks``
hold exactly however many replicas admit at once (the commit script checks the holder's live set), and
so does a rate limit (every replica draws an identity's tokens from one bucket in the store).

Three replicas run in this process (each a real gRPC server with its own RedisHubStore on the same
keys); one identity opens channels / starts tasks through all of them at the same moment.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
from agentnet.v1 import channel_pb2, hub_pb2, task_pb2

from hubsvc.governance.policy import PeerSelector, Policy, RateRule, Rule, RuleEntry
from hubsvc.governance.rate import HOLD_SECONDS
from hubsvc.storage import TASK_NEW, AtLimit, ChannelRow, TaskRow, WalRow, Writes
from hubsvc.storage.redis_connect import connect
from hubsvc.storage.redis_store import HOLDINGS_MARK, RESERVED, RedisHubStore
from netkernel.errors import LimitExceeded, LostRace, RateLimited
from tests.clock import FakeClock
from tests.eventually import assert_eventually
from tests.hubsvc import harness
from tests.hubsvc.harness import EV_TEXT, Participant, RunningHub, list_audit, make_envelope, open_channel, register
from tests.redis_server import RedisServer
from tests.replicas import replicas

REDIS_DB = 3
"""The DB number of these tests (hub tests use 1, replica tests 2, knowledge tests 0)."""
PROCESS_DB = 4
"""The DB number of the test with replica processes."""
LIMIT = 3
ATTEMPTS = 12
STARTED = task_pb2.TASK_EVENT_KIND_STARTED


@pytest.fixture(params=["server", "cluster", "cluster-spread"])
def layout(request: pytest.FixtureRequest) -> Iterator[str]:
    """Hubs built by the harness use the session's redis-server, or its local Redis Cluster (the
    hub in one slot, or its channels spread over the shards); flushed afterwards."""
    with harness.on_redis(request, "redis" if request.param == "server" else request.param, REDIS_DB):
        yield request.param


async def three_replicas(stack: AsyncExitStack, db: Path, rules: Policy, **kwargs: Any) -> list[RunningHub]:
    """Three replicas on one store, each with the same policy (as a policy file given to each)."""
    return [await stack.enter_async_context(harness.running_hub(db, policy=rules, **kwargs)) for _ in range(3)]


def rate_rules(name: str, per_second: float, burst: int) -> Policy:
    """A rate limit on the identity ``name``."""
    rule = Rule(rate=RateRule(posts_per_second=per_second, burst=burst))
    return Policy(rules=(RuleEntry(id="alice-rate", match=PeerSelector(names=(name,)), rule=rule),))


async def posting_everywhere(hubs: list[RunningHub]) -> tuple[list[Participant], str]:
    """alice (through each replica) in a conversation with bob that every replica has live."""
    alice, bob = await register(hubs[0].target, "alice"), await register(hubs[0].target, "bob")
    await alice.connect()
    await bob.connect()
    channel_id = await open_channel(alice, "conversation", [bob])
    await assert_eventually(lambda: all(h.core.live_channel(channel_id) is not None for h in hubs))
    return await everywhere(hubs, alice), channel_id


def post(p: Participant, channel_id: str, text: str) -> Awaitable[Any]:
    """A unary PostEnvelope of EV_TEXT."""
    envelope = make_envelope(channel_id, EV_TEXT, {"text": text})
    return p.rpc("PostEnvelope", hub_pb2.PostEnvelopeRequest(envelope=envelope))


async def test_a_rate_limit_holds_across_replicas(layout: str, tmp_path: Path) -> None:
    clock = FakeClock(frozen=True)  # no token comes back by time: the burst is all there is
    async with AsyncExitStack() as stack:
        hubs = await three_replicas(stack, tmp_path / "hub.db", rate_rules("alice", 0.001, 4), clock=clock)
        via, channel_id = await posting_everywhere(hubs)

        results = await asyncio.gather(
            *(post(via[i % 3], channel_id, f"t{i}") for i in range(ATTEMPTS)), return_exceptions=True
        )
        posted, errors = split(list(results))
        assert len(posted) == 4, errors  # one bucket for the three replicas (each its own: 12)
        assert all(isinstance(e, RateLimited) and e.metadata["rule"] == "alice-rate" for e in errors), errors

        async def stored_are_the_posted() -> bool:  # as the opener's replica reads it (its feed may lag)
            wal = await hubs[0].core.read_wal(via[0].agent_id, channel_id)
            texts = sorted(e.envelope_id for e in wal if e.event_type == EV_TEXT)
            return texts == sorted(p.envelope.envelope_id for p in posted)

        await assert_eventually(stored_are_the_posted)


async def test_tokens_a_replica_does_not_spend_go_back_to_the_others(layout: str, tmp_path: Path) -> None:
    clock = FakeClock(frozen=True)
    async with AsyncExitStack() as stack:
        # 40 posts/s: a replica takes 4 tokens (a tenth of a second's worth, at most the burst) at a time.
        hubs = await three_replicas(stack, tmp_path / "hub.db", rate_rules("alice", 40.0, 4), clock=clock)
        via, channel_id = await posting_everywhere(hubs)
        a, b = hubs[0].core.rate, hubs[1].core.rate

        await post(via[0], channel_id, "first")  # the first replica takes all 4 and spends 1
        assert a.held(via[0].agent_id) == 3
        with pytest.raises(RateLimited) as refused:
            await post(via[1], channel_id, "second")
        assert float(refused.value.metadata["retry_after_seconds"]) == pytest.approx(0.025)  # 1 / 40 s

        # Unspent for HOLD_SECONDS, the first replica's 3 go back to the store; a token's worth of time
        # later the store holds 3 + 1 and the second replica may post 4 times, not once.
        await assert_eventually(lambda: a.held(via[0].agent_id) == 0, timeout=10 * HOLD_SECONDS)
        clock.offset += 0.025
        for i in range(4):
            await post(via[1], channel_id, f"again {i}")
        assert b.held(via[1].agent_id) == 0
        with pytest.raises(RateLimited):
            await post(via[1], channel_id, "one too many")


@pytest.fixture
async def hubs(layout: str, tmp_path: Path) -> AsyncIterator[list[RunningHub]]:
    rules = Policy.model_validate({"default": {"limits": {"max_open_channels": LIMIT, "max_running_tasks": LIMIT}}})
    async with AsyncExitStack() as stack:
        yield await three_replicas(stack, tmp_path / "hub.db", rules)


async def everywhere(hubs: list[RunningHub], p: Participant) -> list[Participant]:
    """``p``'s identity through each replica, once every replica knows it."""
    await assert_eventually(lambda: all(p.agent_id in h.core.registry for h in hubs))
    return [Participant(h.target, p.record, p.credential) for h in hubs]


def split(results: list[Any]) -> tuple[list[Any], list[BaseException]]:
    """(answers, errors) of an ``asyncio.gather(..., return_exceptions=True)``."""
    return [r for r in results if not isinstance(r, BaseException)], [
        r for r in results if isinstance(r, BaseException)
    ]


def assert_limit_refusals(errors: list[BaseException], check: str) -> None:
    """Every error is the governance refusal an in-memory check gives."""
    assert all(isinstance(e, LimitExceeded) for e in errors), errors
    for e in errors:
        assert isinstance(e, LimitExceeded)
        assert (e.metadata["rule"], e.metadata["limit"], e.metadata["check"]) == ("default", str(LIMIT), check)
        assert f"allows you at most {LIMIT}" in e.message and "end one before starting another" in e.message


async def refusals(hub: RunningHub, action: str) -> int:
    """How many ``action_refused`` records of ``action`` with reason LIMIT_EXCEEDED are stored."""
    records = await list_audit(hub, kind="action_refused", limit=1000)
    return sum(
        1
        for r in records
        if json.loads(r.detail_json).get("action") == action and json.loads(r.detail_json)["reason"] == "LIMIT_EXCEEDED"
    )


def initiator(row: ChannelRow) -> str:
    return channel_pb2.ChannelMetadata.FromString(row.record).participants[0].agent_id


async def test_open_channels_limit_holds_across_replicas(hubs: list[RunningHub]) -> None:
    alice = await register(hubs[0].target, "alice")
    bob = await register(hubs[0].target, "bob")
    via = await everywhere(hubs, alice)
    await everywhere(hubs, bob)

    def open_(p: Participant) -> Any:
        return p.rpc("OpenChannel", hub_pb2.OpenChannelRequest(type="conversation", targets=[bob.agent_id]))

    opened, errors = split(await asyncio.gather(*(open_(via[i % 3]) for i in range(ATTEMPTS)), return_exceptions=True))
    assert len(opened) == LIMIT, errors
    assert_limit_refusals(errors, "limits.max_open_channels")
    store = hubs[0].core.store
    live = [r for r in await store.load_live_channels() if initiator(r) == alice.agent_id]
    assert sorted(r.channel_id for r in live) == sorted(o.channel.channel_id for o in opened)  # refused: nothing stored
    await assert_eventually(lambda: _equal(refusals(hubs[0], "open_channel"), ATTEMPTS - LIMIT))

    await via[0].rpc("CloseChannel", hub_pb2.CloseChannelRequest(channel_id=opened[0].channel.channel_id))
    # One more opens through another replica (once it learnt of the close: its own count refuses until then).
    again = await assert_eventually(lambda: open_(via[1]), timeout=10)
    assert again.channel.channel_id
    results = await asyncio.gather(*(open_(p) for p in via), return_exceptions=True)
    assert_limit_refusals(list(results), "limits.max_open_channels")


async def test_running_tasks_limit_holds_across_replicas(hubs: list[RunningHub]) -> None:
    worker = await register(hubs[0].target, "worker")
    via = await everywhere(hubs, worker)

    def start(p: Participant, task_id: str) -> Any:
        return p.rpc("ReportTask", hub_pb2.ReportTaskRequest(task_id=task_id, kind=STARTED))

    started, errors = split(
        await asyncio.gather(*(start(via[i % 3], f"t{i}") for i in range(ATTEMPTS)), return_exceptions=True)
    )
    assert len(started) == LIMIT, errors
    assert_limit_refusals(errors, "limits.max_running_tasks")
    stored = [t for t in await hubs[0].core.store.load_tasks(live_only=False) if t.owner_id == worker.agent_id]
    assert sorted(t.task_id for t in stored) == sorted(r.task.task_id for r in started)  # refused: nothing stored
    await assert_eventually(lambda: _equal(refusals(hubs[0], "start_task"), ATTEMPTS - LIMIT))

    done = task_pb2.TASK_EVENT_KIND_COMPLETED
    await via[0].rpc("ReportTask", hub_pb2.ReportTaskRequest(task_id=started[0].task.task_id, kind=done))
    await assert_eventually(lambda: start(via[2], "after"), timeout=10)
    results = await asyncio.gather(*(start(p, f"more{i}") for i, p in enumerate(via)), return_exceptions=True)
    assert_limit_refusals(list(results), "limits.max_running_tasks")


async def test_holder_sets_are_rebuilt_for_a_store_written_before_them(layout: str, tmp_path: Path) -> None:
    """A store whose live channels and tasks were written without holder sets gets them when a store opens."""
    db = tmp_path / "hub.db"
    rules = Policy.model_validate({"default": {"limits": {"max_open_channels": LIMIT, "max_running_tasks": LIMIT}}})
    async with harness.running_hub(db, policy=rules) as hub:
        alice = await register(hub.target, "alice")
        bob = await register(hub.target, "bob")
        opened = await alice.rpc("OpenChannel", hub_pb2.OpenChannelRequest(type="conversation", targets=[bob.agent_id]))
        await alice.rpc("ReportTask", hub_pb2.ReportTaskRequest(task_id="t1", kind=STARTED))
        store = hub.core.store
        assert isinstance(store, RedisHubStore)
        keys = [store.holder_key("channels", alice.agent_id), store.holder_key("tasks", alice.agent_id)]
        mark = store.prefix + "{g}:" + HOLDINGS_MARK
    client = connect(harness.STORE.redis_url, 5.0)
    try:
        assert await client.exists(*keys, mark) == 3
        await client.delete(*keys, mark)  # as a store written before holder sets existed
        later = harness.make_store(db)
        await later.open()
        await later.close()
        assert await client.smembers(keys[0]) == {opened.channel.channel_id.encode()}
        assert await client.smembers(keys[1]) == {b"t1"}
        assert await client.exists(mark) == 1
    finally:
        await client.aclose()


async def _equal(value: Awaitable[int], expected: int) -> bool:
    return (await value) == expected


def opening(channel_id: str, limit: int, *, seq: int = 1) -> Writes:
    """A bundle opening ``channel_id`` (initiator a1) while a1's ``max_open_channels`` is ``limit``."""
    meta = channel_pb2.ChannelMetadata(channel_id=channel_id)
    for m in ("a1", "a2"):
        meta.participants.add(agent_id=m)
    envelope_id = f"{channel_id}-invite"
    invite = WalRow(channel_id, seq, envelope_id, "", "ag2.channel.invite", None, None, "2026-01-01T00:00:00Z", b"x")
    return Writes(channels=[ChannelRow(channel_id, True, meta.SerializeToString(), hold_limit=limit)], wal=[invite])


async def test_a_group_takes_only_the_free_slots_and_a_refused_open_holds_nothing(layout: str) -> None:
    store = RedisHubStore(harness.STORE.redis_url, prefix="limits:")
    await store.open()
    client = connect(harness.STORE.redis_url, 5.0)
    holder, reserved = store.holder_key("channels", "a1"), store.prefix + "{g}:" + RESERVED
    try:
        await store.commit(opening("c1", 2))
        # Queued together, so one group: only the first of three finds a free slot.
        results = await asyncio.gather(
            *(store.submit(opening(c, 2)) for c in ("c2", "c3", "c4")), return_exceptions=True
        )
        assert results[0] is None
        assert all(isinstance(r, AtLimit) and r.held == 2 for r in results[1:]), results
        assert [await store.get_channel(c) for c in ("c3", "c4")] == [None, None]
        assert await client.smembers(holder) == {b"c1", b"c2"}
        # An ended channel frees its slot.
        c1 = opening("c1", 2).channels[0]
        await store.commit(Writes(channels=[ChannelRow("c1", False, c1.record)]))
        await store.commit(opening("c6", 2))
        assert await client.smembers(holder) == {b"c2", b"c6"}
        # An open refused for another reason (its channel part, a seq gap) keeps no slot either.
        with pytest.raises(LostRace) as gap:
            await store.commit(opening("c5", 5, seq=2))
        assert not isinstance(gap.value, AtLimit)
        assert await client.smembers(holder) == {b"c2", b"c6"}
        assert await client.zscore(reserved, "c5") is None
        # Tasks: the owner's running ones, the same way.
        starts = [Writes(tasks=[TaskRow(f"t{i}", "a1", "", False, b"r", TASK_NEW, hold_limit=1)]) for i in range(3)]
        outcomes = await asyncio.gather(*(store.submit(w) for w in starts), return_exceptions=True)
        assert outcomes[0] is None and all(isinstance(r, AtLimit) for r in outcomes[1:]), outcomes
        assert [t.task_id for t in await store.load_tasks(live_only=False)] == ["t0"]
    finally:
        await client.aclose()
        await store.close()


async def test_three_replica_processes_with_one_policy_file_admit_exactly_the_limit(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """The same, with each replica a real ``python -m hubsvc`` process given the same policy file."""
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(f"default:\n  limits: {{max_open_channels: {LIMIT}, max_running_tasks: {LIMIT}}}\n")
    url = redis_server.url(PROCESS_DB)
    try:
        with replicas(url, tmp_path, 3, extra_args=["--policy", str(policy_file)]) as group:
            alice = await register(group.target(0), "alice")
            bob = await register(group.target(0), "bob")
            via = [Participant(t, alice.record, alice.credential) for t in group.targets]
            request = hub_pb2.OpenChannelRequest(type="conversation", targets=[bob.agent_id])
            await assert_eventually(lambda: all_answer(via, "ListChannels", hub_pb2.ListChannelsRequest()), timeout=10)
            opened, errors = split(
                await asyncio.gather(
                    *(via[i % 3].rpc("OpenChannel", request) for i in range(ATTEMPTS)), return_exceptions=True
                )
            )
            assert len(opened) == LIMIT, errors
            assert_limit_refusals(errors, "limits.max_open_channels")
            starts = [hub_pb2.ReportTaskRequest(task_id=f"t{i}", kind=STARTED) for i in range(ATTEMPTS)]
            started, errors = split(
                await asyncio.gather(
                    *(via[i % 3].rpc("ReportTask", r) for i, r in enumerate(starts)), return_exceptions=True
                )
            )
            assert len(started) == LIMIT, errors
            assert_limit_refusals(errors, "limits.max_running_tasks")
    finally:
        redis_server.flush(PROCESS_DB)


async def all_answer(via: list[Participant], method: str, request: Any) -> bool:
    """Every replica answers ``method`` for the identity (it has learnt it)."""
    for p in via:
        await p.rpc(method, request)
    return True
