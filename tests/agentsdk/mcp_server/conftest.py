"""A real network for ``agentnet mcp``: an in-process hub on a real port, an agent whose scripted model
answers, and the ``mcp`` package's own client driving ``agentnet mcp`` as a process (stdio or HTTP)."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from agentsdk import Agent, OpenAIConfig
from agentsdk.network import Hub, Passport
from agentsdk.testing import ScriptedOpenAIServer
from tests.openai_fixtures import config, server

__all__ = ["AGENTNET", "ANSWER", "Host", "config", "hub", "keeper", "server", "spawn_http", "stdio_host"]

AGENTNET = str(Path(sys.executable).parent / "agentnet")
"""The installed ``agentnet`` command (what an MCP host's configuration names)."""
ANSWER = "The answer is 42."


@pytest.fixture
async def hub(server: ScriptedOpenAIServer, config: OpenAIConfig) -> AsyncIterator[Hub]:
    """A hub with one agent, ``oracle``, whose model answers :data:`ANSWER` (unless a test changes ``server.rule``)."""
    server.rule = lambda request: ANSWER
    async with Hub.open() as hub:
        await hub.register(Agent("oracle", "Answer questions.", config=config), Passport(name="oracle"))
        yield hub


@dataclass
class Host:
    """An MCP host's session with ``agentnet mcp``, and the resource updates it was sent."""

    session: ClientSession
    updates: asyncio.Queue[str] = field(default_factory=asyncio.Queue)

    async def call(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Call a tool."""
        return await self.session.call_tool(name, arguments)

    async def read(self, uri: str) -> Any:
        """A resource's JSON."""
        import json

        result = await self.session.read_resource(uri)
        content = result.contents[0]
        assert isinstance(content, types.TextResourceContents)
        return json.loads(content.text)

    async def next_update(self, timeout: float = 30) -> str:
        """The URI of the next ``notifications/resources/updated``."""
        return await asyncio.wait_for(self.updates.get(), timeout)


@asynccontextmanager
async def stdio_host(hub_target: str, *args: str) -> AsyncIterator[Host]:
    """``agentnet --hub TARGET mcp ARGS`` launched by the ``mcp`` client over stdio, initialized."""
    params = StdioServerParameters(command=AGENTNET, args=["--hub", hub_target, "mcp", *args])
    updates: asyncio.Queue[str] = asyncio.Queue()
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, message_handler=keeper(updates)) as session:
            await session.initialize()
            yield Host(session, updates)


def keeper(updates: asyncio.Queue[str]) -> Any:
    """A session message handler that keeps the URI of each resource update in ``updates``."""

    async def take(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            await updates.put(str(message.params.uri))

    return take


@asynccontextmanager
async def spawn_http(hub_target: str, *args: str) -> AsyncIterator[str]:
    """``agentnet --hub TARGET mcp --http 0 ARGS`` as a process; yields its endpoint URL."""
    proc = await asyncio.create_subprocess_exec(
        AGENTNET,
        "--hub",
        hub_target,
        "mcp",
        "--http",
        "0",
        *args,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stderr is not None
    try:
        lines: list[str] = []
        async with asyncio.timeout(60):
            while not (url := _listening(lines)):
                line = (await proc.stderr.readline()).decode()
                assert line, f"agentnet mcp --http exited: {''.join(lines)}"
                lines.append(line)
        yield url
    finally:
        if proc.returncode is None:
            proc.terminate()
        await proc.wait()


def _listening(lines: list[str]) -> str:
    for line in lines:
        if match := re.search(r"listening on (\S+)", line):
            return match.group(1)
    return ""
