"""Custom transition targets (AG2's ``register_target``): a registered class is named in a graph by
its type with its arguments as JSON, decides the next speaker on each turn it is reached, reads back
as it was given, and is refused when unregistered or given arguments that do not fit. A hub process
loads them with ``--transition-targets``; restarted without them, the open workflow ends clearly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agentnet.v1 import hub_pb2

from agentsdk.network import EV_TEXT, HubClient, HumanClient, Passport, TransitionGraph, register_target
from agentsdk.network.hub_client import Hub
from netkernel.errors import ChannelClosed, InvalidArgument
from tests.agentsdk.network.custom_targets import Rota
from tests.procs import ROOT, start_service

register_target(Rota)  # for the embedded hubs of this process (the hub process loads it by flag)


async def people(hub: HubClient, tag: str) -> list[HumanClient]:
    return [await hub.register_human(Passport(name=f"{tag}-{n}", kind="human")) for n in "abc"]


async def expected_next(client: HumanClient, channel_id: str) -> list[str]:
    said = await client.rpc.can_send(hub_pb2.CanSendRequest(channel_id=channel_id, event_type="ag2.msg.text"))
    return list(said.expected_next)


async def close_reason(client: HumanClient, channel_id: str) -> str:
    meta = await client.rpc.describe_channel(hub_pb2.DescribeChannelRequest(channel_id=channel_id))
    return meta.channel.close_reason


async def test_a_registered_target_routes_and_reads_back_as_given() -> None:
    async with Hub.open() as hub:
        a, b, c = await people(hub, "rota")
        rota = Rota(order=["rota-a", "rota-c", "rota-b"], stop_after=3)
        graph = TransitionGraph(initial_speaker="rota-a", default_target=rota)
        assert graph.to_knobs()["default_target"] == {
            "type": "test.rota",
            "args": {"order": ["rota-a", "rota-c", "rota-b"], "stop_after": 3, "reason": "rota_done"},
        }
        channel = await a.open(type="workflow", target=["rota-b", "rota-c"], knobs=graph.to_knobs())
        cid = channel.channel_id
        meta = await a.rpc.describe_channel(hub_pb2.DescribeChannelRequest(channel_id=cid))
        assert json.loads(meta.channel.knobs_json)["default_target"] == graph.to_knobs()["default_target"]
        await a.send(cid, "one")  # turns=1: order[1]
        assert await expected_next(a, cid) == [c.agent_id]
        await c.send(cid, "two")  # turns=2: order[2]
        assert await expected_next(a, cid) == [b.agent_id]
        await b.send(cid, "three")  # turns=3: stop_after
        assert await close_reason(a, cid) == "rota_done"


@pytest.mark.parametrize(
    ("target", "problem"),
    [
        ({"type": "test.nobody"}, "custom target registered in this hub: test.rota"),
        ({"type": "test.rota", "args": {"order": []}}, "do not fit custom target 'test.rota'"),
        ({"type": "test.rota", "args": {"colour": "red"}}, "do not fit custom target 'test.rota'"),
        ({"type": "test.rota", "args": ["x"]}, "args must be a JSON object"),
        ({"type": "test.rota", "agent": "x", "args": {"order": ["x"]}}, "unknown key(s) ['agent']"),
    ],
)
async def test_unregistered_targets_and_bad_arguments_are_refused(target: dict[str, Any], problem: str) -> None:
    async with Hub.open() as hub:
        a, _, _ = await people(hub, "bad")
        with pytest.raises(InvalidArgument) as err:
            await a.open(type="workflow", target=["bad-b", "bad-c"], knobs={"default_target": target})
        assert problem in str(err.value)
        listed = await a.rpc.list_channels(hub_pb2.ListChannelsRequest())
        assert list(listed.channels) == []  # nothing was created


def test_a_target_needs_a_free_type_name_and_a_dataclass() -> None:
    class Plain:
        type = "test.plain"

        def resolve(self, turn: Any) -> Any:
            return None

    with pytest.raises(InvalidArgument, match="must be a dataclass"):
        register_target(Plain)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="not one of agent, round_robin"):
        register_target(type("RoundRobin", (Rota,), {"type": "round_robin"}))


async def test_a_hub_process_loads_targets_by_flag_and_waits_for_them_after_a_restart(tmp_path: Path) -> None:
    """The graph is data: a hub restarted without the target keeps the channel (it reads as ended with
    target_unavailable and refuses turns, saying so); started with it again, the workflow goes on."""
    flags = ["--data-dir", str(tmp_path)]
    with_targets = [*flags, "--transition-targets", "tests.agentsdk.network.custom_targets:TARGETS"]
    hub = start_service("hubsvc", with_targets, cwd=ROOT)
    try:
        async with HubClient.connect(hub.target) as hc:
            a, b, _ = await people(hc, "proc")
            graph = TransitionGraph(default_target=Rota(order=["proc-a", "proc-b", "proc-c"]))
            cid = (await a.open(type="workflow", target=["proc-b", "proc-c"], knobs=graph.to_knobs())).channel_id
            await a.send(cid, "one")
            assert await expected_next(a, cid) == [b.agent_id]
            credentials = [p.credential for p in (a, b)]
    finally:
        assert hub.terminate() == 0
    hub = start_service("hubsvc", flags, cwd=ROOT)  # restarted without --transition-targets
    try:
        async with HubClient.connect(hub.target) as hc:
            a, b = [await hc.resume_human(credential) for credential in credentials]
            assert await expected_next(a, cid) == []
            with pytest.raises(ChannelClosed, match="not registered in this hub process"):
                await b.send(cid, "two")
            assert await close_reason(a, cid) == ""  # not closed: nothing was decided for good
    finally:
        assert hub.terminate() == 0
    hub = start_service("hubsvc", with_targets, cwd=ROOT)
    try:
        async with HubClient.connect(hub.target) as hc:
            a, b = [await hc.resume_human(credential) for credential in credentials]
            assert await expected_next(a, cid) == [b.agent_id]
            await b.send(cid, "two")
            assert [e.text for e in await a.read_wal(cid) if e.event_type == EV_TEXT] == ["one", "two"]
    finally:
        assert hub.terminate() == 0
