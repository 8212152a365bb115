"""docs/mcp.md "The network as an MCP server": its example runs and prints what the doc says, and
its MCP host configuration launches a working ``agentnet mcp``."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from agentsdk.network import Hub
from tests.doc_examples import assert_example_prints_its_text, doc_text, fenced_blocks

SECTION = doc_text("mcp.md").split("## The network as an MCP server", 1)[1]
BIN = str(Path(sys.executable).parent)
"""Where ``agentnet`` is installed (put on PATH, as a host's environment would have it)."""


def test_the_example_prints_what_the_doc_says(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": BIN + os.pathsep + os.environ.get("PATH", "")}
    assert_example_prints_its_text(SECTION, tmp_path, env)


async def test_the_host_configuration_launches_the_network(hub: Hub, tmp_path: Path) -> None:
    config = json.loads(fenced_blocks(SECTION, "json")[0])
    entry = config["mcpServers"]["agent-network"]
    assert entry["command"] == "agentnet"
    # The doc's entry, with this test's hub and a credential file of its own.
    args = [str(tmp_path / "ann.json") if a.endswith("ann.json") else a for a in entry["args"]]
    env = {**entry["env"], "AGENTNET_HUB": hub.target, "PATH": BIN + os.pathsep + os.environ.get("PATH", "")}
    server = StdioServerParameters(command=entry["command"], args=args, env=env)
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        peers = await session.call_tool("peers", {"action": "find"})
        assert [p["name"] for p in (peers.structured_content or {})["peers"]] == ["oracle"]
    assert json.loads((tmp_path / "ann.json").read_text())["name"] == "ann"
