"""The tools ``agentnet mcp`` offers an MCP host: the identity's network tools and ``ask``.

The network tools are the SDK's own: the five plugin tools (``peers``, ``channels``, ``tasks``,
``context``, ``delegate``: :class:`~agentsdk.network.plugin.HubTool`, run on the hub through
``CallTool``) and the two A2A tools (``discover_available_agents``, ``invoke_a2a_agent``:
:func:`~agentsdk.a2a.tools.make_a2a_tools`), with the schemas an agent's model is offered. ``ask``
is :meth:`~agentsdk.network.HumanClient.ask` (a consulting channel, the question, the reply), and
``send`` is :meth:`~agentsdk.network.HumanClient.send` (a text message into one of its channels).

A refusal is the hub's error as it came over gRPC: an MCP tool error whose text starts with the
gRPC status name, then the reason and the hub's message (``PERMISSION_DENIED (RULE_DENIED): ...``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import mcp_types as types

from agentsdk.a2a.tools import make_a2a_tools
from agentsdk.network.clients import HumanClient
from agentsdk.network.deps import AGENT_CLIENT_DEP
from agentsdk.network.plugin import HubTool
from agentsdk.tools import Tool
from netkernel.errors import ERROR_CLASSES, AgentNetError, InvalidArgument, Timeout
from netkernel.tool_schemas import PLUGIN_TOOLS

ASK_DEFAULT_TIMEOUT = 120.0
"""Seconds ``ask`` waits for the reply when the call gives no ``timeout``."""
ASK_MAX_TIMEOUT = 900.0
"""The longest ``timeout`` ``ask`` accepts (seconds)."""

ASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "agent": {"type": "string", "description": "The agent to ask: its name or agent id (peers finds them)."},
        "question": {"type": "string", "description": "The question, self-contained."},
        "timeout": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": ASK_MAX_TIMEOUT,
            "default": ASK_DEFAULT_TIMEOUT,
            "description": f"Seconds to wait for the answer (default {ASK_DEFAULT_TIMEOUT:g}).",
        },
    },
    "required": ["agent", "question"],
    "additionalProperties": False,
}
ASK_DESCRIPTION = (
    "Ask an agent on the network one question and wait for its answer: opens a consulting channel with "
    "it, sends the question and returns its reply. Fails with the reason when the agent may not be asked "
    "(a refusal), its turn failed, the channel closed first, or no answer came within `timeout` seconds."
)


SEND_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "channel_id": {"type": "string", "description": "One of your channels (the channels tool lists them)."},
        "text": {"type": "string", "description": "The message."},
    },
    "required": ["channel_id", "text"],
    "additionalProperties": False,
}
SEND_DESCRIPTION = (
    "Post a text message into one of your channels, e.g. to answer what someone asked you there (read the "
    "channel's transcript resource first). The hub's turn-taking applies: out of turn, it is refused."
)


def error_text(err: AgentNetError) -> str:
    """A hub refusal as an MCP tool error's text: the gRPC status name, the reason, the hub's message."""
    head = err.code.name if err.reason == err.code.name else f"{err.code.name} ({err.reason})"
    return f"{head}: {err.message}"


def _text_result(text: str, *, error: bool = False, structured: dict[str, Any] | None = None) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], is_error=error, structured_content=structured
    )


def _result(value: Any) -> types.CallToolResult:
    """A tool's JSON result: the text is its JSON; a JSON object is also the structured content."""
    return _text_result(json.dumps(value, ensure_ascii=False), structured=value if isinstance(value, dict) else None)


