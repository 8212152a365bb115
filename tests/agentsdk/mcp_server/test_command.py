"""``agentnet mcp``'s refusals to start: each says what was wrong and what to do, and registers nothing."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

from agentsdk import Agent, OpenAIConfig
from agentsdk.network import Hub, Passport
from tests.agentsdk.mcp_server.conftest import AGENTNET


async def agentnet(*args: str) -> subprocess.CompletedProcess[str]:
    """``agentnet ARGS`` as a process (off the event loop, which serves the hub meanwhile)."""
    return await asyncio.to_thread(subprocess.run, [AGENTNET, *args], capture_output=True, text=True, timeout=60)


async def test_without_a_credential_or_register_it_says_how_to_get_one(hub: Hub, tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    run = await agentnet("--hub", hub.target, "mcp", "--credential-file", str(missing))
    assert run.returncode == 1
    assert "no credential in" in run.stderr and "--register NAME" in run.stderr
    assert not missing.exists()

    run = await agentnet("--hub", hub.target, "mcp")
    assert run.returncode == 2 and "agentnet mcp needs --credential-file FILE" in run.stderr


async def test_an_agent_credential_is_not_served(hub: Hub, config: OpenAIConfig, tmp_path: Path) -> None:
    credential = tmp_path / "bot.json"
    bot = await hub.register(Agent("bot", config=config), Passport(name="bot"), credential_file=credential)
    await bot.disconnect()
    run = await agentnet("--hub", hub.target, "mcp", "--credential-file", str(credential))
    assert run.returncode == 1
    assert "an identity of kind agent" in run.stderr.replace("\n", " ")


async def test_a_credential_file_of_another_name_is_not_reused(hub: Hub, tmp_path: Path) -> None:
    credential = tmp_path / "ann.json"
    ann = await hub.register_human(Passport(name="ann", kind="human"), credential_file=credential)
    await ann.disconnect()
    run = await agentnet("--hub", hub.target, "mcp", "--credential-file", str(credential), "--register", "bob")
    assert run.returncode == 1
    assert "not 'bob'" in run.stderr.replace("\n", " ")
    assert "bob" not in {a.name for a in await hub.list_agents()}
