"""Unmodified AG2 1.2.1 agents and humans, through the gateway, in each of the four channel types."""

from __future__ import annotations

from typing import Any

from tests.ag2gateway.conftest import Net
from tests.eventually import assert_eventually

TOKEN = "tok-{}-0123456789abcdef"


def texts(envelopes: list[dict[str, Any]]) -> list[str]:
    """The bodies of the AG2 text envelopes received."""
    return [e["event_data"].get("text", "") for e in envelopes if e["event_type"] == "ag2.msg.text"]


async def test_a_human_consults_an_ag2_agent_and_gets_its_answer(net: Net) -> None:
    ag2 = net.ag2
    bob = await ag2("agent", name="bob", token=TOKEN.format("bob"), replies=["forty-two"])
    await ag2("human", name="alice", token=TOKEN.format("alice"))
    opened = await ag2("open", who="alice", type="consulting", targets=["bob"])
    assert opened["metadata"]["manifest"]["type"] == "consulting"
    [initiator, respondent] = opened["metadata"]["participants"]
    assert (initiator["role"], respondent["role"], respondent["agent_id"]) == (
        "initiator",
        "respondent",
        bob["agent_id"],
    )

    async def channel_open() -> None:
        meta = await ag2("call", name="get_channel", args=[opened["channel_id"]])
        assert meta["state"] == "active"
        return True

    await assert_eventually(channel_open)
    sent = await ag2("send", who="alice", channel_id=opened["channel_id"], text="what is six times seven?")

    async def answered() -> None:
        received = await ag2("received", who="alice")
        assert texts(received) == ["forty-two"]
        [reply] = [e for e in received if e["event_type"] == "ag2.msg.text"]
        assert reply["causation_id"] == sent["envelope_id"] and reply["sender_id"] == bob["agent_id"]
        return True

    await assert_eventually(answered, timeout=30)


async def _opened(net: Net, channel_id: str) -> None:
    async def active() -> bool:
        meta = await net.ag2("call", name="get_channel", args=[channel_id])
        assert meta["state"] == "active"
        return True

    await assert_eventually(active, timeout=15)


async def test_a_conversation_between_an_ag2_human_and_agent(net: Net) -> None:
    ag2 = net.ag2
    await ag2("agent", name="bob", token=TOKEN.format("bob"), replies=["noted"])  # AG2's TestConfig restarts per turn
    await ag2("human", name="alice", token=TOKEN.format("alice"))
    opened = await ag2("open", who="alice", type="conversation", targets=["bob"])
    await _opened(net, opened["channel_id"])
    sent = []
    for n, text in enumerate(["hello", "goodbye"], start=1):
        sent.append((await ag2("send", who="alice", channel_id=opened["channel_id"], text=text))["envelope_id"])

        async def answered(n: int = n) -> bool:
            replies = [e for e in await ag2("received", who="alice") if e["event_type"] == "ag2.msg.text"]
            assert [(e["event_data"]["text"], e["causation_id"]) for e in replies] == [("noted", s) for s in sent]
            assert len(replies) == n
            return True

        await assert_eventually(answered, timeout=30)


async def test_a_discussion_goes_round_robin_through_two_ag2_agents(net: Net) -> None:
    ag2 = net.ag2
    bob = await ag2("agent", name="bob", token=TOKEN.format("bob"), replies=["bob's view"])
    carol = await ag2("agent", name="carol", token=TOKEN.format("carol"), replies=["carol's view"])
    await ag2("human", name="alice", token=TOKEN.format("alice"))
    opened = await ag2("open", who="alice", type="discussion", targets=["bob", "carol"])
    roles = [p["role"] for p in opened["metadata"]["participants"]]
    assert roles == ["initiator", "participant", "participant"]
    await _opened(net, opened["channel_id"])
    await ag2("send", who="alice", channel_id=opened["channel_id"], text="what do you think?")

    async def both() -> bool:
        received = [e for e in await ag2("received", who="alice") if e["event_type"] == "ag2.msg.text"]
        assert [(e["sender_id"], e["event_data"]["text"]) for e in received] == [
            (bob["agent_id"], "bob's view"),
            (carol["agent_id"], "carol's view"),
        ]
        assert received[0]["envelope_id"] < received[1]["envelope_id"]  # AG2 ids sort in admission order
        return True

    await assert_eventually(both, timeout=30)


async def test_a_workflow_hands_over_from_an_ag2_human_to_an_ag2_agent_and_terminates(net: Net) -> None:
    ag2 = net.ag2
    bob = await ag2("agent", name="bob", token=TOKEN.format("bob"), replies=["done it"])
    alice = await ag2("human", name="alice", token=TOKEN.format("alice"))
    graph = {
        "initial_speaker": alice["agent_id"],
        "transitions": [
            {
                "when": {"name": "from_speaker", "args": {"agent_id": alice["agent_id"]}},
                "then": {"name": "agent", "args": {"agent_id": bob["agent_id"]}},
                "priority": 0,
            }
        ],
        "default_target": {"name": "terminate", "args": {"reason": "after_work"}},
        "max_turns": None,
    }
    opened = await ag2("open", who="alice", type="workflow", targets=["bob"], knobs={"graph": graph})
    assert opened["metadata"]["knobs"] == {"graph": graph}  # AG2 reads back what it sent
    await _opened(net, opened["channel_id"])
    await ag2("send", who="alice", channel_id=opened["channel_id"], text="please do it")

    async def handed_over_and_closed() -> bool:
        received = await ag2("received", who="alice")
        packets = [e for e in received if e["event_type"] == "ag2.packet"]
        assert len(packets) == 1, [e["event_type"] for e in received]
        packet = packets[0]
        assert packet["sender_id"] == bob["agent_id"] and packet["event_data"]["body"] == "done it"
        meta = await ag2("call", name="get_channel", args=[opened["channel_id"]])
        assert (meta["state"], meta["close_reason"]) == ("closed", "after_work")
        return True

    await assert_eventually(handed_over_and_closed, timeout=30)


async def test_an_ag2_agents_failed_turn_reaches_the_hub(net: Net) -> None:
    """AG2's handler reports a turn that raised (``report_turn_failure``): the gateway calls ReportTurnFailure,
    so the asker sees ``ag2.channel.turn_failed`` and the consulting channel closes with ``turn_failed``."""
    ag2 = net.ag2
    bob = await ag2("agent", name="bob", token=TOKEN.format("bob"), replies=[])  # no reply: its model raises
    await ag2("human", name="alice", token=TOKEN.format("alice"))
    opened = await ag2("open", who="alice", type="consulting", targets=["bob"])
    await _opened(net, opened["channel_id"])
    await ag2("send", who="alice", channel_id=opened["channel_id"], text="anyone?")

    async def told() -> bool:
        received = await ag2("received", who="alice")
        failures = [e for e in received if e["event_type"] == "ag2.channel.turn_failed"]
        assert len(failures) == 1, [e["event_type"] for e in received]
        failed = failures[0]
        assert failed["event_data"]["agent_id"] == bob["agent_id"]
        assert failed["event_data"]["error_class"] == "ag2.TurnFailure" and failed["event_data"]["action"] == "close"
        closed = [e["event_data"]["reason"] for e in received if e["event_type"] == "ag2.channel.closed"]
        assert closed == ["turn_failed"]
        return True

    await assert_eventually(told, timeout=30)
