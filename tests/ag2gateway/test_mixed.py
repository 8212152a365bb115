"""An AG2 agent and an agentsdk agent in one channel: each sees the other's turns in its own shapes."""

from __future__ import annotations

from agentsdk import Agent, ScriptedConfig
from agentsdk.network import Passport
from tests.ag2gateway.conftest import Net
from tests.ag2gateway.test_channels import TOKEN, _opened
from tests.eventually import assert_eventually


async def test_an_ag2_agent_and_an_agentsdk_agent_take_turns_in_one_discussion(net: Net) -> None:
    ag2 = net.ag2
    bob = await ag2("agent", name="bob", token=TOKEN.format("bob"), replies=["bob (ag2) says hi"])
    sdk = await net.hub.register(Agent("sdkbot", config=ScriptedConfig(["sdkbot says hi"])), Passport(name="sdkbot"))
    await ag2("human", name="alice", token=TOKEN.format("alice"))
    opened = await ag2("open", who="alice", type="discussion", targets=["bob", "sdkbot"])
    await _opened(net, opened["channel_id"])
    sent = await ag2("send", who="alice", channel_id=opened["channel_id"], text="introduce yourselves")

    async def both_answered() -> bool:
        texts = [e for e in await ag2("received", who="alice") if e["event_type"] == "ag2.msg.text"]
        assert [(e["sender_id"], e["event_data"]["text"]) for e in texts] == [
            (bob["agent_id"], "bob (ag2) says hi"),
            (sdk.agent_id, "sdkbot says hi"),
        ]
        assert texts[0]["causation_id"] == sent["envelope_id"]  # the AG2 id AG2 clients know
        return True

    await assert_eventually(both_answered, timeout=30)
    # The AG2 agent's answer, read back by the agentsdk side, is an ordinary hub envelope.
    wal = await sdk.read_wal(opened["channel_id"])
    bodies = [(e.sender_id, e.text) for e in wal if e.event_type == "ag2.msg.text"]
    assert bodies[1:] == [(bob["agent_id"], "bob (ag2) says hi"), (sdk.agent_id, "sdkbot says hi")]
