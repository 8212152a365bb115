"""The SDK backs off on RATE_LIMITED (agentsdk/backoff.py) against a real embedded hub."""

from __future__ import annotations

import json

import pytest
from agentnet.v1 import hub_pb2

from agentsdk.network import Hub, RateLimitBackoff
from hubsvc.governance.policy import PeerSelector, Policy, RateRule, Rule, RuleEntry
from netkernel.envelope import EV_TEXT, text_envelope
from netkernel.errors import RateLimited
from netkernel.identity import Passport
from netkernel.wire import envelope_to_wire
from tests.clock import FakeClock
from tests.eventually import assert_eventually


def rate_policy(name: str, per_second: float, burst: int) -> Policy:
    rule = Rule(rate=RateRule(posts_per_second=per_second, burst=burst))
    return Policy(rules=(RuleEntry(id=f"{name}-rate", match=PeerSelector(names=(name,)), rule=rule),))


async def rate_audit(hub: Hub) -> list[dict[str, object]]:
    rows = await hub.core.store.list_audit(kind="rate_limited", subject_id="", after_id=0, limit=100)
    return [json.loads(r.detail_json) for r in rows]


async def test_posts_back_off_and_succeed_when_the_limit_allows() -> None:
    async with Hub.open() as hub:
        ann = await hub.register_human(Passport(name="ann", kind="human"))
        await hub.register_human(Passport(name="ben", kind="human"))
        ch = await ann.open(type="conversation", target="ben")
        hub.core.governance.replace(rate_policy("ann", per_second=5.0, burst=1))
        for i in range(3):  # over the Connect stream: back to back, so the hub refuses some
            await ann.send(ch.channel_id, f"m{i}")
        wire = envelope_to_wire(text_envelope(ch.channel_id, ann.agent_id, "unary"))
        await ann.rpc.post_envelope(hub_pb2.PostEnvelopeRequest(envelope=wire))
        texts = [e.text for e in await ann.read_wal(ch.channel_id) if e.event_type == EV_TEXT]
        assert texts == ["m0", "m1", "m2", "unary"]  # each once: a retry never admits a copy

        async def refused_then_retried() -> bool:
            return bool(await rate_audit(hub))

        await assert_eventually(refused_then_retried)


@pytest.mark.parametrize(
    "backoff",
    [RateLimitBackoff(max_attempts=3, max_wait_seconds=30), RateLimitBackoff(max_attempts=100, max_wait_seconds=0.25)],
    ids=["attempts", "wait"],
)
async def test_gives_up_after_its_bound_and_raises_rate_limited(backoff: RateLimitBackoff) -> None:
    clock = FakeClock(frozen=True)  # no token ever arrives unless the test moves the clock
    async with Hub.open(clock=clock) as hub:
        hub.connection.rate_limit_backoff = backoff
        ann = await hub.register_human(Passport(name="ann", kind="human"))
        await hub.register_human(Passport(name="ben", kind="human"))
        ch = await ann.open(type="conversation", target="ben")
        hub.core.governance.replace(rate_policy("ann", per_second=10.0, burst=1))
        await ann.send(ch.channel_id, "the one token")
        with pytest.raises(RateLimited) as refused:
            await ann.send(ch.channel_id, "never admitted")
        assert refused.value.metadata["rule"] == "ann-rate"
        # Three attempts in both cases (waits of 0.1-0.125 s: a third wait would pass 0.25 s).
        # The first refusal is audited, the two retries counted; once the audit window is
        # over (and the bucket full again) the count is written.
        clock.offset += 120.0
        await ann.send(ch.channel_id, "a new token")

        async def counted() -> bool:
            details = await rate_audit(hub)
            assert [d.get("suppressed") for d in details] == [None, 2]
            return True

        await assert_eventually(counted)
