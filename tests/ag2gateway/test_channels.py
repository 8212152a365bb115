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
    assert (initiator["role"], respondent["role"], respondent["agent_id"]) == ("initiator", "respondent", bob["agent_id"])

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