class NetworkTools:
    """The tools of one identity (a person's :class:`HumanClient`), listed and called for MCP."""

    def __init__(self, client: HumanClient) -> None:
        self.client = client
        """The identity the tools act as."""
        self.hub_tools: dict[str, HubTool] = {name: HubTool(name, model) for name, model in PLUGIN_TOOLS.items()}
        """The plugin tools, run on the hub."""
        self.a2a_tools: dict[str, Tool] = {
            t.name: t for t in make_a2a_tools(client.agent_id, lambda: client.a2a_caller)
        }
        """The A2A tools (discover and invoke A2A-enabled agents)."""

    def listing(self) -> list[types.Tool]:
        """Every tool, with its JSON schema: ask and send first, then the network tools."""
        tools = [
            types.Tool(name="ask", description=ASK_DESCRIPTION, input_schema=ASK_SCHEMA),
            types.Tool(name="send", description=SEND_DESCRIPTION, input_schema=SEND_SCHEMA),
        ]
        for tool in [*self.hub_tools.values(), *self.a2a_tools.values()]:
            tools.append(types.Tool(name=tool.name, description=tool.description, input_schema=tool.parameters))
        return tools

    async def call(self, name: str, arguments: Mapping[str, Any]) -> types.CallToolResult:
        """Run tool ``name``; a refusal or a failure is a tool error (see the module's docstring)."""
        try:
            if name == "ask":
                return await self._ask(arguments)
            if name == "send":
                return await self._send(arguments)
            if name in self.hub_tools:
                return _result(await self.hub_tools[name].run(arguments, {AGENT_CLIENT_DEP: self.client}))
            if name in self.a2a_tools:
                return await self._a2a(self.a2a_tools[name], arguments)
        except AgentNetError as err:
            return _text_result(error_text(err), error=True)
        known = ", ".join(t.name for t in self.listing())
        return _text_result(f"INVALID_ARGUMENT: there is no tool named {name!r}; the tools are {known}.", error=True)

    async def _ask(self, arguments: Mapping[str, Any]) -> types.CallToolResult:
        agent, question = arguments.get("agent"), arguments.get("question")
        timeout = arguments.get("timeout", ASK_DEFAULT_TIMEOUT)
        if not isinstance(agent, str) or not agent.strip() or not isinstance(question, str) or not question.strip():
            raise InvalidArgument("ask needs `agent` (a name or agent id) and a non-empty `question`, both strings.")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= ASK_MAX_TIMEOUT:
            raise InvalidArgument(
                f"ask's `timeout` must be a number of seconds above 0 and at most {ASK_MAX_TIMEOUT:g}."
            )
        try:
            async with asyncio.timeout(float(timeout)):  # opening the channel counts too
                reply = await self.client.ask(agent, question)
        except TimeoutError:
            raise Timeout(
                f"no answer from {agent!r} within {timeout:g}s; ask again with a longer `timeout`, or read the "
                "channel's transcript resource later (the agent may still answer there)."
            ) from None
        name = self.client.hub.name_for(reply.sender_id, default=reply.sender_id)
        return _text_result(
            reply.text,
            structured={"answer": reply.text, "agent": name, "channel_id": reply.channel_id, "seq": reply.seq},
        )

    async def _send(self, arguments: Mapping[str, Any]) -> types.CallToolResult:
        channel_id, text = arguments.get("channel_id"), arguments.get("text")
        if not isinstance(channel_id, str) or not channel_id or not isinstance(text, str) or not text.strip():
            raise InvalidArgument(
                "send needs `channel_id` (one of your channels) and a non-empty `text`, both strings."
            )
        posted = await self.client.send(channel_id, text)
        return _result({"channel_id": posted.channel_id, "seq": posted.seq, "envelope_id": posted.envelope_id})

    async def _a2a(self, tool: Tool, arguments: Mapping[str, Any]) -> types.CallToolResult:
        output = await tool.invoke(arguments)
        if output.is_error:  # the arguments did not fit the schema
            raise InvalidArgument(output.content.removeprefix("Error: "))
        value = output.value
        error = value.get("error") if isinstance(value, dict) else None
        if isinstance(error, dict):  # the A2A tools return the hub's refusal as {"error": {reason, message}}
            cls = ERROR_CLASSES.get(str(error.get("reason")), AgentNetError)
            raise cls(str(error.get("message", "")))
        if isinstance(value, list):
            return _text_result(json.dumps(value, ensure_ascii=False), structured={"agents": value})
        return _result(value)
