"""The A2A tools an LLM uses to find and call other agents on its own.

``discover_available_agents()`` and ``invoke_a2a_agent(agent_id, message, custom_headers="")``
return JSON; failures (A2A unavailable, bad header JSON, refusals by the hub) come back
as a structured error ``{"error": {"reason": ..., "message": ...}}`` instead of raising,
so the model can read and react to them. ``request_input(question)`` lets the model
answer an A2A call with "input-required".
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from agentsdk.a2a.context import current_dispatch
from agentsdk.tools import Tool
from netkernel.errors import AgentNetError

if TYPE_CHECKING:
    from agentsdk.a2a.client import AgentToAgent


def tool_error(reason: str, message: str) -> dict[str, Any]:
    """The structured error an A2A tool returns instead of raising."""
    return {"error": {"reason": reason, "message": message}}


_UNAVAILABLE = tool_error(
    "UNAVAILABLE", "agent-to-agent calls are not available to this agent right now (not connected, or A2A disabled)."
)


_BAD_HEADERS = 'custom_headers must be a JSON object of strings, e.g. \'{"x-tenant": "acme"}\' (or "" for none).'


def make_a2a_tools(self_id: str, a2a: Callable[[], AgentToAgent | None]) -> list[Tool]:
    """The two LLM tools over the client ``a2a()`` returns at call time (None = unavailable)."""

    async def discover_available_agents() -> Any:
        """List the agents you can call with invoke_a2a_agent: agent_id, name, description, skills,
        capabilities and input modes of each (you are not listed)."""
        client = a2a()
        if client is None:
            return _UNAVAILABLE
        try:
            agents = await client.discover_agents()
        except AgentNetError as err:
            return tool_error(err.reason, err.message)
        return [asdict(agent) for agent in agents if agent.agent_id != self_id]

    async def invoke_a2a_agent(agent_id: str, message: str, custom_headers: str = "") -> Any:
        """Call another agent and wait for its answer; returns status ("completed", "input-required"
        or "failed"), result and error.

        Args:
            agent_id: The agent_id from discover_available_agents.
            message: What the agent should do, self-contained.
            custom_headers: Optional JSON object of string headers for the agent, e.g. '{"x-tenant": "acme"}'.
        """
        headers: dict[str, str] = {}
        if custom_headers.strip():
            try:
                parsed = json.loads(custom_headers)
            except json.JSONDecodeError as exc:
                return tool_error(
                    "INVALID_ARGUMENT", f"custom_headers is not valid JSON ({exc.msg}); pass e.g. '{{}}'."
                )
            if not isinstance(parsed, dict) or not all(isinstance(v, str) for v in parsed.values()):
                return tool_error(
                    "INVALID_ARGUMENT",
                    'custom_headers must be a JSON object of strings, e.g. \'{"x-tenant": "acme"}\'.',
                )
            headers = parsed
        client = a2a()
        if client is None:
            return _UNAVAILABLE
        try:
            response = await client.invoke_agent(agent_id, message, custom_headers=headers)
        except AgentNetError as err:
            return tool_error(err.reason, err.message)
        return asdict(response)

    return [Tool(discover_available_agents), Tool(invoke_a2a_agent)]


async def request_input(question: str) -> str:
    """Ask the agent that called you for more input instead of answering: your answer becomes
    this question, with status "input-required". Use it when you cannot finish without it.

    Args:
        question: What you need to know (or who must approve), self-contained.
    """
    dispatch = current_dispatch()
    if dispatch is None:
        return "Error: request_input only works while answering a call from another agent."
    dispatch.input_question = question
    return "Noted: the caller will receive your question as your answer. End your turn now."


REQUEST_INPUT_TOOL = Tool(request_input)
"""Offered to the model by the default handler while it answers an A2A call."""
