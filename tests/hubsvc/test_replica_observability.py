"""Two hub replicas on one Redis: the follower counts the change feed it applies (and its lag), and a
delivery the follower makes of an envelope committed by the other replica continues that post's trace."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from servicekit.metrics import MetricsSettings
from tests.eventually import assert_eventually
from tests.hubsvc import harness
from tests.hubsvc.harness import EV_TEXT, Participant, RunningHub, open_channel, register
from tests.scrape import scrape, value

REDIS_DB = 3
"""The DB number of these tests (hub tests use 1, replica tests 2, knowledge tests 0)."""


@pytest.fixture
def on_redis(request: pytest.FixtureRequest) -> Iterator[None]:
    with harness.on_redis(request, "redis", REDIS_DB):
        yield


@pytest.fixture
async def two(
    on_redis: None, tmp_path: Path, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> AsyncIterator[tuple[RunningHub, RunningHub]]:
    provider, _ = spans
    settings = {"metrics": MetricsSettings(port=0), "tracer_provider": provider}
    async with harness.running_hub(tmp_path / "hub.db", **settings) as a:
        async with harness.running_hub(tmp_path / "hub.db", **settings) as b:
            yield a, b


async def test_the_follower_counts_the_feed_and_continues_the_trace(
    two: tuple[RunningHub, RunningHub], spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    a, b = two
    _, exporter = spans
    alice = await register(a.target, "alice")
    bob_id = await register(a.target, "bob")
    bob = Participant(b.target, bob_id.record, bob_id.credential)
    await alice.connect()
    await bob.connect()
    cid = await open_channel(alice, "conversation", [bob])
    assert b.server.metrics_server is not None
    url = b.server.metrics_server.url
    before = await scrape(url)
    sent = await alice.say(cid, "across replicas")
    assert (await bob.next_of(EV_TEXT)).envelope_id == sent.envelope_id

    async def counted() -> bool:
        after = await scrape(url)
        applied = value(after, "agentnet_hub_feed_entries_applied_total") - value(
            before, "agentnet_hub_feed_entries_applied_total"
        )
        lagged = value(after, "agentnet_hub_feed_lag_seconds_count") - value(
            before, "agentnet_hub_feed_lag_seconds_count"
        )
        return applied >= 1 and lagged == applied

    await assert_eventually(counted)

    [admitted] = [
        s
        for s in exporter.get_finished_spans()
        if s.name == "agentnet.hub.post" and (s.attributes or {}).get("agentnet.envelope_id") == sent.envelope_id
    ]

    def delivered_by_b() -> list[object]:
        return [
            s
            for s in exporter.get_finished_spans()
            if s.name == "agentnet.hub.deliver"
            and (s.attributes or {}).get("agentnet.envelope_id") == sent.envelope_id
            and s.parent is not None
            and s.parent.span_id == admitted.context.span_id
            and s.context.trace_id == admitted.context.trace_id
        ]

    assert len(await assert_eventually(delivered_by_b)) == 1
    await alice.close()
    await bob.close()
