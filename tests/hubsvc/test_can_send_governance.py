"""CanSend and Delivery.can_send answer as the post itself would: the arbiter and the depth limit count too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agentnet.v1 import hub_pb2

from hubsvc.governance.policy import Policy
from netkernel.errors import DepthExceeded, RuleDenied
from tests.hubsvc.arbiters import Desk
from tests.hubsvc.harness import UNSET_CAN_SEND, Participant, open_channel, register, running_hub
from tests.hubsvc.test_turn_hint import next_delivery

Q = "ag2.msg.text"


async def can_send(p: Participant, channel_id: str, **fields: Any) -> hub_pb2.CanSendResponse:
    response: hub_pb2.CanSendResponse = await p.rpc("CanSend", hub_pb2.CanSendRequest(channel_id=channel_id, **fields))
    return response


async def test_can_send_asks_the_arbiter(tmp_path: Path) -> None:
    desk = Desk()  # refuses posts of "secret.*" events
    async with running_hub(tmp_path / "hub.db", arbiter=desk) as hub:
        a, b = await register(hub.target, "a"), await register(hub.target, "b")
        for p in (a, b):
            await p.connect()
        channel_id = await open_channel(a, "conversation", [b])
        refused = await can_send(a, channel_id, event_type="secret.plan")
        assert not refused.allowed
        assert refused.refusal.reason == "RULE_DENIED" and refused.refusal.metadata["rule"] == "arbiter"
        assert "no secrets in channels" in refused.refusal.message
        with pytest.raises(RuleDenied):
            await a.post(channel_id, "secret.plan", {})
        assert (await can_send(a, channel_id, event_type=Q)).allowed
        for p in (a, b):
            await p.close()


@pytest.mark.clients_on_one_replica(UNSET_CAN_SEND)
async def test_can_send_checks_the_depth_the_reply_would_inherit(tmp_path: Path) -> None:
    rules = Policy.model_validate(
        {"rules": [{"id": "shallow", "match": {"names": ["b"]}, "rule": {"limits": {"max_depth": 1}}}]}
    )
    async with running_hub(tmp_path / "hub.db", policy=rules) as hub:
        a, b = await register(hub.target, "a"), await register(hub.target, "b")
        for p in (a, b):
            await p.connect()
        channel_id = await open_channel(a, "conversation", [b])
        deep = await a.say(channel_id, "two deep", depth=2)
        delivered = await next_delivery(b, Q)
        assert delivered.envelope.envelope_id == deep.envelope_id
        assert delivered.HasField("can_send") and delivered.can_send is False  # a reply to it is too deep for b
        answer = await can_send(b, channel_id, causation_id=deep.envelope_id)
        assert not answer.allowed
        assert answer.refusal.reason == "DEPTH_EXCEEDED" and answer.refusal.metadata["rule"] == "shallow"
        with pytest.raises(DepthExceeded):
            await b.say(channel_id, "reply", causation_id=deep.envelope_id)
        assert (await can_send(b, channel_id)).allowed  # a post answering nothing starts at depth 0
        shallow = await a.say(channel_id, "one deep", depth=1)
        assert (await next_delivery(b, Q)).can_send is True
        assert (await can_send(b, channel_id, causation_id=shallow.envelope_id)).allowed
        for p in (a, b):
            await p.close()
