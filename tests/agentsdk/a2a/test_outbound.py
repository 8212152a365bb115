"""Outbound A2A: hub agents call an outside A2A agent — the released a2a-sdk's server (its request
handler, JSON-RPC Starlette routes on uvicorn and gRPC servicer) on loopback — through the same
``client.a2a.invoke_agent`` and LLM tools as hub agents, over both transports."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentsdk import Agent, ScriptedConfig
from agentsdk.a2a import A2ASettings, AgentToAgent
from agentsdk.errors import FailedPrecondition, InvalidArgument, PayloadTooLarge, PermissionDenied, Unavailable
from agentsdk.events import ToolCall
from agentsdk.network import AgentClient, Hub, Passport
from hubsvc.core.options import HubOptions
from tests.agentsdk.a2a.remote_agent import RemoteAgent, serve_remote_agent

LOOPBACK = HubOptions(a2a_outbound_allow=("127.0.0.1",))


@pytest.fixture(params=["JSONRPC", "GRPC"])
async def remote(request: pytest.FixtureRequest) -> AsyncIterator[RemoteAgent]:
    async with serve_remote_agent(request.param) as agent:
        yield agent


@pytest.fixture
async def hub() -> AsyncIterator[Hub]:
    async with Hub.open(options=LOOPBACK) as h:
        yield h


async def caller_of(hub: Hub, name: str = "router", project: str = "claims") -> AgentClient:
    client = await hub.register(
        Agent(name, config=ScriptedConfig([])), Passport(name=name, project=project), a2a=A2ASettings(enabled=True)
    )
    return client


def a2a_of(client: AgentClient) -> AgentToAgent:
    assert client.a2a is not None
    return client.a2a


async def test_registered_remote_agent_is_discovered_and_answers(hub: Hub, remote: RemoteAgent) -> None:
    router = await caller_of(hub)
    registered = await hub.register_remote_a2a_agent(remote.card_url, Passport(name="outside", project="claims"))
    assert registered.skills == ("policy-lookup",)
    assert registered.description == "Looks up insurance policies (outside the hub)"
    assert registered.protocol_binding == remote.transport

    found = await a2a_of(router).discover_agents(skills=["policy-lookup"])
    assert [a.name for a in found] == ["outside"]
    stranger = await caller_of(hub, "stranger", project="other")
    assert await a2a_of(stranger).discover_agents(skills=["policy-lookup"]) == []  # the usual project scope
    with pytest.raises(PermissionDenied):
        await a2a_of(stranger).invoke_agent(registered.agent_id, "hi")
    assert found[0].description == "Looks up insurance policies (outside the hub)"

    resp = await a2a_of(router).invoke_agent(found[0].agent_id, "Look up POL-123", skill="policy-lookup")
    assert (resp.status, resp.result, resp.error) == ("completed", "echo: Look up POL-123", "")

    tree = await a2a_of(router).list_executions(resp.root_session_id)
    assert [(e.caller_id, e.target_id, e.status) for e in tree] == [(router.agent_id, registered.agent_id, "completed")]


async def test_card_preference_picks_the_transport(hub: Hub) -> None:
    for transport in ("JSONRPC", "GRPC"):
        async with serve_remote_agent(transport) as remote:
            registered = await hub.register_remote_a2a_agent(remote.card_url, Passport(name=f"o-{transport}"))
            assert registered.protocol_binding == transport
            router = await caller_of(hub, f"r-{transport}", project="")
            resp = await a2a_of(router).invoke_agent(registered.agent_id, "hi")
            assert resp.result == "echo: hi"
            if transport == "GRPC":
                assert remote.http_requests == ["/.well-known/agent-card.json"]  # the call went over gRPC
            else:
                assert remote.http_requests == ["/.well-known/agent-card.json", "/a2a"]


async def test_custom_headers_travel_as_message_metadata(hub: Hub, remote: RemoteAgent) -> None:
    router = await caller_of(hub)
    registered = await hub.register_remote_a2a_agent(remote.card_url, Passport(name="outside", project="claims"))
    resp = await a2a_of(router).invoke_agent(
        registered.agent_id, "headers", skill="policy-lookup", custom_headers={"x-tenant": "acme"}
    )
    assert resp.status == "completed"
    assert json.loads(resp.result) == {"message": {"x-tenant": "acme"}, "request": {"skill": "policy-lookup"}}


async def test_input_required_round_trip_continues_the_remote_task(hub: Hub, remote: RemoteAgent) -> None:
    router = await caller_of(hub)
    registered = await hub.register_remote_a2a_agent(remote.card_url, Passport(name="outside", project="claims"))
    a2a = a2a_of(router)
    first = await a2a.invoke_agent(registered.agent_id, "ask about my policy")
    assert (first.status, first.result) == ("input-required", "which policy?")

    second = await a2a.invoke_agent(registered.agent_id, "POL-123", root_session_id=first.root_session_id)
    assert (second.status, second.result) == ("completed", "got: POL-123")
    sent = remote.executor.messages
    assert len(sent) == 2 and sent[1].task_id == sent[0].task_id != ""

    tree = await a2a.list_executions(first.root_session_id)
    assert [e.status for e in tree] == ["input-required", "completed"]


async def test_remote_failure_is_a_failed_call(hub: Hub, remote: RemoteAgent) -> None:
    router = await caller_of(hub)
    registered = await hub.register_remote_a2a_agent(remote.card_url, Passport(name="outside", project="claims"))
    resp = await a2a_of(router).invoke_agent(registered.agent_id, "fail please")
    assert resp.status == "failed"
    assert resp.error == "the remote task ended failed: the remote broke"
    tree = await a2a_of(router).list_executions(resp.root_session_id)
    assert tree[0].status == "failed" and tree[0].error == resp.error


async def test_remote_that_does_not_answer_in_time_fails_the_call(hub: Hub, remote: RemoteAgent) -> None:
    router = await caller_of(hub)
    registered = await hub.register_remote_a2a_agent(remote.card_url, Passport(name="outside", project="claims"))
    resp = await a2a_of(router).invoke_agent(registered.agent_id, "slow", timeout=0.5)
    assert resp.status == "failed"
    assert resp.error.endswith("did not answer within 0.5s")


async def test_answer_over_the_byte_limit_fails_the_call(remote: RemoteAgent) -> None:
    options = HubOptions(a2a_outbound_allow=("127.0.0.1",), a2a_outbound_max_bytes=50_000)
    async with Hub.open(options=options) as hub:
        router = await caller_of(hub)
        registered = await hub.register_remote_a2a_agent(remote.card_url, Passport(name="outside", project="claims"))
        resp = await a2a_of(router).invoke_agent(registered.agent_id, "big")
        assert resp.status == "failed"
        assert resp.error.endswith(
            "answered too much: the answer is larger than 50000 bytes (the hub's --a2a-outbound-max-bytes)"
        )


async def test_card_over_the_byte_limit_is_refused(remote: RemoteAgent) -> None:
    options = HubOptions(a2a_outbound_allow=("127.0.0.1",), a2a_outbound_max_bytes=100)
    async with Hub.open(options=options) as hub:
        with pytest.raises(PayloadTooLarge, match="larger than 100 bytes"):
            await hub.register_remote_a2a_agent(remote.card_url, Passport(name="outside"))


async def test_invoke_by_url(hub: Hub, remote: RemoteAgent) -> None:
    router = await caller_of(hub)
    # Ad-hoc: no identity registered for it; the base URL names the card at the well-known path.
    resp = await a2a_of(router).invoke_agent(remote.base_url, "hello there", skill="policy-lookup")
    assert (resp.status, resp.result) == ("completed", "echo: hello there")
    tree = await a2a_of(router).list_executions(resp.root_session_id)
    assert tree[0].target_id == remote.card_url

    with pytest.raises(InvalidArgument, match="does not offer skill 'cooking'"):
        await a2a_of(router).invoke_agent(remote.card_url, "hi", skill="cooking")

    # Registered: the URL resolves to the identity, whose visibility rules apply.
    registered = await hub.register_remote_a2a_agent(
        remote.card_url, Passport(name="outside", project="claims"), a2a=A2ASettings(allowed_callers=["ops"])
    )
    assert registered.agent_id
    with pytest.raises(PermissionDenied, match="does not accept A2A calls from you"):
        await a2a_of(router).invoke_agent(remote.card_url, "hi")


async def test_destination_not_allowed_is_refused_and_nothing_is_sent(remote: RemoteAgent) -> None:
    async with Hub.open(options=HubOptions(a2a_outbound_allow=("agents.example.com",))) as hub:
        router = await caller_of(hub)
        with pytest.raises(PermissionDenied, match="--a2a-outbound-allow"):
            await a2a_of(router).invoke_agent(remote.card_url, "hi")
        with pytest.raises(PermissionDenied, match="--a2a-outbound-allow"):
            await hub.register_remote_a2a_agent(remote.card_url, Passport(name="outside"))
        assert await a2a_of(router).list_executions() == []
    async with Hub.open() as hub:  # the default: no outbound calls at all
        router = await caller_of(hub)
        with pytest.raises(FailedPrecondition, match=r"outbound A2A calls are off.*--a2a-outbound-allow"):
            await a2a_of(router).invoke_agent(remote.base_url, "hi")
        with pytest.raises(FailedPrecondition, match="--a2a-outbound-allow"):
            await hub.register_remote_a2a_agent(remote.card_url, Passport(name="outside"))
    assert remote.http_requests == [] and remote.executor.messages == []


async def test_port_patterns(remote: RemoteAgent) -> None:
    port = remote.base_url.rsplit(":", 1)[1]
    async with Hub.open(options=HubOptions(a2a_outbound_allow=(f"127.0.0.1:{int(port) + 1}",))) as hub:
        router = await caller_of(hub)
        with pytest.raises(PermissionDenied, match=f"127.0.0.1:{port}"):
            await a2a_of(router).invoke_agent(remote.card_url, "hi")
    assert remote.http_requests == []


async def test_card_naming_a_destination_not_allowed_is_refused(remote: RemoteAgent) -> None:
    """The card's interface must be allowed too (a card may point anywhere): allowing only the HTTP
    port lets the hub read the card, but not call the gRPC port a gRPC-first card names."""
    port = remote.base_url.rsplit(":", 1)[1]
    async with Hub.open(options=HubOptions(a2a_outbound_allow=(f"127.0.0.1:{port}",))) as hub:
        if remote.transport == "GRPC":
            with pytest.raises(PermissionDenied, match=r"the card.s interface 127\.0\.0\.1:"):
                await hub.register_remote_a2a_agent(remote.card_url, Passport(name="outside"))
            router = await caller_of(hub)
            with pytest.raises(PermissionDenied, match=r"the card.s interface 127\.0\.0\.1:"):
                await a2a_of(router).invoke_agent(remote.card_url, "hi")
            assert remote.executor.messages == []
        else:
            registered = await hub.register_remote_a2a_agent(remote.card_url, Passport(name="outside"))
            assert registered.protocol_binding == "JSONRPC"


async def test_refresh_rereads_the_card(hub: Hub, remote: RemoteAgent) -> None:
    registered = await hub.register_remote_a2a_agent(remote.card_url)
    assert registered.name == "outside-policy"  # from the card
    refreshed = await hub.refresh_remote_a2a_agent(registered)
    assert refreshed == registered
    assert remote.http_requests.count("/.well-known/agent-card.json") == 2


async def test_llm_tools_call_the_outside_agent(hub: Hub, remote: RemoteAgent) -> None:
    """An agent whose scripted model discovers and calls the outside agent with the A2A tools."""

    def router_model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        results = [m["content"] for m in messages if m["role"] == "tool"]
        if not results:
            return ToolCall.create("discover_available_agents")
        if len(results) == 1:
            target = json.loads(results[0])[0]["agent_id"]
            return ToolCall.create("invoke_a2a_agent", {"agent_id": target, "message": "POL-9?"})
        return "Outside agent said: " + json.loads(results[1])["result"]

    router = await hub.register(
        Agent("router", config=ScriptedConfig([router_model, router_model, router_model])),
        Passport(name="router"),
        a2a=A2ASettings(enabled=True),
    )
    await hub.register_remote_a2a_agent(remote.card_url, Passport(name="outside"))
    alice = await hub.register_human(Passport(name="alice", kind="human"))
    async with AgentToAgent(hub.target, alice.credential) as a2a:
        resp = await a2a.invoke_agent(router.agent_id, "Is POL-9 valid?")
        assert (resp.status, resp.result) == ("completed", "Outside agent said: echo: POL-9?")
        tree = await a2a.list_executions(resp.root_session_id)
    names = [(hub.name_for(e.caller_id), hub.name_for(e.target_id), e.status) for e in tree]
    assert names == [("alice", "router", "completed"), ("router", "outside", "completed")]
    assert tree[1].parent_execution_id == tree[0].execution_id


async def test_unreachable_outside_agents(hub: Hub) -> None:
    """A card that cannot be read is refused (UNAVAILABLE, nothing recorded); a registered agent that
    went away fails the call."""
    router = await caller_of(hub)
    async with serve_remote_agent("JSONRPC") as remote:
        registered = await hub.register_remote_a2a_agent(remote.card_url, Passport(name="outside", project="claims"))
        base = remote.base_url
    with pytest.raises(Unavailable, match="could not fetch the Agent Card"):
        await a2a_of(router).invoke_agent(base + "/elsewhere", "hi")
    assert await a2a_of(router).list_executions() == []
    resp = await a2a_of(router).invoke_agent(registered.agent_id, "hi")
    assert resp.status == "failed"
    assert resp.error.startswith(f"the A2A agent 'outside-policy' at {base}/a2a failed: ")
