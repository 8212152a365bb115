"""An agentsdk agent in a process of its own, for the mixed AG2 / agentsdk tests: connects to the hub
given as argv[1], registers an agent named argv[2] whose scripted model answers argv[3:] in turn,
prints its agent id, and serves until stdin closes."""

from __future__ import annotations

import asyncio
import sys

from agentsdk import Agent, ScriptedConfig
from agentsdk.network import Passport
from agentsdk.network.hub_client import HubClient


async def main() -> None:
    """Register, say who we are on stdout, then take turns until stdin closes."""
    target, name, *replies = sys.argv[1:]
    async with HubClient.connect(target) as hc:
        client = await hc.register(Agent(name, config=ScriptedConfig(replies)), Passport(name=name))
        print(client.agent_id, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


if __name__ == "__main__":
    asyncio.run(main())
