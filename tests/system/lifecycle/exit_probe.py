"""Opens one of our stores or clients, uses it, and returns WITHOUT closing it (test helper).

``python tests/system/lifecycle/exit_probe.py <case> <dir> [target] [token]``: the test asserts that
the interpreter exits on its own afterwards, as a script that forgets ``close()`` expects.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from agentsdk import Agent, OpenAIConfig
from agentsdk.knowledge import (
    DiskKnowledgeStore,
    MemoryKnowledgeStore,
    RedisKnowledgeStore,
    RemoteKnowledgeStore,
    SqliteKnowledgeStore,
)
from agentsdk.network import HubClient, Passport
from agentsdk.transport import HubConnection
from knowledgestore.types import ChangeEvent


async def _ignore(event: ChangeEvent) -> None:
    """A change callback that does nothing."""


async def main(case: str, directory: Path, target: str, token: str) -> None:
    """Use the store or client of ``case`` and leave it open."""
    if case in ("sqlite", "disk", "memory", "redis", "remote", "remote-cached"):
        store: (
            SqliteKnowledgeStore
            | DiskKnowledgeStore
            | MemoryKnowledgeStore
            | RedisKnowledgeStore
            | RemoteKnowledgeStore
        )
        if case == "sqlite":
            store = SqliteKnowledgeStore(directory / "k.db")
        elif case == "disk":
            store = DiskKnowledgeStore(directory / "files")
        elif case == "memory":
            store = MemoryKnowledgeStore()
        elif case == "redis":
            store = RedisKnowledgeStore(target)
        else:
            store = RemoteKnowledgeStore(target, namespace="probe", credential=token, cache=case == "remote-cached")
        await store.on_change("/", _ignore)
        await store.write("/notes/a.md", "hello")
        assert await store.read("/notes/a.md") == "hello"
        await store.namespace("other").write("/b.md", "x")
    elif case == "hub-connection":
        connection = HubConnection(target)
        await connection.channel.channel_ready()
    elif case == "human":
        hub = HubClient(HubConnection(target))
        await hub.register_human(Passport(name="probe-human", kind="human"))  # its Connect stream runs
        await hub.list_agents()
    elif case == "agent":
        hub = HubClient(HubConnection(target))
        agent = Agent("probe-agent", config=OpenAIConfig(model="m", base_url="http://127.0.0.1:9", api_key="k"))
        await hub.register(agent)
        await hub.list_agents()
    print("returned", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2]), *[*sys.argv[3:5], "", ""][:2]))
