"""ScriptedConfig matches the HTTP path; events_to_messages always yields a valid chat."""

from __future__ import annotations

from typing import Any

import pytest

from agentsdk import Agent, OpenAIConfig, ScriptedConfig, Stream, tool
from agentsdk.config import ModelConfig, ScriptExhaustedError, events_to_messages
from agentsdk.events import (
    AggregationStarted,
    CompactionSummary,
    HaltEvent,
    ModelMessage,
    ModelRequest,
    ObserverAlert,
    SystemPrompt,
    TextInput,
    ToolCall,
    ToolCallEvent,
    ToolResultEvent,
    Usage,
)
from agentsdk.testing import ScriptedOpenAIServer


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return key.upper()


def script() -> list[Any]:
    return [ToolCall("c1", "lookup", {"key": "a"}), [ToolCall("c2", "lookup", {"key": "b"})], "A and B"]


async def test_scripted_config_sends_what_the_server_receives(
    server: ScriptedOpenAIServer, config: OpenAIConfig
) -> None:
    history = Stream(events=[ModelRequest([TextInput("earlier")]), ModelMessage("noted")])
    scripted = ScriptedConfig(script())
    assert isinstance(scripted, ModelConfig) and isinstance(config, ModelConfig)
    server.add(*script())

    over_http = await Agent("a", "Be exact.", config=config, tools=[lookup]).ask(
        "look up a and b", stream=Stream(events=list(history.events))
    )
    in_process = await Agent("a", "Be exact.", config=scripted, tools=[lookup]).ask(
        "look up a and b", stream=Stream(events=list(history.events))
    )
    assert over_http.body == in_process.body == "A and B"
    assert [r["messages"] for r in server.requests] == [messages for messages, _ in scripted.requests]
    assert [r["tools"] for r in server.requests] == [tools for _, tools in scripted.requests]
    assert [type(e) for e in over_http.events] == [type(e) for e in in_process.events]
    assert in_process.usage.total_tokens > 0 and scripted.calls == 3


