"""The console's list pages ask the hub a bounded number of questions, whatever the page holds.

A real hub (in process, serving its Prometheus metrics) and the console app (Starlette's
TestClient); the calls the hub served while a page was drawn are read from the hub's
``agentnet_hub_rpcs_total`` counter over HTTP, as Prometheus scrapes it."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from starlette.testclient import TestClient

from agentsdk.console import views
from agentsdk.console.app import Console
from agentsdk.console.options import ConsoleOptions
from agentsdk.operator import OperatorClient
from servicekit.metrics import MetricsSettings
from tests.agentsdk.console.conftest import LoopThread, login
from tests.hubsvc.harness import EV_TEXT, Participant, RunningHub, open_channel, register, running_hub
from tests.scrape import Samples, scrape, value

PAGE = 100
_ROW = re.compile(r'<tr class="channel [^"]*">(.*?)</tr>', re.S)
_CELL = re.compile(r"<td[^>]*>(.*?)</td>", re.S)
_TAG = re.compile(r"<[^>]+>")


@dataclass
class Served:
    """The hub and how to read what it served."""

    hub: RunningHub
    loop: LoopThread

    def samples(self) -> Samples:
        """The hub's metrics now."""
        server = self.hub.server.metrics_server
        assert server is not None
        return self.loop.run(scrape(server.url))

    def run(self, coro: Any) -> Any:
        """Run ``coro`` on the hub's loop."""
        return self.loop.run(coro)


@pytest.fixture
def served(tmp_path: Path, loop_thread: LoopThread) -> Iterator[Served]:
    """A hub with metrics on the background loop, stopped after the test."""
    context = running_hub(tmp_path / "hub.db", metrics=MetricsSettings(port=0))
    hub = loop_thread.run(context.__aenter__())
    try:
        yield Served(hub, loop_thread)
    finally:
        loop_thread.run(context.__aexit__(None, None, None))


def rpc_calls(samples: Samples, service: str, method: str) -> float:
    """How many calls of ``service``/``method`` the hub served."""
    return value(samples, "agentnet_hub_rpcs_total", method=f"/agentnet.v1.{service}/{method}")


def served_while(served: Served, action: Any) -> tuple[Any, dict[str, float]]:
    """``action()``'s result and the calls of each method the hub served meanwhile."""
    before = served.samples()
    result = action()
    after = served.samples()
    counts = {
        dict(labels)["method"]: n - before.get((name, labels), 0.0)
        for (name, labels), n in after.items()
        if name == "agentnet_hub_rpcs_total" and n - before.get((name, labels), 0.0)
    }
    return result, counts


def channel_rows(page: str) -> dict[str, list[str]]:
    """The channel table's rows: channel id → each cell's text."""
    rows: dict[str, list[str]] = {}
    for row in _ROW.findall(page):
        cells = [html.unescape(_TAG.sub("", c)).strip() for c in _CELL.findall(row)]
        rows[cells[0]] = cells
    return rows


async def _seed_channels(target: str, lead: Participant, n: int, start: int) -> None:
    """``n`` channels of ``lead``'s with different turns: consulting ones (the lead's question
    asked in every other one, so the turn is the lead's or the other's) and conversations (anyone)."""
    for i in range(start, start + n):
        other = await register(target, f"peer-{i:02d}")
        await other.connect()
        try:
            kind = "conversation" if i % 3 == 2 else "consulting"
            cid = await open_channel(lead, kind, [other])
            if kind == "consulting" and i % 2:
                await lead.post(cid, EV_TEXT, {"text": f"question {i}"})
        finally:
            await other.close()


async def _expected_turns(hub: RunningHub) -> dict[str, str]:
    """Whose turn it is in each channel, as DescribeChannel says (what the page showed so far)."""
    async with OperatorClient(hub.target, hub.operator_token) as operator:
        out: dict[str, str] = {}
        for meta in await operator.channels():
            described = await operator.describe_channel(meta.channel_id)
            out[meta.channel_id] = views.turn_text(described.channel, described.expected_next)
        return out


def test_the_channels_page_shows_every_turn_from_one_list_call(served: Served) -> None:
    app = Console(served.hub.target, options=ConsoleOptions(page_size=PAGE)).app()
    lead = served.run(register(served.hub.target, "lead"))
    served.run(lead.connect())
    try:
        with TestClient(app, base_url="http://127.0.0.1", follow_redirects=False) as client:
            assert login(client, served.hub.operator_token).status_code == 303
            shown = 0
            for n in (3, 12):  # the same calls for a few channels and for many
                served.run(_seed_channels(served.hub.target, lead, n, shown))
                shown += n
                page, calls = served_while(served, lambda: client.get("/channels"))
                assert page.status_code == 200, page.text
                assert calls == {"/agentnet.v1.OperatorService/ListChannels": 1}, calls
                rows = channel_rows(page.text)
                expected = served.run(_expected_turns(served.hub))
                assert len(rows) == shown == len(expected)
                assert {cid: cells[4] for cid, cells in rows.items()} == expected
                assert {"lead", "anyone"} <= set(expected.values()) and any(
                    t.startswith("peer-") for t in expected.values()
                )
    finally:
        served.run(lead.close())


def test_the_hub_counts_only_the_methods_it_serves(served: Served) -> None:
    async def calls() -> None:
        async with grpc.aio.insecure_channel(served.hub.target) as channel:
            unknown = channel.unary_unary("/agentnet.v1.HubService/NoSuchMethod")
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await unknown(b"")
            assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED
            await register(served.hub.target, "counted")

    _, counts = served_while(served, lambda: served.run(calls()))
    assert counts == {"/agentnet.v1.HubService/Register": 1}, counts


_AUDIT_ROW = re.compile(r'<tr class="audit"[^>]*>(.*?)</tr>', re.S)
_ACTOR = re.compile(r'<td class="id actor"(?: title="([^"]*)")?>(.*?)</td>', re.S)


def test_the_audit_page_names_its_actors_from_one_lookup(served: Served) -> None:
    """Each registration is an audit record whose actor is the new agent: a page of them has as many
    actors as rows, all named from one ListAgents call (ids in the title)."""
    page_size = 10
    agents = [served.run(register(served.hub.target, f"actor-{i:02d}")) for i in range(page_size + 5)]
    ids = {a.agent_id: a.record.passport.name for a in agents}
    app = Console(served.hub.target, options=ConsoleOptions(page_size=page_size)).app()
    with TestClient(app, base_url="http://127.0.0.1", follow_redirects=False) as client:
        assert login(client, served.hub.operator_token).status_code == 303
        for url in ("/audit?kind=agent_registered", "/audit?kind=agent_registered&after=0"):
            page, calls = served_while(served, lambda url=url: client.get(url))
            assert page.status_code == 200, page.text
            actors = [_ACTOR.search(row) for row in _AUDIT_ROW.findall(page.text)]
            assert len(actors) == page_size and all(actors), page.text
            shown = [(html.unescape(m.group(1) or ""), html.unescape(m.group(2)).strip()) for m in actors if m]
            assert all(agent_id in ids and name == ids[agent_id] for agent_id, name in shown), shown
            assert calls.get("/agentnet.v1.OperatorService/ListAgents") == 1, calls
            assert "/agentnet.v1.OperatorService/DescribeAgent" not in calls, calls
    for a in agents:
        served.run(a.close())
