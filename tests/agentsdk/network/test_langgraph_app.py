"""agentsdk.langgraph.App over a real hub: the specification's LangGraph agent (A2A tools bound beside
the app's own tools, ToolNode, checkpointer) with the real ChatOpenAI against a local
OpenAI-compatible server; A2A disabled; deterministic routing through ``app._runtime.a2a``;
channel messages."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langchain_openai import ChatOpenAI
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from agentsdk import Agent, ScriptedConfig
from agentsdk.a2a import A2ASettings, AgentToAgent
from agentsdk.events import ToolCall
from agentsdk.langgraph import App
from agentsdk.network import EV_TEXT, Hub, Passport
from agentsdk.testing import ScriptedOpenAIServer

POLICY_A2A = A2ASettings(enabled=True, skills=["policy-lookup"], description="Looks up insurance policies")


@pytest.fixture
async def hub() -> AsyncIterator[Hub]:
    async with Hub.open() as h:
        await h.register(
            Agent("policy", config=ScriptedConfig(["POL-123 covers water damage."] * 3)),
            Passport(name="policy"),
            a2a=POLICY_A2A,
        )
        yield h


def agent_yaml(tmp_path: Path, enabled: bool) -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(f"a2a:\n  enabled: {str(enabled).lower()}\n  description: Routes claim questions\n")
    return path


def router_model(request: dict[str, Any]) -> Any:
    """The router's model: discover the policy agent, invoke it, answer with its result."""
    results = [m["content"] for m in request["messages"] if m["role"] == "tool"]
    if not results:
        return ToolCall.create("discover_available_agents")
    if len(results) == 1:
        policy = json.loads(results[0])[0]["agent_id"]
        return ToolCall.create("invoke_a2a_agent", {"agent_id": policy, "message": "Does POL-123 cover water damage?"})
    return "Policy agent: " + json.loads(results[1])["result"]


def spec_app(hub: Hub, yaml_path: Path, model_server: ScriptedOpenAIServer) -> App:
    """The specification's example with the import changed and StateGraph filled in."""
    app = App(app_name="router-agent", hub=hub.target, agent_yaml=yaml_path)

    @app.tool
    def claim_status(claim_id: str) -> str:
        """The status of a claim.

        Args:
            claim_id: The claim number.
        """
        return f"{claim_id}: open"

    @app.entrypoint
    def build_agent() -> Any:
        llm = app.llm(ChatOpenAI(model="gpt-5.4", base_url=model_server.base_url, api_key="none"))
        a2a = app.a2a_tools()
        llm_with_tools = llm.bind_tools(app.get_tool_schemas() + a2a)
        tool_node = ToolNode(app.get_tools() + a2a)

        async def call_model(state: MessagesState) -> dict[str, Any]:
            return {"messages": [await llm_with_tools.ainvoke(state["messages"])]}

        graph = StateGraph(MessagesState)
        graph.add_node("model", call_model)
        graph.add_node("tools", tool_node)
        graph.add_edge(START, "model")
        graph.add_conditional_edges("model", tools_condition)
        graph.add_edge("tools", "model")
        return graph.compile(checkpointer=app.checkpointer())

    return app


async def test_the_spec_example_routes_to_another_agent_through_the_a2a_tools(hub: Hub, tmp_path: Path) -> None:
    with ScriptedOpenAIServer(rule=router_model) as model_server:
        app = spec_app(hub, agent_yaml(tmp_path, True), model_server)
        async with app:
            router_id = app.runtime.agent_id
            alice = await hub.register_human(Passport(name="alice", kind="human"))
            async with AgentToAgent(hub.target, alice.credential) as a2a:
                assert "router-agent" in [a.name for a in await a2a.discover_agents(limit=10)]
                resp = await a2a.invoke_agent(router_id, "Is water damage covered by POL-123?")
                assert (resp.status, resp.result) == ("completed", "Policy agent: POL-123 covers water damage.")
                tree = await a2a.list_executions(resp.root_session_id)
        # The router's call to policy is a child of alice's call (the dispatch is current inside the graph).
        policy_id = hub.id_for("policy")
        assert [(e.target_id, e.parent_execution_id) for e in tree] == [(router_id, ""), (policy_id, resp.execution_id)]
        tools = {t["function"]["name"] for t in model_server.requests[0]["tools"]}
        assert tools == {"claim_status", "discover_available_agents", "invoke_a2a_agent"}


