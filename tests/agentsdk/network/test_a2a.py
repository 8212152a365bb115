"""A2A from the Python SDK over a real hub: ``client.a2a`` (``runtime.a2a`` in the A2A specification), the LLM
tools, custom headers, input-required, failures, call-token refresh and execution trees. LLM
agents use the real openai client against a local OpenAI-compatible server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.utils.function_calling import convert_to_openai_tool

from agentsdk import Agent, ScriptedConfig, tool
from agentsdk.a2a import (
    A2ASettings,
    AgentResponse,
    AgentToAgent,
    get_current_custom_headers,
    to_langchain_tools,
)
from agentsdk.errors import InvalidArgument
from agentsdk.events import ToolCall
from agentsdk.network import AgentClient, Hub, Passport
from agentsdk.testing import ScriptedOpenAIServer
from hubsvc.core.options import HubOptions
from tests.agentsdk.network.llm import llm
from tests.clock import FakeClock
from tests.eventually import assert_eventually

ENABLED = A2ASettings(enabled=True)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def hub(clock: FakeClock) -> AsyncIterator[Hub]:
    async with Hub.open(clock=clock, options=HubOptions(a2a_token_ttl=300)) as h:
        yield h


async def register(
    hub: Hub, servers: list[ScriptedOpenAIServer], name: str, *replies: Any, tools: Any = (), **settings: Any
) -> tuple[AgentClient, ScriptedOpenAIServer]:
    server, config = llm(servers, *replies)
    agent = Agent(name, prompt=f"You are {name}.", config=config, tools=list(tools))
    client = await hub.register(agent, Passport(name=name, project="acme"), a2a=A2ASettings(**settings))
    return client, server


def tool_results(request: dict[str, Any]) -> list[Any]:
    return [json.loads(m["content"]) for m in request["messages"] if m["role"] == "tool"]


@tool
def tenant() -> str:
    """The tenant of the agent that called you."""
    return get_current_custom_headers().get("x-tenant", "none")


async def test_the_seed_direct_client_example(hub: Hub, servers: list[ScriptedOpenAIServer]) -> None:
    caller, _ = await register(hub, servers, "router", enabled=True, skills=["policy-lookup"])
    policy, policy_llm = await register(
        hub,
        servers,
        "policy",
        "POL-123 covers water damage.",
        enabled=True,
        skills=["policy-lookup"],
        description="Policy lookups",
    )
    await register(hub, servers, "hidden", skills=["policy-lookup"])  # A2A disabled

    a2a = caller.a2a
    assert a2a is not None and caller.agent.a2a is a2a
    agents = await a2a.discover_agents(skills=["policy-lookup"], limit=10)
    # The raw client may list the caller itself; the hidden agent never appears.
    assert [a.name for a in agents] == ["policy", "router"]
    assert agents[0].description == "Policy lookups" and agents[0].skills == ("policy-lookup",)
    resp = await a2a.invoke_agent(
        agent_id=agents[0].agent_id, message="Look up policy POL-123", skill="policy-lookup", timeout=120
    )
    assert isinstance(resp, AgentResponse)
    assert (resp.status, resp.result, resp.error) == ("completed", "POL-123 covers water damage.", "")
    assert policy_llm.requests[0]["messages"][-1] == {"role": "user", "content": "Look up policy POL-123"}
    tools = {t["function"]["name"] for t in policy_llm.requests[0]["tools"]}
    assert "request_input" in tools  # offered only while answering an A2A call
    [execution] = await a2a.list_executions(resp.root_session_id)
    assert (execution.caller_id, execution.target_id, execution.status) == (
        caller.agent_id,
        policy.agent_id,
        "completed",
    )
    assert execution.started_at is not None and execution.ended_at is not None


async def test_an_llm_routes_with_the_a2a_tools_and_headers_reach_the_callee(
    hub: Hub, servers: list[ScriptedOpenAIServer]
) -> None:
    billing, billing_llm = await register(
        hub,
        servers,
        "billing",
        ToolCall("t1", "tenant", {}),
        "Charged acme's customer.",
        tools=[tenant],
        enabled=True,
        skills=["payments"],
    )

    def route(request: dict[str, Any]) -> Any:
        results = tool_results(request)
        if not results:
            return ToolCall("d1", "discover_available_agents", {})
        if len(results) == 1:
            [target] = [a for a in results[0] if a["name"] == "billing"]
            headers = json.dumps({"x-tenant": "acme"})
            arguments = {"agent_id": target["agent_id"], "message": "Charge the customer", "custom_headers": headers}
            return ToolCall("i1", "invoke_a2a_agent", arguments)
        return f"billing said: {results[1]['result']}"

    router_llm, config = llm(servers, rule=route)
    router = Agent("router", config=config)
    router_client = await hub.register(router, Passport(name="router", project="acme"), a2a=ENABLED)
    user = await hub.register_human(Passport(name="user", kind="human", project="acme"))
    channel = await user.open(type="consulting", target="router")
    await user.send(channel.channel_id, "Please charge the customer.")
    answer = await user.next_envelope(predicate=lambda e: e.event_type == "ag2.msg.text", timeout=30)

    assert answer.text == "billing said: Charged acme's customer."
    discovered = tool_results(router_llm.requests[1])[0]
    assert [a["name"] for a in discovered] == ["billing"]  # the router itself is filtered out
    assert set(discovered[0]) == {"agent_id", "name", "description", "skills", "capabilities", "input_modes"}
    invoked = tool_results(router_llm.requests[2])[1]
    assert invoked["status"] == "completed" and invoked["error"] == ""
    # The callee read the forwarded header inside its turn.
    assert [m["content"] for m in billing_llm.requests[1]["messages"] if m["role"] == "tool"] == ["acme"]
    assert get_current_custom_headers() == {}
    assert router.a2a_tools() == router_client.a2a_tools()
    assert {t.name for t in router.a2a_tools()} <= {t.name for t in router.tools}
    del billing


async def test_a2a_is_none_and_tools_are_empty_when_disabled_and_tools_report_unavailability(
    hub: Hub, servers: list[ScriptedOpenAIServer]
) -> None:
    off, _ = await register(hub, servers, "off")
    assert off.a2a is None and off.agent.a2a is None
    assert off.a2a_tools() == [] and off.agent.a2a_tools() == []
    assert Agent("unregistered", config=ScriptedConfig([])).a2a_tools() == []
    assert not {"discover_available_agents", "invoke_a2a_agent"} & {t.name for t in off.agent.tools}

    on, _ = await register(hub, servers, "on", enabled=True)
    discover, invoke = on.a2a_tools()
    assert (discover.name, invoke.name) == ("discover_available_agents", "invoke_a2a_agent")
    await on.disconnect()
    assert on.a2a is None
    for t, args in ((discover, {}), (invoke, {"agent_id": "x", "message": "hi"})):
        output = await t.invoke(args)
        assert json.loads(output.content)["error"]["reason"] == "UNAVAILABLE"


async def test_the_invoke_tool_returns_structured_errors_instead_of_raising(
    hub: Hub, servers: list[ScriptedOpenAIServer]
) -> None:
    caller, _ = await register(hub, servers, "caller", enabled=True)
    target, _ = await register(hub, servers, "target", enabled=True)
    _, invoke = caller.a2a_tools()
    cases = {
        "{not json": "INVALID_ARGUMENT",
        '["a", "list"]': "INVALID_ARGUMENT",
        '{"x-n": 1}': "INVALID_ARGUMENT",
        '{"A2A-Token": "forged"}': "INVALID_ARGUMENT",
    }
    for headers, reason in cases.items():
        output = await invoke.invoke({"agent_id": target.agent_id, "message": "hi", "custom_headers": headers})
        assert json.loads(output.content)["error"]["reason"] == reason, headers
    refused = await invoke.invoke({"agent_id": "nobody", "message": "hi"})
    assert json.loads(refused.content)["error"]["reason"] == "NOT_FOUND"
    # The raw client raises the domain error instead.
    with pytest.raises(InvalidArgument, match="A2A-Token"):
        await caller.a2a.invoke_agent(target.agent_id, "hi", custom_headers={"A2A-Token": "x"})  # type: ignore[union-attr]


async def test_the_callee_can_ask_for_input_or_fail(hub: Hub, servers: list[ScriptedOpenAIServer]) -> None:
    caller, _ = await register(hub, servers, "caller", enabled=True)
    approver, _ = await register(
        hub,
        servers,
        "approver",
        ToolCall("r1", "request_input", {"question": "Who approves a refund over $500?"}),
        "I asked for approval.",
        enabled=True,
    )
    assert caller.a2a is not None
    asked = await caller.a2a.invoke_agent(approver.agent_id, "Refund $900")
    assert (asked.status, asked.result) == ("input-required", "Who approves a refund over $500?")

    def broken(_request: dict[str, Any]) -> Any:
        raise RuntimeError("model backend down")

    server, config = llm(servers, rule=broken)
    flaky = await hub.register(Agent("flaky", config=config), Passport(name="flaky", project="acme"), a2a=ENABLED)
    failed = await caller.a2a.invoke_agent(flaky.agent_id, "anything", timeout=30)
    assert failed.status == "failed"
    assert "model backend down" in failed.error
    silent = await hub.register(
        Agent("silent", config=config),
        Passport(name="silent", project="acme"),
        a2a=ENABLED,
        attach_default_handler=False,
    )
    timed_out = await caller.a2a.invoke_agent(silent.agent_id, "hello?", timeout=0.5)
    assert timed_out.status == "failed" and "did not answer within 0.5s" in timed_out.error
    del server


async def test_three_level_chain_refreshes_an_expired_token_and_lists_one_tree(
    hub: Hub, servers: list[ScriptedOpenAIServer], clock: FakeClock
) -> None:
    seen_tokens: list[str] = []
    dispatches: list[Any] = []

    @tool
    def wait_a_while() -> str:
        """Take a long time (moves the hub's clock past the call token's lifetime)."""
        from agentsdk.a2a import current_dispatch

        dispatch = current_dispatch()
        assert dispatch is not None
        dispatches.append(dispatch)
        seen_tokens.append(dispatch.call_token)
        clock.offset += 301
        return "done waiting"

    c, _ = await register(hub, servers, "c", "C's first answer", "C's answer", enabled=True)

    def b_script(request: dict[str, Any]) -> Any:
        results = [m for m in request["messages"] if m["role"] == "tool"]
        if len(results) in (0, 2):
            return ToolCall(f"w{len(results)}", "wait_a_while", {})
        if len(results) in (1, 3):
            return ToolCall(f"i{len(results)}", "invoke_a2a_agent", {"agent_id": c.agent_id, "message": "what?"})
        return "B relays: " + json.loads(results[3]["content"])["result"]

    b_llm, b_config = llm(servers, rule=b_script)
    b = await hub.register(
        Agent("b", config=b_config, tools=[wait_a_while]), Passport(name="b", project="acme"), a2a=ENABLED
    )
    a, _ = await register(hub, servers, "a", enabled=True)
    assert a.a2a is not None
    top = await a.a2a.invoke_agent(b.agent_id, "ask C", root_session_id="session-42")
    assert (top.status, top.result) == ("completed", "B relays: C's answer")

    # The dispatch carries no token (the channel's log is readable by its members): the SDK
    # asked the hub for one at B's first call to C. That token had expired by B's second
    # call: the SDK got a fresh one transparently (and the dispatch now holds it).
    assert seen_tokens[0] == ""
    assert seen_tokens[1].startswith(dispatches[0].execution_id + ".")
    assert dispatches[0].call_token not in ("", seen_tokens[1])
    tree = await a.a2a.list_executions("session-42")
    ab, bc = (a.agent_id, b.agent_id), (b.agent_id, c.agent_id)
    assert [(e.caller_id, e.target_id) for e in tree] == [ab, bc, bc]
    assert tree[1].parent_execution_id == tree[2].parent_execution_id == tree[0].execution_id == top.execution_id
    assert {e.root_session_id for e in tree} == {"session-42"}
    assert [e.status for e in tree] == ["completed", "completed", "completed"]
    del b_llm


async def test_settings_load_from_agent_yaml(hub: Hub, servers: list[ScriptedOpenAIServer], tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(
        "name: billing\na2a:\n  enabled: true\n  allowed_callers: ['router-*']\n  description: Payments\n"
        "  skills: [payments]\n  capabilities: [refunds]\n  input_modes: [text]\n"
    )
    settings = A2ASettings.from_yaml(path)
    assert settings == A2ASettings(
        enabled=True,
        allowed_callers=["router-*"],
        description="Payments",
        skills=["payments"],
        capabilities=["refunds"],
        input_modes=["text"],
    )
    _, config = llm(servers)
    billing = await hub.register(Agent("billing", config=config), Passport(name="billing", project="acme"), a2a=path)
    assert billing.a2a_settings == settings
    router, _ = await register(hub, servers, "router-1", enabled=True)
    other, _ = await register(hub, servers, "other", enabled=True)
    assert [x.name for x in await router.a2a.discover_agents(skills=["payments"])] == ["billing"]  # type: ignore[union-attr]
    assert await other.a2a.discover_agents(skills=["payments"]) == []  # type: ignore[union-attr]

    (tmp_path / "none.yaml").write_text("name: plain\n")
    assert A2ASettings.from_yaml(tmp_path / "none.yaml") == A2ASettings()
    (tmp_path / "bad.yaml").write_text("a2a:\n  enabled: true\n  skils: [typo]\n")
    with pytest.raises(ValueError, match=r"bad.yaml: invalid a2a settings: a2a.skils"):
        A2ASettings.from_yaml(tmp_path / "bad.yaml")
    await billing.set_a2a_settings(A2ASettings())
    assert await router.a2a.discover_agents(skills=["payments"]) == []  # type: ignore[union-attr]


async def test_a2a_tools_convert_to_langchain_structured_tools(hub: Hub, servers: list[ScriptedOpenAIServer]) -> None:
    caller, _ = await register(hub, servers, "caller", enabled=True)
    target, _ = await register(hub, servers, "target", "pong", enabled=True, description="Answers pings")
    discover, invoke = to_langchain_tools(caller.a2a_tools())
    assert (discover.name, invoke.name) == ("discover_available_agents", "invoke_a2a_agent")
    # What llm.bind_tools(...) sends is exactly the schema our own agents send.
    assert [convert_to_openai_tool(t) for t in (discover, invoke)] == [t.schema() for t in caller.a2a_tools()]
    assert set(invoke.args) == {"agent_id", "message", "custom_headers"}
    listed = json.loads(await discover.ainvoke({}))
    assert [(a["name"], a["description"]) for a in listed] == [("target", "Answers pings")]
    answer = json.loads(await invoke.ainvoke({"agent_id": target.agent_id, "message": "ping"}))
    assert (answer["status"], answer["result"]) == ("completed", "pong")


async def test_scripts_build_their_own_client_from_a_credential(hub: Hub, servers: list[ScriptedOpenAIServer]) -> None:
    target, _ = await register(hub, servers, "target", "hi human", enabled=True)
    user = await hub.register_human(Passport(name="user", kind="human", project="acme"))
    async with AgentToAgent(hub.target, user.credential) as a2a:
        response = await a2a.invoke_agent("target", "hello")
    assert (response.status, response.result) == ("completed", "hi human")
    del target


async def test_answered_calls_leave_no_channel_worker_behind(hub: Hub, servers: list[ScriptedOpenAIServer]) -> None:
    target, _ = await register(hub, servers, "target", "one", "two", "three", enabled=True)
    caller, _ = await register(hub, servers, "caller", enabled=True)
    assert caller.a2a is not None
    results = [await caller.a2a.invoke_agent("target", f"call {i}") for i in range(3)]
    assert [r.result for r in results] == ["one", "two", "three"]
    stream = target._stream
    assert stream is not None
    # Each call's consulting channel ended; the callee's per-channel workers were retired.
    await assert_eventually(lambda: stream._workers == {})


def test_the_a2a_module_exports_documented_names_and_needs_no_langchain() -> None:
    import subprocess
    import sys

    import agentsdk.a2a

    assert {"AgentToAgent", "get_current_custom_headers", "A2ASettings", "to_langchain_tools"} <= set(
        agentsdk.a2a.__all__
    )
    type_aliases = {"InvocationStatus", "ReplyStatus"}  # Literal aliases carry no __doc__
    for name in set(agentsdk.a2a.__all__) - type_aliases:
        assert getattr(agentsdk.a2a, name).__doc__, name
    code = "import sys, agentsdk.a2a, agentsdk.network; print('langchain_core' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["False"], out.stderr


async def test_a_custom_handler_answers_calls_with_dispatch_helpers(
    hub: Hub, servers: list[ScriptedOpenAIServer]
) -> None:
    from agentsdk.a2a import Dispatch, dispatch_scope
    from agentsdk.network import Envelope

    desk = await hub.register_human(Passport(name="desk", kind="human", project="acme"))
    await desk.set_a2a_settings(A2ASettings(enabled=True, skills=["approvals"]))
    assert desk.a2a is not None

    async def answer(envelope: Envelope) -> None:
        dispatch = Dispatch.from_envelope(envelope)
        if dispatch is None:
            return
        with dispatch_scope(dispatch):
            tenant = get_current_custom_headers().get("x-tenant", "?")
        question = f"Who approves {dispatch.skill} for {tenant}?"
        await desk.post_envelope(dispatch.reply(desk.agent_id, question, status="input-required"))

    desk.on_envelope(answer)
    caller, _ = await register(hub, servers, "caller", enabled=True)
    assert caller.a2a is not None
    asked = await caller.a2a.invoke_agent("desk", "approve?", skill="approvals", custom_headers={"x-tenant": "acme"})
    assert (asked.status, asked.result) == ("input-required", "Who approves approvals for acme?")
    assert get_current_custom_headers() == {}
    with pytest.raises(InvalidArgument, match="does not offer skill"):
        await caller.a2a.invoke_agent("desk", "approve?", skill="billing")
    # A resumed identity keeps its A2A settings.
    await desk.disconnect()
    resumed = await hub.resume_human(desk.credential)
    assert resumed.a2a_settings == A2ASettings(enabled=True, skills=["approvals"]) and resumed.a2a is not None
