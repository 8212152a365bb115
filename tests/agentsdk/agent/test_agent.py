"""Agent.ask over real HTTP: the openai client talks to a ScriptedOpenAIServer."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import openai
import pytest

from agentsdk import Agent, Inject, OpenAIConfig, Stream, tool
from agentsdk.events import (
    CompactionStarted,
    ModelMessage,
    ModelRequest,
    TextInput,
    ToolCall,
    ToolCallEvent,
)
from agentsdk.testing import ScriptedOpenAIServer
from agentsdk.tools import MissingDependencyError


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
async def weather(city: str) -> str:
    """Current weather for a city."""
    await asyncio.sleep(0)
    return f"sunny in {city}"


def tool_names(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]


async def test_plain_text_reply(server: ScriptedOpenAIServer, config: OpenAIConfig) -> None:
    server.add("Hello, Ann!")
    agent = Agent("greeter", "You greet people.", config=config)
    reply = await agent.ask("Hi, I am Ann")
    assert reply.body == "Hello, Ann!"
    assert reply.finish_reason == "stop" and not reply.halted
    assert reply.usage.total_tokens > 0 and reply.usage.prompt_tokens > 0
    [request] = server.requests
    assert request["model"] == "gpt-test"
    assert "tools" not in request
    assert request["messages"] == [
        {"role": "system", "content": "You greet people."},
        {"role": "user", "content": "Hi, I am Ann"},
    ]
    assert [type(e) for e in reply.events] == [ModelRequest, ModelMessage]
    assert reply.stream.events == reply.events
    final = reply.events[-1]
    assert isinstance(final, ModelMessage) and final.model == "gpt-test" and final.finish_reason == "stop"


async def test_multi_round_tool_loop(server: ScriptedOpenAIServer, config: OpenAIConfig) -> None:
    def second(request: dict[str, Any]) -> list[ToolCall]:
        *_, assistant, result = request["messages"]
        assert assistant["role"] == "assistant"
        assert assistant["tool_calls"][0]["id"] == "call_add"
        assert assistant["tool_calls"][0]["function"] == {"name": "add", "arguments": '{"a": 2, "b": 3}'}
        assert result == {"role": "tool", "tool_call_id": "call_add", "content": "5"}
        return [ToolCall("call_w1", "weather", {"city": "Oslo"}), ToolCall("call_w2", "weather", {"city": "Rome"})]

    def third(request: dict[str, Any]) -> str:
        tail = request["messages"][-3:]
        assert [m["role"] for m in tail] == ["assistant", "tool", "tool"]
        assert [m["tool_call_id"] for m in tail[1:]] == ["call_w1", "call_w2"]
        assert [m["content"] for m in tail[1:]] == ["sunny in Oslo", "sunny in Rome"]
        return "2+3=5; Oslo and Rome are sunny."

    server.add(ToolCall("call_add", "add", {"a": 2, "b": 3}), second, third)
    agent = Agent("helper", config=config, tools=[add, weather])
    reply = await agent.ask("add 2 and 3, then the weather in Oslo and Rome")

    assert reply.body == "2+3=5; Oslo and Rome are sunny."
    assert len(server.requests) == 3 and server.pending == 0
    assert all(tool_names(r) == ["add", "weather"] for r in server.requests)
    assert [c.id for c in reply.tool_calls] == ["call_add", "call_w1", "call_w2"]
    assert [r.content for r in reply.tool_results] == ["5", "sunny in Oslo", "sunny in Rome"]
    assert [type(e).__name__ for e in reply.events] == [
        "ModelRequest",
        "ModelMessage",
        "ToolCallEvent",
        "ToolResultEvent",
        "ModelMessage",
        "ToolCallEvent",
        "ToolCallEvent",
        "ToolResultEvent",
        "ToolResultEvent",
        "ModelMessage",
    ]
    per_call = [m.usage.total_tokens for m in reply.events if isinstance(m, ModelMessage) and m.usage]
    assert len(per_call) == 3 and reply.usage.total_tokens == sum(per_call)


async def test_ask_tools_add_without_replacing(server: ScriptedOpenAIServer, config: OpenAIConfig) -> None:
    def say(content: str) -> str:
        """Post a message."""
        return "posted"

    server.add("one", "two")
    agent = Agent("a", config=config, tools=[add])
    await agent.ask("first", tools=[say])  # a plain callable is wrapped
    await agent.ask("second")
    assert [tool_names(r) for r in server.requests] == [["add", "say"], ["add"]]
    assert [t.name for t in agent.tools] == ["add"]

    agent.tools.append(weather)  # the list is mutable: a plugin appends to it
    server.add("three")
    await agent.ask("third", tools=[add])  # the same tool object twice is fine
    assert tool_names(server.requests[-1]) == ["add", "weather"]

    @tool(name="add")
    def other_add(x: int) -> int:
        return x

    with pytest.raises(ValueError, match="two different tools are named 'add'"):
        await agent.ask("fourth", tools=[other_add])


async def test_dependencies_merge_over_the_agents(server: ScriptedOpenAIServer, config: OpenAIConfig) -> None:
    @tool
    def whoami(
        greeting: Annotated[str, Inject("greeting")],
        user: Annotated[str, Inject("user")],
        number: Annotated[int, Inject(int)],
    ) -> str:
        """Say who is asking."""
        return f"{greeting} {user} #{number}"

    server.add(ToolCall.create("whoami"), "ok", ToolCall.create("whoami"), "ok")
    agent = Agent("a", config=config, tools=[whoami], dependencies={"greeting": "hi", "user": "agent-user", int: 1})
    reply = await agent.ask("who?", dependencies={"user": "call-user"})
    assert reply.tool_results[0].content == "hi call-user #1"
    assert server.requests[1]["messages"][-1]["content"] == "hi call-user #1"
    reply = await agent.ask("again")  # the per-call value did not stick
    assert reply.tool_results[0].content == "hi agent-user #1"
    assert agent.dependencies == {"greeting": "hi", "user": "agent-user", int: 1}


async def test_missing_dependency_fails_the_ask(server: ScriptedOpenAIServer, config: OpenAIConfig) -> None:
    @tool
    def needs_store(store: Annotated[object, Inject("store")]) -> str:
        return "never"

    server.add(ToolCall.create("needs_store"))
    agent = Agent("a", config=config, tools=[needs_store])
    with pytest.raises(MissingDependencyError, match="'store'"):
        await agent.ask("go")


async def test_stream_history_is_sent_in_order_and_turn_appended(
    server: ScriptedOpenAIServer, config: OpenAIConfig
) -> None:
    history = [
        ModelRequest([TextInput("bob: what is 2+2?")]),
        ModelMessage("4"),
        CompactionStarted(events_before=2),  # lifecycle events are not shown to the model
        ModelRequest([TextInput("carol: and 3+3?")]),
    ]
    stream = Stream(stream_id="channel-1", events=list(history))
    server.add("6")
    agent = Agent("math", "You do arithmetic.", config=config)
    reply = await agent.ask("answer carol", stream=stream)
    assert server.requests[0]["messages"] == [
        {"role": "system", "content": "You do arithmetic."},
        {"role": "user", "content": "bob: what is 2+2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "carol: and 3+3?"},
        {"role": "user", "content": "answer carol"},
    ]
    assert reply.stream is stream and stream.stream_id == "channel-1"
    assert stream.events[: len(history)] == history
    assert stream.events[len(history) :] == reply.events
    assert len(reply.events) == 2

    # No input: the model runs on the history alone (the channel's last message is the question).
    server.add("still 6")
    reply = await agent.ask(stream=stream)
    assert server.requests[1]["messages"][-1] == {"role": "assistant", "content": "6"}
    assert [type(e) for e in reply.events] == [ModelMessage]


async def test_input_as_events(server: ScriptedOpenAIServer, config: OpenAIConfig) -> None:
    server.add("ok")
    agent = Agent("a", config=config)
    reply = await agent.ask([TextInput("line 1"), TextInput("line 2")])
    assert server.requests[0]["messages"] == [{"role": "user", "content": "line 1\nline 2"}]
    request = reply.events[0]
    assert isinstance(request, ModelRequest) and request.text == "line 1\nline 2"


async def test_max_tool_rounds_stops_with_a_clear_message(server: ScriptedOpenAIServer, config: OpenAIConfig) -> None:
    server.rule = lambda request: ToolCall.create("add", {"a": 1, "b": 1})
    agent = Agent("looper", config=config, tools=[add], max_tool_rounds=2)
    reply = await agent.ask("loop forever")
    assert reply.finish_reason == "max_tool_rounds"
    assert "after 2 tool rounds" in reply.body and reply.body.startswith("Stopped")
    assert len(server.requests) == 3  # two rounds ran, the third request's calls were not executed
    assert [r.is_error for r in reply.tool_results] == [False, False, True]
    assert "limit of 2 tool rounds" in reply.tool_results[-1].content
    last = reply.events[-1]
    assert isinstance(last, ModelMessage) and last.text == reply.body and last.finish_reason == "max_tool_rounds"
    assert sum(isinstance(e, ToolCallEvent) for e in reply.events) == 2

    # The recorded history stays valid for the next turn (every call has a result).
    server.rule = None
    server.add("fine")
    await agent.ask("stop now", stream=reply.stream)
    messages = server.requests[-1]["messages"]
    call_ids = [c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    result_ids = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert call_ids == result_ids and len(call_ids) == 3


async def test_tool_error_is_shown_to_the_model_and_loop_continues(
    server: ScriptedOpenAIServer, config: OpenAIConfig
) -> None:
    @tool
    async def flaky(x: int) -> int:
        """Fails for negative numbers."""
        if x < 0:
            raise ValueError("x must be >= 0")
        return x * 10

    def retry(request: dict[str, Any]) -> ToolCall:
        assert request["messages"][-1] == {
            "role": "tool",
            "tool_call_id": "c1",
            "content": "Error: tool 'flaky' raised ValueError: x must be >= 0",
        }
        return ToolCall("c2", "flaky", {"x": 4})

    server.add(ToolCall("c1", "flaky", {"x": -1}), retry, "40")
    reply = await Agent("a", config=config, tools=[flaky]).ask("go")
    assert reply.body == "40"
    assert [(r.is_error, r.content) for r in reply.tool_results] == [
        (True, "Error: tool 'flaky' raised ValueError: x must be >= 0"),
        (False, "40"),
    ]


async def test_bad_arguments_and_unknown_tools_become_error_results(
    server: ScriptedOpenAIServer, config: OpenAIConfig
) -> None:
    server.add(
        [
            ToolCall("c1", "add", {"a": "two", "b": 3}),
            ToolCall("c2", "add", {}, raw_arguments='{"a": 1,'),
            ToolCall("c3", "subtract", {"a": 1}),
        ],
        "sorry",
    )
    reply = await Agent("a", config=config, tools=[add]).ask("go")
    assert reply.body == "sorry"
    results = {r.call_id: r for r in reply.tool_results}
    assert all(r.is_error for r in results.values())
    assert "invalid arguments for tool 'add'" in results["c1"].content and "a:" in results["c1"].content
    assert "not a JSON object" in results["c2"].content
    assert "no tool named 'subtract'" in results["c3"].content and "available: add" in results["c3"].content
    sent = server.requests[1]["messages"]
    # The malformed arguments are sent back exactly as the model produced them.
    assert sent[-4]["tool_calls"][1]["function"]["arguments"] == '{"a": 1,'
    assert [m["tool_call_id"] for m in sent[-3:]] == ["c1", "c2", "c3"]


async def test_tools_run_concurrently(server: ScriptedOpenAIServer, config: OpenAIConfig) -> None:
    both_started = asyncio.Event()
    started = 0

    @tool
    async def wait(n: int) -> int:
        nonlocal started
        started += 1
        if started == 2:
            both_started.set()
        await asyncio.wait_for(both_started.wait(), 5)
        return n

    server.add([ToolCall("a", "wait", {"n": 1}), ToolCall("b", "wait", {"n": 2})], "done")
    reply = await Agent("a", config=config, tools=[wait]).ask("go")
    assert [r.content for r in reply.tool_results] == ["1", "2"]


async def test_model_errors_propagate(server: ScriptedOpenAIServer, config: OpenAIConfig) -> None:
    agent = Agent("a", config=config)
    with pytest.raises(openai.BadRequestError, match="script exhausted"):
        await agent.ask("nobody scripted this")


async def test_server_lists_models_and_checks_the_key(server: ScriptedOpenAIServer) -> None:
    good = openai.AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0)
    bad = openai.AsyncOpenAI(base_url=server.base_url, api_key="wrong", max_retries=0)
    try:
        models = await good.models.list()
        assert [m.id for m in models.data] == ["scripted"]
        with pytest.raises(openai.AuthenticationError):
            await bad.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    finally:
        await good.close()
        await bad.close()


def test_server_sync_context_manager_releases_the_port() -> None:
    with ScriptedOpenAIServer(["hi"]) as srv:
        url = srv.base_url
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
    with pytest.raises(RuntimeError, match="not running"):
        _ = srv.base_url


async def test_request_body_is_what_chat_completions_create_sends(server: ScriptedOpenAIServer) -> None:
    """OpenAIConfig posts the body itself (skipping create's typed transform): the same JSON reaches the server."""
    config = OpenAIConfig(
        model="m", base_url=server.base_url, api_key="test", temperature=0.25, max_tokens=7, extra_body={"seed": 3}
    )
    server.add("direct", "via create")
    await config.complete([{"role": "user", "content": "hi"}], [add.schema()])
    await config.client.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "hi"}],
        tools=[add.schema()],  # type: ignore[list-item]
        temperature=0.25,
        max_tokens=7,
        extra_body={"seed": 3},
    )
    direct, via_create = server.requests
    assert direct == via_create
    assert direct["temperature"] == 0.25 and direct["max_tokens"] == 7 and direct["seed"] == 3
    await config.aclose()
