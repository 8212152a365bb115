"""An InvokeAgent the policy refuses never started: no execution is recorded for it."""

from __future__ import annotations

from pathlib import Path

import pytest
from agentnet.v1 import a2a_pb2, hub_pb2

from hubsvc.governance.policy import Policy
from netkernel.errors import LimitExceeded, RuleDenied
from tests.hubsvc.harness import register, running_hub


async def test_an_invoke_refused_by_a_rule_records_no_execution(tmp_path: Path) -> None:
    rules = Policy.model_validate(
        {
            "rules": [
                {"id": "desk", "match": {"names": ["clerk"]}, "rule": {"access": {"peers": {"names": ["helper-*"]}}}},
                {"id": "busy", "match": {"names": ["boss"]}, "rule": {"limits": {"max_open_channels": 0}}},
            ]
        }
    )
    async with running_hub(tmp_path / "hub.db", policy=rules) as hub:
        clerk, boss = await register(hub.target, "clerk"), await register(hub.target, "boss")
        stranger = await register(hub.target, "stranger")
        await stranger.rpc("SetA2ASettings", hub_pb2.SetA2ASettingsRequest(a2a=a2a_pb2.A2ASettings(enabled=True)))
        with pytest.raises(RuleDenied, match="does not let you call 'stranger'"):
            await clerk.rpc("InvokeAgent", hub_pb2.InvokeAgentRequest(agent_id=stranger.agent_id, message="hi"))
        with pytest.raises(LimitExceeded):
            await boss.rpc("InvokeAgent", hub_pb2.InvokeAgentRequest(agent_id=stranger.agent_id, message="hi"))
        for who in (clerk, boss, stranger):
            assert list((await who.rpc("ListExecutions", hub_pb2.ListExecutionsRequest())).executions) == []
