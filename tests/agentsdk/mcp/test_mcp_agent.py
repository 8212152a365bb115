"""Agents use the tools of real MCP servers (tests/agentsdk/mcp/tools_server.py, on the ``mcp`` package's
own server side) over stdio and streamable HTTP, driven by a scripted model over real HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentsdk import Agent, tool
from agentsdk.config import OpenAIConfig
from agentsdk.events import ToolCall
from agentsdk.langchain import to_langchain_tools
from agentsdk.mcp import MCPError, MCPServerStdio, MCPServerStreamableHttp
from agentsdk.testing import ScriptedOpenAIServer

SERVER = str(Path(__file__).with_name("tools_server.py"))


def stdio(**options: Any) -> MCPServerStdio:
    """The test server as a process the agent launches."""
    return MCPServerStdio(sys.executable, [SERVER], **options)


def last_tool_message(request: dict[str, Any]) -> str:
    """What the model was shown as the last tool result."""
    return str([m for m in request["messages"] if m["role"] == "tool"][-1]["content"])


def offered(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The tools a model request offered, by name."""
    return {t["function"]["name"]: t["function"] for t in request.get("tools", [])}


@pytest.fixture
def http_server() -> Iterator[str]:
    """The test server over streamable HTTP on a loopback port; yields its endpoint URL."""
    proc = subprocess.Popen(
        [sys.executable, SERVER, "--http"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("PORT "), f"the MCP test server did not start: {line!r}"
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def test_the_model_calls_a_stdio_server_tool_and_answers_with_its_result(
    server: ScriptedOpenAIServer, config: OpenAIConfig
) -> None:
    server.add(ToolCall.create("add", {"a": 2, "b": 40}), lambda req: f"The sum is {last_tool_message(req)}.")
    async with Agent("calc", "Use the tools.", config=config, mcp_servers=[stdio()]) as agent:
        reply = await agent.ask("What is 2 + 40?")
    assert reply.body == "The sum is 42."
    assert [(r.name, r.content, r.is_error) for r in reply.tool_results] == [("add", "42", False)]
    add = offered(server.requests[0])["add"]
    assert add["description"] == "Add two integers."
    assert add["parameters"]["required"] == ["a", "b"]
    assert add["parameters"]["properties"]["a"]["type"] == "integer"
    assert set(offered(server.requests[0])) == {"add", "shout", "fail", "crash", "pid", "slow", "picture", "forecast"}


async def test_the_same_over_streamable_http_beside_a_python_tool(
    server: ScriptedOpenAIServer, config: OpenAIConfig, http_server: str
) -> None:
    @tool
    def greet(name: str) -> str:
        """Greets someone."""
        return f"hello {name}"

    mcp = MCPServerStreamableHttp(http_server, headers={"X-Test": "yes"})
    server.add(
        [ToolCall.create("shout", {"text": "quiet please"}), ToolCall.create("greet", {"name": "ada"})],
        lambda req: "done",
    )
    async with Agent("loud", config=config, tools=[greet], mcp_servers=[mcp]) as agent:
        reply = await agent.ask("Shout it.")
    assert [(r.name, r.content) for r in reply.tool_results] == [("shout", "QUIET PLEASE"), ("greet", "hello ada")]
    assert reply.body == "done"
    assert {"greet", "shout", "add"} <= set(offered(server.requests[0]))


async def test_images_become_a_text_line_and_structured_results_json(
    server: ScriptedOpenAIServer, config: OpenAIConfig
) -> None:
    server.add([ToolCall.create("picture", {}), ToolCall.create("forecast", {"city": "Oslo"})], "ok")
    async with Agent("a", config=config, mcp_servers=[stdio(allow=["picture", "forecast"])]) as agent:
        reply = await agent.ask("go")
    picture, forecast = (r.content for r in reply.tool_results)
    caption, image = picture.split("\n")
    assert caption == "a red dot"
    assert image == "[image image/png, 100 bytes: not shown, tool results are text]"
    assert json.loads(forecast) == {"city": "Oslo", "celsius": 21, "sky": "clear"}
    assert not any(r.is_error for r in reply.tool_results)


async def test_the_tools_convert_to_langchain_like_any_tool(config: OpenAIConfig) -> None:
    async with Agent("a", config=config, mcp_servers=[stdio(allow=["add"])]) as agent:
        (add,) = to_langchain_tools(agent.tools_for_call())
        assert await add.ainvoke({"a": 5, "b": 6}) == "11"


async def test_a_tool_error_reaches_the_model_as_an_error(server: ScriptedOpenAIServer, config: OpenAIConfig) -> None:
    server.add(ToolCall.create("fail", {"reason": "disk on fire"}), lambda req: last_tool_message(req))
    async with Agent("a", config=config, mcp_servers=[stdio()]) as agent:
        reply = await agent.ask("go")
    assert reply.tool_results[0].is_error
    assert "disk on fire" in reply.tool_results[0].content
    assert "disk on fire" in reply.body


async def test_a_server_that_crashes_mid_call_gives_the_model_a_tool_error_and_the_turn_ends(
    server: ScriptedOpenAIServer, config: OpenAIConfig
) -> None:
    server.add(
        ToolCall.create("crash", {}),
        ToolCall.create("add", {"a": 1, "b": 1}),
        lambda req: "the server is gone",
    )
    async with Agent("a", config=config, mcp_servers=[stdio(timeout=60)]) as agent:
        reply = await asyncio.wait_for(agent.ask("go"), 30)
    assert [(r.name, r.is_error) for r in reply.tool_results] == [("crash", True), ("add", True)]
    assert "(server 'python')" in reply.tool_results[0].content
    assert reply.finish_reason == "stop"
    assert reply.body == "the server is gone"


async def test_a_slow_call_is_bounded_by_the_server_timeout(server: ScriptedOpenAIServer, config: OpenAIConfig) -> None:
    # 3 s: short enough for a test, long enough for the `add` call after it on a loaded machine.
    server.add(ToolCall.create("slow", {"seconds": 120}), ToolCall.create("add", {"a": 1, "b": 2}), "ok")
    async with Agent("a", config=config, mcp_servers=[stdio(timeout=3)]) as agent:
        reply = await asyncio.wait_for(agent.ask("go"), 30)
    assert reply.tool_results[0].is_error
    assert "timed out after 3s" in reply.tool_results[0].content
    # The server is still usable after a timed-out call.
    assert (reply.tool_results[1].content, reply.tool_results[1].is_error) == ("3", False)


async def test_allow_and_deny_lists_choose_the_tools_offered(
    server: ScriptedOpenAIServer, config: OpenAIConfig
) -> None:
    server.add(ToolCall.create("crash", {}), "ok")
    mcp = stdio(allow=["add", "shout", "crash"], deny=["crash"])
    async with Agent("a", config=config, mcp_servers=[mcp]) as agent:
        reply = await agent.ask("go")
    assert set(offered(server.requests[0])) == {"add", "shout"}
    assert reply.tool_results[0].is_error
    assert "there is no tool named 'crash'" in reply.tool_results[0].content


async def test_colliding_names_are_prefixed_with_the_server_name(
    server: ScriptedOpenAIServer, config: OpenAIConfig
) -> None:
    @tool
    def shout(text: str) -> str:
        """The agent's own shout."""
        return text + "!"

    first, second = stdio(name="first", allow=["add", "pid", "shout"]), stdio(name="second", allow=["add", "slow"])
    server.add(
        [ToolCall.create("first__add", {"a": 1, "b": 2}), ToolCall.create("second__add", {"a": 3, "b": 4})],
        [ToolCall.create("shout", {"text": "mine"}), ToolCall.create("first__shout", {"text": "theirs"})],
        "ok",
    )
    async with Agent("a", config=config, tools=[shout], mcp_servers=[first, second]) as agent:
        reply = await agent.ask("go")
    names = set(offered(server.requests[0]))
    assert names == {"shout", "first__shout", "first__add", "second__add", "pid", "slow"}
    assert [r.content for r in reply.tool_results] == ["3", "7", "mine!", "THEIRS"]


async def test_servers_start_with_the_agent_and_stop_with_it(
    server: ScriptedOpenAIServer, config: OpenAIConfig
) -> None:
    mcp = stdio(allow=["pid"])
    agent = Agent("a", config=config, mcp_servers=[mcp])
    assert not mcp.running
    server.add(ToolCall.create("pid", {}), "ok", ToolCall.create("pid", {}), "ok")
    first = await agent.ask("go")  # the first ask starts the servers
    assert mcp.running
    pid = int(first.tool_results[0].content)
    await agent.stop()
    assert not mcp.running
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the process ended and was reaped
    second = await agent.ask("again")  # a stopped agent starts its servers again
    assert int(second.tool_results[0].content) != pid
    await agent.stop()


async def test_a_server_that_cannot_start_fails_the_agent_start_with_a_clear_error(config: OpenAIConfig) -> None:
    good = stdio(name="good")
    missing = MCPServerStdio("/nonexistent/mcp-server", name="missing", start_timeout=10)
    agent = Agent("a", config=config, mcp_servers=[good, missing])
    with pytest.raises(MCPError, match="'missing' failed to start"):
        await agent.start()
    assert not good.running  # nothing is left running


def test_bad_server_options_are_refused() -> None:
    with pytest.raises(ValueError, match="must be > 0"):
        stdio(timeout=0)
    with pytest.raises(ValueError, match="must start with http"):
        MCPServerStreamableHttp("ftp://example")
    with pytest.raises(ValueError, match="letters, digits"):
        stdio(name="a.b")
