"""The network tools wherever a registered agent runs, not only in default-handler turns.

``async with agent.task(...): await agent.ask(...)`` gets the client, the hub and its own
task; concurrent turns see only their own task; delegation depth is carried through
``CallTool`` so chains stop at the hub's limit and cycles stop at once. Real hub, real
openai client against a local OpenAI-compatible server.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from agentnet.v1 import channel_pb2, hub_pb2, task_pb2

from agentsdk import Agent
from agentsdk.a2a import A2ASettings, AgentToAgent
from agentsdk.events import BaseEvent, TaskCancelled, TaskCompleted, TaskProgress, TaskStarted, ToolCall
from agentsdk.network import EV_CHANNEL_CLOSED, EV_TASK_CANCELLED, EV_TEXT, Hub, Passport
from agentsdk.testing import ScriptedOpenAIServer
from hubsvc.core.options import HubOptions
from netkernel.errors import InvalidArgument
from tests.agentsdk.network.llm import llm

HUB_PATHS = ("grpc", "in-process")
"""Each test runs with the embedded hub's client over its port and in process (conftest.py)."""


@pytest.fixture
async def shallow_hub() -> AsyncIterator[Hub]:
    async with Hub.open(options=HubOptions(max_depth=1)) as h:
        yield h


def tool_messages(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def user_text(request: dict[str, Any]) -> str:
    return next(m["content"] for m in reversed(request["messages"]) if m["role"] == "user")


def call_then_echo(make_call: Callable[[dict[str, Any]], ToolCall]) -> Callable[[dict[str, Any]], Any]:
    """A model that calls one tool, then answers with the tool's result."""

    def rule(request: dict[str, Any]) -> Any:
        results = tool_messages(request)
        if request["messages"][-1]["role"] == "tool":
            return "tool said: " + results[-1]
        return make_call(request)

    return rule


async def test_plugin_tools_work_inside_agent_task_outside_a_handler_turn(
    hub: Hub, servers: list[ScriptedOpenAIServer]
) -> None:
    def script(request: dict[str, Any]) -> Any:
        done = tool_messages(request)
        if len(done) == 0:
            return ToolCall.create("tasks", {"action": "progress", "payload": {"pct": 50}})
        if len(done) == 1:
            return ToolCall.create("peers", {"action": "find"})
        if len(done) == 2:
            return ToolCall.create("tasks", {"action": "complete", "result": "crunched"})
        return "done"

    _, config = llm(servers, rule=script)
    agent = Agent("cruncher", config=config)
    await hub.register(agent, Passport(name="cruncher"))
    await hub.register(Agent("other", config=config), Passport(name="other"))
    async with agent.task("crunch") as task:
        reply = await agent.ask("crunch the numbers")
    results = [r.content for r in reply.tool_results]
    assert not any(r.is_error for r in reply.tool_results), results
    assert json.loads(results[0])["state"] == "running"
    assert [p["name"] for p in json.loads(results[1])["peers"]] == ["other"]
    # The model completed the task itself; leaving the block does not report it a second time.
    stored = await hub.core.tasks.get(task.task_id)
    assert stored.state == task_pb2.TASK_STATE_COMPLETED
    assert json.loads(stored.progress_json) == {"pct": 50}
    assert json.loads(stored.result_json) == "crunched"
    assert task.ended


async def test_concurrent_tasks_each_see_only_their_own(hub: Hub, servers: list[ScriptedOpenAIServer]) -> None:
    both_open = asyncio.Barrier(2)

    def script(request: dict[str, Any]) -> Any:
        if request["messages"][-1]["role"] == "tool":
            return "ok"
        return ToolCall.create("tasks", {"action": "progress", "payload": user_text(request)})

    _, config = llm(servers, rule=script)
    agent = Agent("worker", config=config)
    await hub.register(agent, Passport(name="worker"))

    async def job(label: str) -> str:
        async with agent.task(label) as task:
            await both_open.wait()  # both tasks are open before either turn runs
            reply = await agent.ask(label)
            assert not reply.tool_results[0].is_error, reply.tool_results[0].content
            return task.task_id

    ids = await asyncio.gather(job("job-a"), job("job-b"))
    for task_id, label in zip(ids, ["job-a", "job-b"], strict=True):
        stored = await hub.core.tasks.get(task_id)
        assert json.loads(stored.progress_json) == label
        assert stored.state == task_pb2.TASK_STATE_COMPLETED


async def test_tasks_tool_outside_any_task_is_a_tool_error_not_a_missing_connection(
    hub: Hub, servers: list[ScriptedOpenAIServer]
) -> None:
    _, config = llm(servers, rule=call_then_echo(lambda r: ToolCall.create("tasks", {"action": "progress"})))
    agent = Agent("idle", config=config)
    await hub.register(agent, Passport(name="idle"))
    reply = await agent.ask("report")
    result = reply.tool_results[0]
    assert result.is_error and "FAILED_PRECONDITION" in result.content and "agent.task" in result.content


# -- delegation depth through CallTool ---------------------------------------------------


def delegating(target: str) -> Callable[[dict[str, Any]], Any]:
    return call_then_echo(lambda r: ToolCall.create("delegate", {"target": target, "prompt": "help: " + user_text(r)}))


async def ask_and_wait_reply(user: Any, target: str, text: str) -> str:
    ch = await user.open(type="consulting", target=target)
    await user.send(ch.channel_id, text)
    while True:
        env = await user.next_envelope(predicate=lambda e: e.channel_id == ch.channel_id, timeout=60)
        if env.event_type == EV_TEXT and env.sender_id != user.agent_id:
            return str(env.text)
        assert env.event_type != EV_CHANNEL_CLOSED, env.event_data


async def test_delegate_chain_stops_at_the_depth_limit_with_a_tool_error(
    shallow_hub: Hub, servers: list[ScriptedOpenAIServer]
) -> None:
    _, config_a = llm(servers, rule=delegating("b"))
    server_b, config_b = llm(servers, rule=delegating("c"))
    server_c, config_c = llm(servers, "C answered")
    for name, config in (("a", config_a), ("b", config_b), ("c", config_c)):
        await shallow_hub.register(Agent(name, config=config), Passport(name=name))
    user = await shallow_hub.register_human(Passport(name="user", kind="human"))
    answer = await ask_and_wait_reply(user, "a", "go")
    assert server_c.requests == []  # A→B ran (depth 1); B→C would be depth 2 > max_depth=1
    refusal = tool_messages(server_b.requests[-1])[-1]
    assert "DEPTH_EXCEEDED" in refusal and "limit of 1" in refusal
    assert "DEPTH_EXCEEDED" in answer  # B told A what happened; A answered the user


async def test_delegate_cycle_stops_at_once(shallow_hub: Hub, servers: list[ScriptedOpenAIServer]) -> None:
    server_a, config_a = llm(servers, rule=delegating("b"))
    server_b, config_b = llm(servers, rule=delegating("a"))
    await shallow_hub.register(Agent("a", config=config_a), Passport(name="a"))
    await shallow_hub.register(Agent("b", config=config_b), Passport(name="b"))
    user = await shallow_hub.register_human(Passport(name="user", kind="human"))
    answer = await ask_and_wait_reply(user, "a", "loop")
    assert "DEPTH_EXCEEDED" in answer
    assert len(server_a.requests) == 2 and len(server_b.requests) == 2  # one turn each, no second round


# -- Task.cancel and the task events ------------------------------------------------------


async def test_task_cancel_posts_the_owners_terminal_envelope(hub: Hub, servers: list[ScriptedOpenAIServer]) -> None:
    _, config = llm(servers)
    agent = Agent("owner", config=config)
    client = await hub.register(agent, Passport(name="owner"))
    user = await hub.register_human(Passport(name="user", kind="human"))
    ch = await user.open(type="conversation", target="owner")
    async with agent.task("long job", channel_id=ch.channel_id) as task:
        await task.cancel("user changed their mind")
    cancelled = await user.next_envelope(predicate=lambda e: e.event_type == EV_TASK_CANCELLED, timeout=30)
    assert cancelled.sender_id == client.agent_id and cancelled.channel_id == ch.channel_id
    assert cancelled.event_data == {"task_id": task.task_id, "reason": "user changed their mind"}
    assert cancelled.task_id == task.task_id
    stored = await hub.core.tasks.get(task.task_id)
    assert stored.state == task_pb2.TASK_STATE_CANCELLED


async def test_task_events_reach_the_agents_observers(hub: Hub, servers: list[ScriptedOpenAIServer]) -> None:
    def script(request: dict[str, Any]) -> Any:
        if request["messages"][-1]["role"] == "tool":
            return "ok"
        return ToolCall.create("tasks", {"action": "progress", "payload": 1})

    _, config = llm(servers, rule=script)
    agent = Agent("observed", config=config)
    await hub.register(agent, Passport(name="observed"))
    seen: list[BaseEvent] = []
    agent.subscribe(seen.append)
    async with agent.task("first") as first:
        await agent.ask("go")
        await first.progress(2)
    async with agent.task("second") as second:
        await second.cancel("stop")
    task_events = [e for e in seen if isinstance(e, TaskStarted | TaskProgress | TaskCompleted | TaskCancelled)]
    assert [(type(e).__name__, e.task_id) for e in task_events] == [
        ("TaskStarted", first.task_id),
        ("TaskProgress", first.task_id),
        ("TaskProgress", first.task_id),
        ("TaskCompleted", first.task_id),
        ("TaskStarted", second.task_id),
        ("TaskCancelled", second.task_id),
    ]
    progress = [e for e in task_events if isinstance(e, TaskProgress)]
    assert [p.payload for p in progress] == [1, 2]


# -- the small API fixes -------------------------------------------------------------------


async def test_peers_describe_kind_matches_find(hub: Hub, servers: list[ScriptedOpenAIServer]) -> None:
    _, config = llm(servers)
    client = await hub.register(Agent("asker", config=config), Passport(name="asker"))
    await hub.register(Agent("peer", config=config), Passport(name="peer"))
    found = await client.call_tool("peers", {"action": "find"})
    described = await client.call_tool("peers", {"action": "describe", "name": "peer"})
    assert found["peers"][0]["kind"] == "agent"
    assert described["passport"]["kind"] == "agent"


async def test_channels_open_without_a_message_returns_once_opened(
    hub: Hub, servers: list[ScriptedOpenAIServer]
) -> None:
    _, config = llm(servers)
    client = await hub.register(Agent("opener", config=config), Passport(name="opener"))
    await hub.register(Agent("invitee", config=config), Passport(name="invitee"))
    opened = await client.call_tool("channels", {"action": "open", "type": "conversation", "target": "invitee"})
    assert opened["state"] == "opened"
    response = await client.rpc.describe_channel(hub_pb2.DescribeChannelRequest(channel_id=opened["channel_id"]))
    assert response.channel.state == channel_pb2.CHANNEL_STATE_OPENED


async def test_attach_plugin_false_keeps_the_a2a_tools(hub: Hub, servers: list[ScriptedOpenAIServer]) -> None:
    _, config = llm(servers)
    bare = Agent("bare", config=config)
    await hub.register(bare, Passport(name="bare"), a2a=A2ASettings(enabled=True), attach_plugin=False)
    names = {t.name for t in bare.tools}
    assert {"discover_available_agents", "invoke_a2a_agent"} <= names
    assert not names & {"peers", "channels", "tasks", "context", "delegate"}


async def test_agent_to_agent_accepts_oe_url(hub: Hub) -> None:
    human = await hub.register_human(Passport(name="script", kind="human"))
    async with AgentToAgent(oe_url=hub.target, auth_token=human.credential) as a2a:
        assert await a2a.discover_agents() == []
    with pytest.raises(ValueError, match="oe_url"):
        AgentToAgent("127.0.0.1:1", oe_url="127.0.0.1:2")
    with pytest.raises(ValueError, match="hub_url"):
        AgentToAgent()


async def test_register_human_refuses_a_rule_the_hub_cannot_read(hub: Hub) -> None:
    with pytest.raises(InvalidArgument, match="rule_json is not a valid rule: max_messages"):
        await hub.register_human(Passport(name="ruled", kind="human"), rule={"max_messages": 3})
    await hub.register_human(Passport(name="plain", kind="human"))
    assert [a.name for a in await hub.list_agents()] == ["plain"]  # the refused one was not registered
