"""Knobs through OpenChannel: an unknown knob or a bad value is INVALID_ARGUMENT naming it, names no
channel (none was created), and creates nothing."""

from __future__ import annotations

import re

import grpc
import pytest
from agentnet.v1 import hub_pb2

from agentsdk.errors import InvalidArgument
from agentsdk.network import Hub, Passport


@pytest.mark.parametrize(
    ("knobs", "named"),
    [
        ({"rounds": 1}, "no knob 'rounds' (did you mean 'max_rounds'?)"),
        ({"max_rounds": 0}, "knob 'max_rounds' must be a positive integer"),
        ({"ordering": "free"}, "knob 'ordering' is 'free'"),
        ({"max_turns": 2, "max_rounds": 1}, "give either knob 'max_turns'"),
        ({"on_turn_failed": "retry"}, "knob 'on_turn_failed' is 'retry'"),
        ({"labels": [1]}, "knob 'labels' must be a JSON object"),
    ],
)
async def test_bad_knobs_are_refused_and_create_nothing(hub: Hub, knobs: dict[str, object], named: str) -> None:
    a = await hub.register_human(Passport(name="a", kind="human"))
    await hub.register_human(Passport(name="b", kind="human"))
    await hub.register_human(Passport(name="c", kind="human"))
    with pytest.raises(InvalidArgument) as info:
        await a.open(type="discussion", target=["b", "c"], knobs=knobs)
    err = info.value
    assert err.code == grpc.StatusCode.INVALID_ARGUMENT and named in err.message
    assert "channel_id" not in err.metadata and not re.search(r"[0-9a-f]{16,}", err.message)  # no id at all
    if "rounds" in knobs:
        assert err.metadata["knob"] == "rounds" and "max_rounds" in err.metadata["valid"].split(",")
    listed = await a.rpc.list_channels(hub_pb2.ListChannelsRequest(include_ended=True))
    assert list(listed.channels) == []


@pytest.mark.parametrize("knobs", [None, {}, {"max_turns": 4}])
async def test_a_workflow_without_a_graph_is_refused_as_ag2_refuses_it(
    hub: Hub, knobs: dict[str, object] | None
) -> None:
    a = await hub.register_human(Passport(name="a", kind="human"))
    await hub.register_human(Passport(name="b", kind="human"))
    with pytest.raises(InvalidArgument, match="the knobs hold no transition graph"):
        await a.open(type="workflow", target=["b"], knobs=knobs)
    listed = await a.rpc.list_channels(hub_pb2.ListChannelsRequest(include_ended=True))
    assert list(listed.channels) == []
    opened = await a.open(type="workflow", target=["b"], knobs={"transitions": []})  # a graph, if an empty one
    assert opened.metadata.knobs["default_target"] == {"type": "terminate"}


async def test_a_one_round_discussion_ends_after_each_member_spoke(hub: Hub) -> None:
    a = await hub.register_human(Passport(name="a", kind="human"))
    b = await hub.register_human(Passport(name="b", kind="human"))
    ch = await a.open(type="discussion", target=["b"], knobs={"max_rounds": 1})
    assert ch.metadata.knobs["max_turns"] == 2  # one round of two participants
    await a.send(ch.channel_id, "first")
    await b.send(ch.channel_id, "second")
    closed = await a.next_envelope(predicate=lambda e: e.event_type == "ag2.channel.closed", timeout=10)
    assert closed.event_data["reason"] == "max_turns"
