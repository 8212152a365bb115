"""Local OpenAI-compatible servers for SDK tests: the real openai client speaks HTTP to them."""

from __future__ import annotations

from typing import Any

from agentsdk import OpenAIConfig
from agentsdk.testing import ScriptedOpenAIServer


def llm(
    servers: list[ScriptedOpenAIServer], *replies: Any, rule: Any = None
) -> tuple[ScriptedOpenAIServer, OpenAIConfig]:
    """Start a server answering ``replies`` in order (or by ``rule``) and a config pointing at it."""
    server = ScriptedOpenAIServer(replies, rule=rule)
    server.start()
    servers.append(server)
    return server, OpenAIConfig(model="scripted", base_url=server.base_url, api_key="test")
