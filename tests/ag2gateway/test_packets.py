"""AG2's workflow packets through the gateway: static tool routing (a ``"handoff"`` without a target)
is routed by the hub's graph, and reads back as AG2 wrote it."""

from __future__ import annotations

import pytest

from ag2gateway.records.channels import knobs_from_ag2
from ag2gateway.records.envelopes import packet_from_ag2, packet_to_ag2
from tests.ag2gateway.conftest import Ag2Error, Net
from tests.ag2gateway.test_channels import TOKEN
from tests.eventually import assert_eventually


def test_a_static_tool_handoff_is_the_hubs_tool_routing_and_reads_back_as_ag2s() -> None:
    static = {"kind": "handoff", "tool": "escalate", "reason": "need a human"}
    hub = packet_from_ag2({"routing": static, "body": "over to you"})
    assert hub["routing"] == {"tool": "escalate", "reason": "need a human", "tool_called": "escalate"}
    assert packet_to_ag2(hub)["routing"] == {**static, "tool_called": "escalate"}
    dynamic = {"kind": "handoff", "tool": "pick", "reason": "", "target": "b" * 32}
    assert packet_from_ag2({"routing": dynamic})["routing"]["kind"] == "handoff"  # a pre-resolved target stays
    assert packet_to_ag2({"routing": {}})["routing"] == {"kind": "text"}  # no tool, no kind: AG2's text
    assert packet_from_ag2({"routing": {"kind": "handoff", "tool": "x", "target": None}})["routing"] == {
        "tool": "x",
        "tool_called": "x",
    }


async def test_a_static_tool_routing_packet_from_an_ag2_process_routes_by_the_graph(net: Net) -> None:
    bob_process = await net.another_process()
    bob = await bob_process("human", name="bob", token=TOKEN.format("bob"))
    alice = await net.ag2("human", name="alice", token=TOKEN.format("alice"))
    graph = {
        "initial_speaker": alice["agent_id"],
        "transitions": [
            {
                "when": {"name": "tool_called", "args": {"tool_name": "escalate"}},
                "then": {"name": "agent", "args": {"agent_id": bob["agent_id"]}},
                "priority": 0,
            }
        ],
        "default_target": {"name": "terminate", "args": {"reason": "no_escalation"}},
        "max_turns": None,
    }
    opened = await net.ag2("open", who="alice", type="workflow", targets=["bob"], knobs={"graph": graph})
    channel_id = opened["channel_id"]
    routing = {"kind": "handoff", "tool": "escalate", "reason": "need a human"}
    packet = {
        "channel_id": channel_id,
        "sender_id": alice["agent_id"],
        "audience": None,
        "event_type": "ag2.packet",
        "event_data": {"routing": routing, "context_updates": {"set": {}, "delete": []}, "body": "over to you"},
    }
    await net.ag2("rpc", name="post_envelope", params={"envelope": packet})  # the hub refused this before

    async def bob_is_due() -> bool:
        packets = [e for e in await bob_process("received", who="bob") if e["event_type"] == "ag2.packet"]
        assert len(packets) == 1, packets
        got = packets[0]
        assert got["event_data"]["routing"] == {**routing, "tool_called": "escalate"}
        assert got["event_data"]["body"] == "over to you"
        assert await bob_process("call", name="can_send", args=[channel_id, bob["agent_id"]]) is True
        return True

    await assert_eventually(bob_is_due, timeout=30)
    assert await net.ag2("call", name="can_send", args=[channel_id, alice["agent_id"]]) is False
    meta = await net.ag2("call", name="get_channel", args=[channel_id])
    assert meta["state"] == "active"  # routed to bob by the graph, not terminated by its default


async def test_a_workflow_opened_without_a_graph_is_refused_as_ag2s_hub_refuses_it(net: Net) -> None:
    await net.ag2("human", name="bob", token=TOKEN.format("bob"))
    await net.ag2("human", name="alice", token=TOKEN.format("alice"))
    for knobs in (None, {}, {"graph": "not a dict"}):
        with pytest.raises(Ag2Error, match=r"ProtocolError: workflow requires knobs\['graph'\] as a dict"):
            await net.ag2("open", who="alice", type="workflow", targets=["bob"], knobs=knobs)
    assert await net.ag2("call", name="list_channels", kwargs={"include_terminal": True}) == []  # nothing was created


def test_an_ag2_graph_naming_a_custom_target_passes_it_with_its_args() -> None:
    """AG2's register_target: a target of another name reaches the hub with its args, for the hub's own
    registry of custom targets (docs/hub.md); the built-in ones keep their hub spelling."""
    graph = {
        "initial_speaker": "a" * 32,
        "transitions": [
            {"when": {"name": "always", "args": {}}, "then": {"name": "test.rota", "args": {"order": ["x"]}}},
            {"when": {"name": "always", "args": {}}, "then": {"name": "stay", "args": {}}},
        ],
        "default_target": {"name": "by_topic", "args": {"experts": {"math": "bob"}}},
    }
    knobs = knobs_from_ag2("workflow", {"graph": graph}, None)
    assert [t["target"] for t in knobs["transitions"]] == [
        {"type": "test.rota", "args": {"order": ["x"]}},
        {"type": "stay"},
    ]
    assert knobs["default_target"] == {"type": "by_topic", "args": {"experts": {"math": "bob"}}}
    assert knobs["graph"] == graph  # kept verbatim for AG2 readers