async def test_scripted_callables_exceptions_and_exhaustion() -> None:
    seen: list[int] = []

    def count(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        seen.append(len(messages))
        return f"{len(tools)} tools"

    async def later(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelMessage:
        return ModelMessage("async reply", usage=Usage(1, 1, 2))

    config = ScriptedConfig([count, later, RuntimeError("provider down")], model="fake-1")
    agent = Agent("a", config=config, tools=[lookup])
    first = await agent.ask("one")
    assert first.body == "1 tools" and seen == [1]
    second = await agent.ask("two")
    assert second.body == "async reply" and second.usage == Usage(1, 1, 2)
    message = second.events[-1]
    assert isinstance(message, ModelMessage) and message.model == "fake-1"
    with pytest.raises(RuntimeError, match="provider down"):
        await agent.ask("three")
    with pytest.raises(ScriptExhaustedError, match=r"completion #4 requested but the script had 3"):
        await agent.ask("four")
    with pytest.raises(TypeError, match="unsupported scripted reply"):
        await Agent("b", config=ScriptedConfig([42])).ask("x")  # type: ignore[list-item]


def test_events_to_messages_full_mapping() -> None:
    call = ToolCall("c1", "lookup", {"key": "a"})
    events = [
        SystemPrompt("extra rules"),
        CompactionSummary("they discussed fruit", events_dropped=7),
        TextInput("bare text"),
        ModelRequest([TextInput("q1"), TextInput("q2")]),
        ModelMessage("let me check", tool_calls=[call]),
        ToolCallEvent("c1", "lookup", {"key": "a"}),  # already announced by the message
        ToolResultEvent("c1", "lookup", "A"),
        ObserverAlert("warning", "slow"),  # observer / lifecycle events are not shown
        AggregationStarted("wm"),
        HaltEvent("old"),
        ModelMessage(""),  # empty messages are skipped
        ModelMessage("A it is"),
    ]
    assert events_to_messages(["p1", "", "p2"], events) == [
        {"role": "system", "content": "p1\n\np2"},
        {"role": "system", "content": "extra rules"},
        {"role": "system", "content": "Summary of 7 earlier events:\nthey discussed fruit"},
        {"role": "user", "content": "bare text"},
        {"role": "user", "content": "q1\nq2"},
        {
            "role": "assistant",
            "content": "let me check",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"key": "a"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "A"},
        {"role": "assistant", "content": "A it is"},
    ]
    assert events_to_messages([], []) == []


def test_events_to_messages_repairs_partial_histories() -> None:
    # A window that cut off the assistant's call, a call whose result is missing, and
    # tool calls/results that only exist as ToolCallEvent/ToolResultEvent (projections).
    events = [
        ToolResultEvent("gone", "lookup", "orphan result"),
        ModelMessage(tool_calls=[ToolCall("c1", "lookup", {"key": "x"})]),
        ModelRequest([TextInput("interrupting user")]),
        ToolCallEvent("p1", "lookup", {"key": "y"}),
        ToolCallEvent("p2", "lookup", {"key": "z"}),
        ModelRequest([ToolResultEvent("p2", "lookup", "Z"), TextInput("and then")]),
        ToolResultEvent("p1", "lookup", "late", is_error=True),
    ]
    messages = events_to_messages([], events)
    assert messages == [
        {"role": "user", "content": "[result of tool lookup]\norphan result"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"key": "x"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "(no result was recorded for this tool call)"},
        {"role": "user", "content": "interrupting user"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "p1", "type": "function", "function": {"name": "lookup", "arguments": '{"key": "y"}'}},
                {"id": "p2", "type": "function", "function": {"name": "lookup", "arguments": '{"key": "z"}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "p2", "content": "Z"},
        {"role": "tool", "tool_call_id": "p1", "content": "(no result was recorded for this tool call)"},
        {"role": "user", "content": "and then"},
        {"role": "user", "content": "[error from tool lookup]\nlate"},
    ]


async def test_scripted_server_accepts_a_burst_of_new_connections() -> None:
    """64 clients connecting at once all get answers (the listen backlog is not the default 5)."""
    import asyncio

    with ScriptedOpenAIServer(rule=lambda request: "at once") as server:
        configs = [OpenAIConfig(model="m", base_url=server.base_url, api_key="k", max_retries=0) for _ in range(64)]
        replies = await asyncio.gather(
            *(
                c.client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
                for c in configs
            )
        )
    assert [r.choices[0].message.content for r in replies] == ["at once"] * 64


def test_scripted_server_sends_each_response_in_one_write() -> None:
    """Status line, headers and body leave in one write, so a keep-alive client is not held up by
    Nagle's algorithm waiting for the delayed ACK of the headers (~40 ms per call on Linux)."""
    import json
    import socket

    with ScriptedOpenAIServer(rule=lambda request: "at once") as server:
        host, port = server.base_url.removeprefix("http://").removesuffix("/v1").split(":")
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
        request = (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        with socket.create_connection((host, int(port))) as sock:
            for _ in range(3):  # the first exchange, then two on the same kept-alive connection
                sock.sendall(request)
                first = sock.recv(1 << 20)
                head, _, payload = first.partition(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                assert len(payload) == length, f"the first read held {len(payload)} of {length} body bytes"
                assert json.loads(payload)["choices"][0]["message"]["content"] == "at once"


def test_the_message_conversion_lives_in_llm_messages_and_config_re_exports_it() -> None:
    import agentsdk.config as config
    import agentsdk.llm_messages as llm_messages

    for name in ("events_to_messages", "message_from_completion", "message_from_chunks", "ChatMessage", "NO_RESULT"):
        assert getattr(config, name) is getattr(llm_messages, name), name
    assert config.events_to_messages.__module__ == "agentsdk.llm_messages"
