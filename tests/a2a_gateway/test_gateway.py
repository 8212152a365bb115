"""The released a2a-sdk client, unmodified, uses hub agents through the gateway."""

from __future__ import annotations

import asyncio

import pytest
from a2a.types import a2a_pb2 as a2a

from agentsdk import Agent, ScriptedConfig
from agentsdk.a2a import A2ASettings
from agentsdk.network import Passport
from tests.a2a_gateway.conftest import Net, collect, user_message
from tests.eventually import assert_eventually

ENABLED = A2ASettings(enabled=True, skills=["policy-lookup"], description="Looks up insurance policies")


async def test_the_card_describes_the_agent_and_the_listing_lists_the_visible_ones(net: Net) -> None:
    await net.hub.register(Agent("policy", config=ScriptedConfig([])), Passport(name="policy"), a2a=ENABLED)
    await net.hub.register(
        Agent("hidden", config=ScriptedConfig([])), Passport(name="hidden", project="other"), a2a=ENABLED
    )
    card = await net.card("policy")
    assert card.name == "policy" and card.description == "Looks up insurance policies"
    assert [s.id for s in card.skills] == ["policy-lookup"]
    assert {(i.protocol_binding, i.tenant) for i in card.supported_interfaces} == {
        ("JSONRPC", "policy"),
        ("GRPC", "policy"),
    }
    assert card.security_schemes["hubCredential"].http_auth_security_scheme.scheme == "bearer"
    assert card.capabilities.streaming
    import httpx

    async with httpx.AsyncClient() as http:
        listing = (await http.get(f"{net.gateway.url}/agents", headers={"Authorization": f"Bearer {net.token}"})).json()
        assert [c["name"] for c in listing["agents"]] == ["policy"]  # not "hidden": another project
        hidden = await http.get(
            f"{net.gateway.url}/agents/hidden/.well-known/agent-card.json",
            headers={"Authorization": f"Bearer {net.token}"},
        )
        assert hidden.status_code == 404
        anonymous = await http.get(f"{net.gateway.url}/agents")
        assert anonymous.status_code == 401 and "Bearer" in anonymous.json()["error"]["message"]


async def test_a_blocking_send_completes_with_the_answer(net: Net, binding: str) -> None:
    def answer(messages: list[dict[str, str]], _tools: object) -> str:
        return "covered: " + str(messages[-1]["content"]).split()[-1]

    await net.hub.register(
        Agent("policy", config=ScriptedConfig([answer])), Passport(name="policy"), a2a=ENABLED
    )
    client = await net.client("policy", binding)
    [response] = await collect(client, a2a.SendMessageRequest(message=user_message("Look up POL-123")))
    task = response.task
    assert task.status.state == a2a.TASK_STATE_COMPLETED
    assert [p.text for a in task.artifacts for p in a.parts] == ["covered: POL-123"]
    assert task.id and task.context_id
    got = await client.get_task(a2a.GetTaskRequest(id=task.id))
    assert got.status.state == a2a.TASK_STATE_COMPLETED and got.artifacts[0].parts[0].text == "covered: POL-123"
