"""The hub's Prometheus metrics, scraped over HTTP from a real hub after real traffic (on both stores)."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import pytest

from servicekit.metrics import MetricsSettings
from tests.hubsvc.harness import EV_TEXT, RunningHub, assert_eventually, conversation, running_hub
from tests.scrape import Samples, scrape, value
from tests.scrape import value as v


def metrics_url(hub: RunningHub) -> str:
    server = hub.server.metrics_server
    assert server is not None
    return server.url


async def scrape_hub(hub: RunningHub) -> Samples:
    """Every replica's samples merged, as a dashboard over all of them shows them: summed (a ``_max``
    gauge: the largest). A hub alone is its own scrape."""
    merged: Samples = {}
    for server in hub.replicas:
        assert server.metrics_server is not None
        for key, sample in (await scrape(server.metrics_server.url)).items():
            merged[key] = (
                max(merged.get(key, sample), sample) if key[0].endswith("_max") else merged.get(key, 0) + sample
            )
    return merged


async def test_metrics_are_off_unless_asked_for(tmp_path: Path) -> None:
    async with running_hub(tmp_path / "hub.db") as hub:
        assert hub.server.metrics_server is None and hub.server.metrics is None


async def test_posts_refusals_commits_and_deliveries_are_counted(tmp_path: Path, hub_store: str) -> None:
    async with running_hub(tmp_path / "hub.db", metrics=MetricsSettings(port=0)) as hub:
        store = hub.core.store.kind  # "redis" for every Redis test store kind (server or Cluster)
        alice, bob, cid = await conversation(hub.target)
        before = await scrape_hub(hub)
        sent = [await alice.say(cid, f"m{i}") for i in range(5)]
        for env in sent:
            assert (await bob.next_of(EV_TEXT)).envelope_id == env.envelope_id
        with pytest.raises(Exception, match="no channel"):
            await alice.say("no-such-channel", "hello?")
        retry = await alice.say(cid, "again", idempotency_key="k1")
        await bob.next_of(EV_TEXT)
        assert (await alice.say(cid, "again", idempotency_key="k1")).envelope_id == retry.envelope_id
        after = await scrape_hub(hub)

        def delta(name: str, **labels: str) -> float:
            return value(after, name, **labels) - value(before, name, **labels)

        assert delta("agentnet_hub_posts_admitted_total", kind="new") == 6
        assert delta("agentnet_hub_posts_admitted_total", kind="duplicate") == 1
        assert delta("agentnet_hub_posts_refused_total", reason="NOT_FOUND") == 1
        # bob got 6 envelopes (alice's own posts are not delivered back to her), in at most 6 frames
        assert delta("agentnet_hub_delivered_envelopes_total") == 6
        assert 1 <= delta("agentnet_hub_delivery_frames_total") <= 6
        groups = delta("agentnet_hub_commit_seconds_count", store=store)
        assert groups >= 1
        assert delta("agentnet_hub_commit_group_bundles_count", store=store) == groups
        assert delta("agentnet_hub_commit_group_bundles_sum", store=store) >= 6  # each admitted post: a bundle
        assert delta("agentnet_hub_commit_seconds_sum", store=store) > 0
        assert value(after, "agentnet_hub_connected_streams") == 2
        assert value(after, "agentnet_hub_live_channels") == 1
        assert value(after, "agentnet_hub_store_write_queue_bundles", store=store) >= 0
        assert value(after, "agentnet_hub_session_queued_bytes") >= 0
        # no label carries an agent or channel id
        ids = {alice.agent_id, bob.agent_id, cid}
        assert not [key for key in after if ids & {label for _, label in key[1]}]

        # a stream that resumes gets the WAL above its cursor replayed: counted
        await bob.sync()
        await bob.disconnect()
        for i in range(3):
            await alice.say(cid, f"while away {i}")
        await bob.connect()
        for _ in range(3):
            await bob.next_of(EV_TEXT)

        async def replayed() -> bool:
            now = await scrape_hub(hub)
            return (
                value(now, "agentnet_hub_replayed_envelopes_total")
                - value(after, "agentnet_hub_replayed_envelopes_total")
                == 3
            )

        await assert_eventually(replayed)
        await alice.close()
        await bob.close()

        async def disconnected() -> bool:
            return v(await scrape_hub(hub), "agentnet_hub_connected_streams") == 0

        await assert_eventually(disconnected)


async def test_queued_deliveries_show_in_the_gauges(tmp_path: Path) -> None:
    async with running_hub(tmp_path / "hub.db", metrics=MetricsSettings(port=0)) as hub:
        alice, bob, cid = await conversation(hub.target)
        await bob.sync()  # the hub has bob's acks of what it got so far
        last = await hub.core.store.channel_seq(cid)

        async def recorded() -> bool:  # and stored them (a cursor write follows its acks): none is replayed below
            return (await hub.core.store.load_cursors(bob.agent_id)).get(cid) == last

        await assert_eventually(recorded)
        await bob.disconnect()
        # bob reconnects with a window of one unacked delivery and stops acking: the rest stays queued
        bob.auto_ack = False
        for i in range(4):
            await alice.say(cid, f"m{i}")
        await bob.connect(max_in_flight=1)

        async def queued() -> bool:
            samples: Samples = await scrape_hub(hub)
            assert value(samples, "agentnet_hub_session_queued_envelopes") == 3
            assert value(samples, "agentnet_hub_session_queued_bytes") > 0
            assert value(samples, "agentnet_hub_session_queued_bytes_max") == value(
                samples, "agentnet_hub_session_queued_bytes"
            )
            return True

        await assert_eventually(queued)
        await alice.close()
        await bob.close()


async def test_only_get_metrics_is_served(tmp_path: Path) -> None:
    async with running_hub(tmp_path / "hub.db", metrics=MetricsSettings(port=0)) as hub:
        url = metrics_url(hub)
        import asyncio

        def status(target: str, method: str = "GET") -> int:
            try:
                with urllib.request.urlopen(urllib.request.Request(target, method=method), timeout=10) as r:
                    return int(r.status)
            except urllib.error.HTTPError as err:
                return err.code

        assert await asyncio.to_thread(status, url.replace("/metrics", "/other")) == 404
        assert await asyncio.to_thread(status, url, "POST") == 405
        assert await asyncio.to_thread(status, url, "HEAD") == 200


async def test_reported_turn_failures_are_counted(tmp_path: Path) -> None:
    from agentnet.v1 import hub_pb2

    async with running_hub(tmp_path / "hub.db", metrics=MetricsSettings(port=0)) as hub:
        alice, bob, cid = await conversation(hub.target)
        before = await scrape_hub(hub)
        question = await alice.say(cid, "hello?")
        request = hub_pb2.ReportTurnFailureRequest(
            channel_id=cid, envelope_id=question.envelope_id, error_class="openai.APIConnectionError", attempts=3
        )
        response = await bob.rpc("ReportTurnFailure", request)
        assert response.posted and response.action == "notify"
        after = await scrape_hub(hub)
        labels = {"channel_type": "conversation", "action": "notify"}
        assert (
            value(after, "agentnet_hub_turn_failures_total", **labels)
            - value(before, "agentnet_hub_turn_failures_total", **labels)
            == 1
        )
        await alice.close()
        await bob.close()
