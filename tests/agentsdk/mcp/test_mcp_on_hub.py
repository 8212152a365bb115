"""An agent on a (real, in-process) hub uses an MCP server's tools in its turns; its servers start
when it registers and stop when it disconnects."""

from __future__ import annotations

from typing import Any

import pytest

from agentsdk import Agent
from agentsdk.events import ToolCall
from agentsdk.mcp import MCPError, MCPServerStdio
from agentsdk.network import EV_CHANNEL_CLOSED, EV_TEXT, Hub, Passport
from agentsdk.testing import ScriptedOpenAIServer
from tests.agentsdk.mcp.test_mcp_agent import stdio


def model(request: dict[str, Any]) -> Any:
    """Calls ``add`` once, then answers with what it returned."""
    if request["messages"][-1]["role"] == "tool":
        return f"It is {request['messages'][-1]['content']}."
    return ToolCall.create("add", {"a": 20, "b": 22})


async def test_a_registered_agent_answers_a_consultation_with_an_mcp_tool(
    server: ScriptedOpenAIServer, config: Any
) -> None:
    server.rule = model
    mcp = stdio(allow=["add"])
    async with Hub.open() as hub:
        agent = Agent("adder", config=config, mcp_servers=[mcp])
        await hub.register(agent, Passport(name="adder"))
        assert mcp.running  # started by the registration
        user = await hub.register_human(Passport(name="user", kind="human"))
        channel = await user.open(type="consulting", target="adder")
        await user.send(channel.channel_id, "What is 20 + 22?")
        texts = []
        while True:
            env = await user.next_envelope(predicate=lambda e: e.channel_id == channel.channel_id, timeout=30)
            if env.event_type == EV_CHANNEL_CLOSED:
                break
            if env.event_type == EV_TEXT:
                texts.append(env.text)
        assert texts == ["It is 42."]
        assert "add" in {t["function"]["name"] for t in server.requests[0]["tools"]}
    assert not mcp.running  # stopped with the agent's client


async def test_an_mcp_server_that_cannot_start_fails_the_registration_before_it_registers(config: Any) -> None:
    async with Hub.open() as hub:
        broken = Agent("broken", config=config, mcp_servers=[MCPServerStdio("/nonexistent/server", name="gone")])
        with pytest.raises(MCPError, match="'gone' failed to start"):
            await hub.register(broken, Passport(name="broken"))
        # Nothing was registered: the name is still free.
        await hub.register(Agent("broken", config=config), Passport(name="broken"))
