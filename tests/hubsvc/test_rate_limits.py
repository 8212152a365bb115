"""Posts per second: the token bucket behind RATE_LIMITED, on a real hub (docs/governance.md "Rate limits").

The hub runs on a frozen :class:`~tests.clock.FakeClock`: tokens arrive only when a test
moves the clock, so nothing here depends on how fast the machine is.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from agentnet.v1 import a2a_pb2, hub_pb2

from hubsvc.core.options import HubOptions
from hubsvc.governance.policy import PeerSelector, Policy, RateRule, RateSpec, Rule, RuleEntry
from hubsvc.governance.rate import RateLimiter
from netkernel.errors import InvalidArgument, NotFound, ProtocolError, RateLimited, Timeout
from tests.clock import FakeClock
from tests.hubsvc.harness import (
    EV_TEXT,
    Participant,
    RunningHub,
    list_audit,
    make_envelope,
    running_hub,
)


def rate_policy(name: str, per_second: float, burst: int) -> Policy:
    """A policy limiting the identity ``name`` (rule id ``<name>-rate``)."""
    entry = RuleEntry(
        id=f"{name}-rate",
        match=PeerSelector(names=(name,)),
        rule=Rule(rate=RateRule(posts_per_second=per_second, burst=burst)),
    )
    return Policy(rules=(entry,))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(frozen=True)


@pytest.fixture
async def hub(tmp_path: Path, clock: FakeClock) -> AsyncIterator[RunningHub]:
    async with running_hub(tmp_path / "hub.db", HubOptions(rate_audit_window=60.0), clock=clock) as h:
        yield h


async def test_bucket_refuses_beyond_burst_and_allows_after_refill(
    hub: RunningHub, clock: FakeClock, conv: tuple[Participant, Participant, str]
) -> None:
    alice, bob, channel_id = conv
    hub.set_policy(rate_policy("alice", per_second=0.5, burst=3))
    for i in range(3):
        await alice.say(channel_id, f"burst {i}")
    ch = hub.holder(channel_id).core.live_channel(channel_id)
    assert ch is not None
    before = ch.last_seq
    wal_before = await hub.core.read_wal(alice.agent_id, channel_id)

    with pytest.raises(RateLimited) as refused:
        await alice.say(channel_id, "one too many")
    assert refused.value.metadata["rule"] == "alice-rate"
    assert float(refused.value.metadata["retry_after_seconds"]) == pytest.approx(2.0)
    # The refused post changed nothing: no WAL row, the seq did not move.
    assert ch.last_seq == before
    assert await hub.core.read_wal(alice.agent_id, channel_id) == wal_before

    clock.offset += 1.0  # half a token: still refused, and the wait left is the other half
    with pytest.raises(RateLimited) as again:
        await alice.say(channel_id, "still too early")
    assert float(again.value.metadata["retry_after_seconds"]) == pytest.approx(1.0)
    clock.offset += 1.0
    await alice.say(channel_id, "after the refill")
    with pytest.raises(RateLimited):
        await alice.say(channel_id, "the refill was one token")
    # bob is not limited by alice's rule.
    for i in range(5):
        await bob.say(channel_id, f"bob {i}")


async def test_waiting_the_advertised_retry_after_is_enough(
    hub: RunningHub, clock: FakeClock, conv: tuple[Participant, Participant, str]
) -> None:
    """retry_after_seconds is rounded up: a client that waits exactly that long gets its token."""
    alice, _bob, channel_id = conv
    hub.set_policy(rate_policy("alice", per_second=3, burst=1))
    await alice.say(channel_id, "the one token")
    with pytest.raises(RateLimited) as refused:
        await alice.say(channel_id, "too early")
    wait = float(refused.value.metadata["retry_after_seconds"])  # a third of a second, to the millisecond
    assert wait == pytest.approx(1 / 3, abs=0.001)
    clock.offset += wait
    await alice.say(channel_id, "after the advertised wait")


async def test_a_refusal_is_audited_once_then_counted_per_window(
    hub: RunningHub, clock: FakeClock, conv: tuple[Participant, Participant, str]
) -> None:
    alice, _bob, channel_id = conv
    hub.set_policy(rate_policy("alice", per_second=0.001, burst=1))
    await alice.say(channel_id, "the one token")
    for _ in range(5):
        with pytest.raises(RateLimited):
            await alice.say(channel_id, "flood")
    records = await list_audit(hub, kind="rate_limited")
    assert len(records) == 1
    first = json.loads(records[0].detail_json)
    assert records[0].actor_id == alice.agent_id and records[0].subject_id == channel_id
    assert first["rule"] == "alice-rate" and first["event_type"] == EV_TEXT
    # RATE_LIMITED is not also audited one by one as post_refused.
    refused = [json.loads(r.detail_json) for r in await list_audit(hub, kind="post_refused")]
    assert all(d["reason"] != "RATE_LIMITED" for d in refused)

    clock.offset += 61.0  # the window is over; 0.061 tokens: still refused
    with pytest.raises(RateLimited):
        await alice.say(channel_id, "next window")
    details = [json.loads(r.detail_json) for r in await list_audit(hub, kind="rate_limited")]
    assert len(details) == 3
    assert details[1] == {"rule": "alice-rate", "suppressed": 4, "window_seconds": 60.0}
    assert "suppressed" not in details[2] and details[2]["rule"] == "alice-rate"


Path_ = Callable[[RunningHub, Participant, Participant, str], Awaitable[object]]


async def via_connect(hub: RunningHub, alice: Participant, bob: Participant, channel_id: str) -> object:
    return await alice.say(channel_id, "over Connect")


async def via_post_envelope(hub: RunningHub, alice: Participant, bob: Participant, channel_id: str) -> object:
    env = make_envelope(channel_id, EV_TEXT, {"text": "unary"})
    return await alice.rpc("PostEnvelope", hub_pb2.PostEnvelopeRequest(envelope=env))


async def via_say(hub: RunningHub, alice: Participant, bob: Participant, channel_id: str) -> object:
    return await alice.rpc("Say", hub_pb2.SayRequest(content="said", channel_id=channel_id))


async def via_delegate(hub: RunningHub, alice: Participant, bob: Participant, channel_id: str) -> object:
    try:  # bob never answers: passing the rate check is what matters
        return await alice.rpc(
            "Delegate", hub_pb2.DelegateRequest(target=bob.name, prompt="help?", timeout_seconds=0.05)
        )
    except Timeout:
        return None


async def via_open_message(hub: RunningHub, alice: Participant, bob: Participant, channel_id: str) -> object:
    return await alice.rpc(
        "OpenChannel", hub_pb2.OpenChannelRequest(type="consulting", targets=[bob.name], message="hi")
    )


async def via_open_seed_envelope(hub: RunningHub, alice: Participant, bob: Participant, channel_id: str) -> object:
    seed = make_envelope("", EV_TEXT, {"text": "seed"})
    return await alice.rpc(
        "OpenChannel", hub_pb2.OpenChannelRequest(type="consulting", targets=[bob.name], seed_envelope=seed)
    )


async def via_invoke_agent(hub: RunningHub, alice: Participant, bob: Participant, channel_id: str) -> object:
    await bob.rpc("SetA2ASettings", hub_pb2.SetA2ASettingsRequest(a2a=a2a_pb2.A2ASettings(enabled=True)))
    return await alice.rpc(
        "InvokeAgent", hub_pb2.InvokeAgentRequest(agent_id=bob.agent_id, message="do it", timeout_seconds=0.05)
    )


async def via_tool_say(hub: RunningHub, alice: Participant, bob: Participant, channel_id: str) -> object:
    args = json.dumps({"content": "tool says"})
    return await alice.rpc("CallTool", hub_pb2.CallToolRequest(name="say", arguments_json=args, channel_id=channel_id))


async def via_tool_open(hub: RunningHub, alice: Participant, bob: Participant, channel_id: str) -> object:
    bob.auto_accept_invites = True  # the tool waits until the channel is OPENED
    args = json.dumps({"action": "open", "type": "consulting", "target": bob.name, "message": "hi"})
    return await alice.rpc("CallTool", hub_pb2.CallToolRequest(name="channels", arguments_json=args))


PATHS = [
    via_connect,
    via_post_envelope,
    via_say,
    via_delegate,
    via_open_message,
    via_open_seed_envelope,
    via_invoke_agent,
    via_tool_say,
    via_tool_open,
]


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.__name__)
async def test_every_originating_path_is_limited_and_counts(
    hub: RunningHub, clock: FakeClock, conv: tuple[Participant, Participant, str], path: Path_
) -> None:
    alice, bob, channel_id = conv
    hub.set_policy(rate_policy("alice", per_second=0.001, burst=1))
    await alice.say(channel_id, "takes the only token")
    live = {c.channel_id for c in hub.live_channels()}
    seqs = {c.channel_id: c.last_seq for c in hub.live_channels()}
    with pytest.raises(RateLimited):
        await path(hub, alice, bob, channel_id)
    # Refused: no channel opened, nothing appended anywhere.
    assert {c.channel_id for c in hub.live_channels()} == live
    assert {c.channel_id: c.last_seq for c in hub.live_channels()} == seqs

    clock.offset += 1000.0  # one token
    await path(hub, alice, bob, channel_id)
    with pytest.raises(RateLimited):  # the path took that token
        await alice.say(channel_id, "no token left")


def test_buckets_of_idle_identities_do_not_accumulate() -> None:
    now = [0.0]
    audits: list[tuple[str, str, str, dict[str, object]]] = []
    limiter = RateLimiter(
        lambda: now[0], lambda *a: audits.append(a), lambda agent: RateSpec(10.0, 5, "r"), audit_window=60.0
    )
    for i in range(1000):
        limiter.take(f"agent-{i}", "c", EV_TEXT)
    assert len(limiter) == 1000
    now[0] += 1.0  # every bucket is full again: the same as no bucket
    for _ in range(600):
        limiter.take("busy", "c", EV_TEXT)
        now[0] += 0.1
    assert len(limiter) <= 2

    # A flooder's refusals after the first are counted; the count is written when its bucket goes.
    for _ in range(8):
        try:
            limiter.take("flooder", "c", EV_TEXT)
        except RateLimited:
            pass
    assert [a[3].get("suppressed") for a in audits] == [None]
    limiter.forget("flooder")
    assert [(a[1], a[3].get("suppressed")) for a in audits] == [("flooder", None), ("flooder", 2)]


def test_a_refund_gives_a_token_back_and_never_fills_a_bucket_above_its_burst() -> None:
    clock = FakeClock(frozen=True)
    spec: dict[str, RateSpec | None] = {"alice": RateSpec(0.5, 3, "r")}
    limiter = RateLimiter(clock, lambda *a: None, spec.get)
    for _ in range(3):
        assert limiter.take("alice", "c", EV_TEXT)  # a token was taken
    with pytest.raises(RateLimited):
        limiter.take("alice", "c", EV_TEXT)
    limiter.refund("alice")  # one envelope was not stored after all: its token comes back
    assert limiter.take("alice", "c", EV_TEXT)
    with pytest.raises(RateLimited):
        limiter.take("alice", "c", EV_TEXT)

    clock.offset += 4.0  # two tokens arrived (one left to fill the bucket)
    limiter.refund("alice", 5)  # more back than there is room for: the bucket holds its burst, no more
    for _ in range(3):
        limiter.take("alice", "c", EV_TEXT)
    with pytest.raises(RateLimited):
        limiter.take("alice", "c", EV_TEXT)

    spec["alice"] = RateSpec(0.5, 1, "r")  # the policy shrank the burst since the tokens were taken
    limiter.refund("alice", 3)
    limiter.take("alice", "c", EV_TEXT)
    with pytest.raises(RateLimited):
        limiter.take("alice", "c", EV_TEXT)

    limiter.refund("nobody")  # no bucket (never limited, or full and dropped): nothing to give back
    assert not limiter.take("bob", "c", EV_TEXT)  # no rule limits bob: no token taken
    limiter.refund("bob")
    assert len(limiter) == 1


async def test_a_post_refused_by_the_channel_takes_no_token(
    hub: RunningHub, conv: tuple[Participant, Participant, str]
) -> None:
    alice, _bob, channel_id = conv
    hub.set_policy(rate_policy("alice", per_second=0.001, burst=2))
    with pytest.raises(InvalidArgument, match="non-participants"):
        await alice.say(channel_id, "to a stranger", audience=["nobody"])
    with pytest.raises(ProtocolError, match="no open invite"):
        await alice.post(channel_id, "ag2.channel.invite_ack", {})
    with pytest.raises(NotFound):
        await alice.say("no-such-" + channel_id, "nowhere")
    await alice.say(channel_id, "first")  # both tokens are still there
    await alice.say(channel_id, "second")
    with pytest.raises(RateLimited):
        await alice.say(channel_id, "third")
