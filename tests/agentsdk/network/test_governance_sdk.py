"""The SDK's side of governance: own rules at registration, and registering on a closed hub."""

from __future__ import annotations

import json

import pytest

from agentsdk import Agent
from agentsdk.config import OpenAIConfig
from agentsdk.errors import LimitExceeded, RuleDenied, Unauthenticated
from agentsdk.network import Hub, HubClient, Passport
from agentsdk.operator import OperatorClient
from hubsvc.governance.policy import Policy

UNUSED_MODEL = OpenAIConfig(model="unused", base_url="http://127.0.0.1:9/v1", api_key="unused")
"""The agents here never take a turn."""


async def test_register_and_register_human_send_their_own_rule_and_the_hub_enforces_it() -> None:
    async with Hub.open() as hub:
        await hub.register_human(Passport(name="peer", kind="human"))
        human = await hub.register_human(
            Passport(name="kiosk", kind="human"), rule={"access": {"channel_types": ["consulting"]}}
        )
        agent = await hub.register(
            Agent("lonely", config=UNUSED_MODEL), Passport(name="lonely"), rule={"limits": {"max_open_channels": 0}}
        )
        record = hub.core.registry.get(human.agent_id).record
        assert json.loads(record.rule_json) == {"access": {"channel_types": ["consulting"]}}
        await human.open(type="consulting", target="peer")
        with pytest.raises(RuleDenied, match="rule 'own' does not let you open a 'conversation' channel"):
            await human.open(type="conversation", target="peer")
        with pytest.raises(LimitExceeded, match="rule 'own' allows you at most 0 open channels"):
            await agent.open(type="consulting", target="peer")


async def test_a_closed_hub_registers_only_with_the_registration_token() -> None:
    async with Hub.open(policy=Policy.model_validate({"registration": {"open": False}})) as hub:
        with pytest.raises(Unauthenticated, match="registration on this hub is closed"):
            await hub.register_human(Passport(name="walk-in", kind="human"))
        async with HubClient.connect(hub.target, registration_token=hub.operator_token) as hc:
            staff = await hc.register_human(Passport(name="staff", kind="human"))
            assert staff.agent_id


async def test_rules_change_after_registration_by_the_agent_or_the_operator() -> None:
    async with Hub.open() as hub:
        await hub.register_human(Passport(name="peer", kind="human"))
        agent = await hub.register(Agent("worker", config=UNUSED_MODEL), Passport(name="worker"))
        assert await agent.get_rule() is None
        await agent.set_rule({"access": {"channel_types": ["consulting"]}})  # AG2's agent.set_rule
        assert await agent.get_rule() == {"access": {"channel_types": ["consulting"]}}
        with pytest.raises(RuleDenied, match="rule 'own'"):
            await agent.open(type="conversation", target="peer")
        async with OperatorClient(hub.target, hub.operator_token) as operator:
            await operator.set_rule(agent.agent_id, {"limits": {"max_open_channels": 0}})
            read = await operator.get_rule(agent.agent_id)
            assert [r.id for r in read.rules] == ["default", "own"]
        with pytest.raises(LimitExceeded, match="rule 'own' allows you at most 0 open channels"):
            await agent.open(type="consulting", target="peer")
        effective = await agent.effective_rule()
        assert effective["limits"] == {"max_open_channels": {"value": 0, "rule": "own"}}
        assert effective["rules"][-1] == {"id": "own", "rule": {"limits": {"max_open_channels": 0}}}
        await agent.set_rule(None)
        await agent.open(type="consulting", target="peer")


async def test_an_agent_restricts_who_may_reach_it_with_inbound_from() -> None:
    async with Hub.open() as hub:
        await hub.register(
            Agent("vip", config=UNUSED_MODEL),
            Passport(name="vip"),
            rule={"access": {"inbound_from": {"names": ["assistant-*"]}}},
        )
        stranger = await hub.register_human(Passport(name="stranger", kind="human"))
        assistant = await hub.register_human(Passport(name="assistant-1", kind="human"))
        with pytest.raises(RuleDenied, match="'vip' does not accept invitations from you") as refused:
            await stranger.open(type="consulting", target="vip")
        assert refused.value.metadata["check"] == "access.inbound_from"
        await assistant.open(type="consulting", target="vip")