@pytest.mark.parametrize("write_yaml", [False, True], ids=["no agent.yaml", "a2a.enabled false"])
async def test_a2a_disabled_gives_no_a2a_tools_and_no_client(hub: Hub, tmp_path: Path, write_yaml: bool) -> None:
    yaml_path = agent_yaml(tmp_path, False) if write_yaml else tmp_path / "absent.yaml"
    seen: dict[str, Any] = {}
    app = App(app_name="plain", hub=hub.target, agent_yaml=yaml_path)

    @app.entrypoint
    def build() -> Any:
        seen["tools"] = app.a2a_tools()
        seen["a2a"] = app._runtime.a2a
        graph = StateGraph(MessagesState)
        graph.add_node("answer", lambda state: {"messages": [AIMessage("ok")]})
        graph.add_edge(START, "answer")
        return graph.compile()

    async with app:
        assert seen == {"tools": [], "a2a": None} and app.runtime.a2a is None
        humans_view = await hub.list_agents()
        assert "plain" in [a.name for a in humans_view]


async def test_a2a_tools_and_runtime_before_start_say_to_use_the_entrypoint(tmp_path: Path) -> None:
    app = App(app_name="early", agent_yaml=agent_yaml(tmp_path, True))
    with pytest.raises(RuntimeError, match=r"inside the @app\.entrypoint"):
        app.a2a_tools()
    with pytest.raises(RuntimeError, match=r"inside the @app\.entrypoint"):
        _ = app._runtime.a2a
    with pytest.raises(RuntimeError, match="no entrypoint"):
        await app.start()


async def test_deterministic_routing_through_runtime_a2a(hub: Hub, tmp_path: Path) -> None:
    app = App(app_name="router-agent", hub=hub.target, agent_yaml=agent_yaml(tmp_path, True))

    @app.entrypoint
    def build() -> Any:
        async def route(state: MessagesState) -> dict[str, Any]:
            agents = await app._runtime.a2a.discover_agents(skills=["policy-lookup"], limit=10)
            resp = await app._runtime.a2a.invoke_agent(
                agent_id=agents[0].agent_id, message=state["messages"][-1].content, skill="policy-lookup", timeout=120
            )
            answer = resp.result if resp.status == "completed" else f"failed: {resp.error}"
            return {"messages": [AIMessage(answer)]}

        graph = StateGraph(MessagesState)
        graph.add_node("route", route)
        graph.add_edge(START, "route")
        return graph.compile(checkpointer=app.checkpointer())

    async with app:
        alice = await hub.register_human(Passport(name="alice", kind="human"))
        async with AgentToAgent(hub.target, alice.credential) as a2a:
            resp = await a2a.invoke_agent(app.runtime.agent_id, "Does POL-123 cover water damage?")
    assert (resp.status, resp.result) == ("completed", "POL-123 covers water damage.")


async def test_a_channel_message_is_answered_by_the_graph_and_a_failing_graph_fails_the_a2a_call(
    hub: Hub, tmp_path: Path
) -> None:
    app = App(app_name="echo", hub=hub.target, agent_yaml=agent_yaml(tmp_path, True))

    @app.entrypoint
    async def build() -> Any:
        def echo(state: MessagesState) -> dict[str, Any]:
            text = state["messages"][-1].content
            if text == "boom":
                raise ValueError("cannot answer boom")
            return {"messages": [AIMessage(f"{len(state['messages'])}: {text}")]}

        graph = StateGraph(MessagesState)
        graph.add_node("echo", echo)
        graph.add_edge(START, "echo")
        return graph.compile(checkpointer=app.checkpointer())

    async with app:
        alice = await hub.register_human(Passport(name="alice", kind="human"))
        channel = await alice.open(type="consulting", target="echo", message="hello")
        answer = await alice.next_envelope(
            predicate=lambda e: e.event_type == EV_TEXT and e.sender_id != alice.agent_id, timeout=30
        )
        assert (answer.channel_id, answer.text) == (channel.channel_id, "1: hello")
        async with AgentToAgent(hub.target, alice.credential) as a2a:
            resp = await a2a.invoke_agent(app.runtime.agent_id, "boom")
    assert resp.status == "failed" and "ValueError: cannot answer boom" in resp.error


async def test_a_restarted_app_with_a_credential_file_is_the_same_identity(hub: Hub, tmp_path: Path) -> None:
    def make() -> App:
        app = App(
            app_name="keeper",
            hub=hub.target,
            agent_yaml=agent_yaml(tmp_path, True),
            credential_file=tmp_path / "keeper.cred",
        )

        @app.entrypoint
        def build() -> Any:
            graph = StateGraph(MessagesState)
            graph.add_node("answer", lambda state: {"messages": [AIMessage("still here")]})
            graph.add_edge(START, "answer")
            return graph.compile(checkpointer=app.checkpointer())

        return app

    async with make() as first:
        first_id = first.runtime.agent_id
    async with make() as second:
        assert second.runtime.agent_id == first_id and second.runtime.a2a is not None
        alice = await hub.register_human(Passport(name="alice", kind="human"))
        async with AgentToAgent(hub.target, alice.credential) as a2a:
            resp = await a2a.invoke_agent(first_id, "are you there?")
    assert (resp.status, resp.result) == ("completed", "still here")
