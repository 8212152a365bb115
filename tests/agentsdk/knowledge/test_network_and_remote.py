"""Memory beyond a single in-process agent.

(a) An agent registered on a real hub answers a human in a consulting channel: its
    WorkingMemoryPolicy puts /memory/working.md into the system prompt the model
    (a ScriptedOpenAIServer, over HTTP) receives, and aggregation after the hub turn
    rewrites it.
(b) The KnowledgeConfig aggregation flow with a RemoteKnowledgeStore in front of the
    real knowledge service (in-process, port 0): working.md lands in the remote store
    and a second agent on a fresh connection gets it in its prompt.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentsdk import Agent, KnowledgeConfig, OpenAIConfig
from agentsdk.aggregate import AggregateTrigger, WorkingMemoryAggregate
from agentsdk.knowledge import MemoryKnowledgeStore, RemoteKnowledgeStore, SqliteKnowledgeStore
from agentsdk.network import EV_TEXT, Hub, Passport
from agentsdk.policies import WorkingMemoryPolicy
from agentsdk.testing import ScriptedOpenAIServer
from tests.agentsdk.knowledge.journal import journal_agent
from tests.knowledgesvc.helpers import TOKEN, serve_in_process

MEMORY = "- The user is Ada.\n- Ada prefers metric units.\n"


def is_summary_call(request: dict[str, Any]) -> bool:
    """WorkingMemoryAggregate's call: a single user message with the merge template, no tools."""
    return request["messages"][0]["role"] == "user" and "tools" not in request


@pytest.fixture
async def hub() -> AsyncIterator[Hub]:
    async with Hub.open() as h:
        yield h


async def test_hub_agent_gets_working_memory_in_its_system_prompt(hub: Hub) -> None:
    def rule(request: dict[str, Any]) -> str:
        if is_summary_call(request):
            return "- The user is Ada.\n- Ada prefers metric units.\n- Asked about the marathon distance."
        return "Ada, a marathon is 42.195 km."

    async with ScriptedOpenAIServer(rule=rule) as server:
        config = OpenAIConfig(model="scripted", base_url=server.base_url, api_key="test", max_retries=0, timeout=10)
        store = MemoryKnowledgeStore()
        await store.write("/memory/working.md", MEMORY)
        agent = Agent(
            "coach",
            "You are a running coach.",
            config=config,
            knowledge=KnowledgeConfig(
                store=store,
                expose_tool=False,
                aggregate=WorkingMemoryAggregate(config=config),
                aggregate_trigger=AggregateTrigger(on_end=True),
            ),
            assembly=[WorkingMemoryPolicy()],
        )
        try:
            await hub.register(agent, Passport(name="coach"))
            user = await hub.register_human(Passport(name="u", kind="human"))
            ch = await user.open(type="consulting", target="coach")
            await user.send(ch.channel_id, "How long is a marathon?")
            reply = await user.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=20)
            assert reply.text == "Ada, a marathon is 42.195 km."

            chat = server.requests[0]
            system = chat["messages"][0]
            assert system["role"] == "system"
            assert system["content"].startswith("You are a running coach.")
            assert "## Working memory\n\n- The user is Ada.\n- Ada prefers metric units." in system["content"]
            assert chat["messages"][-1]["content"].endswith("How long is a marathon?")
            tool_names = {t["function"]["name"] for t in chat["tools"]}
            assert "say" in tool_names and "knowledge" not in tool_names  # expose_tool=False

            # Aggregation ran at the end of the hub turn (before the reply was sent).
            assert is_summary_call(server.requests[1])
            assert "How long is a marathon?" in server.requests[1]["messages"][0]["content"]
            assert "- Asked about the marathon distance." in await store.read("/memory/working.md")
        finally:
            await config.aclose()


async def test_working_memory_lands_in_a_remote_knowledge_store(tmp_path: Path) -> None:
    def rule(request: dict[str, Any]) -> str:
        if is_summary_call(request):
            return "- User: Ada\n- Enjoys river walks"
        return "Welcome back, Ada!" if "## Working memory" in request["messages"][0]["content"] else "Lovely!"

    async with (
        ScriptedOpenAIServer(rule=rule) as server,
        SqliteKnowledgeStore(tmp_path / "service.db") as backend,
        serve_in_process(backend) as target,
    ):
        config = OpenAIConfig(model="scripted", base_url=server.base_url, api_key="test", max_retries=0, timeout=10)
        try:
            async with RemoteKnowledgeStore(target, namespace="ns1", credential=TOKEN) as remote:
                reply = await journal_agent(remote, config).ask("I'm Ada. Today I walked by the river.")
                assert reply.body == "Lovely!"
                assert [type(e).__name__ for e in reply.events if "Aggregation" in type(e).__name__] == [
                    "AggregationStarted",
                    "AggregationCompleted",
                ]
            # The file is in the service's backend, under the namespace the client used.
            served = backend.namespace("ns1")
            assert await served.read("/memory/working.md") == "- User: Ada\n- Enjoys river walks\n"
            assert await served.exists("/memory/SKILL.md")  # the default bootstrap went remote too

            # A new agent on a fresh connection gets the memory from the service.
            async with RemoteKnowledgeStore(target, namespace="ns1", credential=TOKEN) as remote:
                reply = await journal_agent(remote, config).ask("Hi again")
            assert reply.body == "Welcome back, Ada!"
            chat = server.requests[2]
            assert chat["messages"][0]["content"] == (
                "You are a daily journal companion.\n\n## Working memory\n\n- User: Ada\n- Enjoys river walks"
            )
            assert [m["role"] for m in chat["messages"]] == ["system", "user"]
        finally:
            await config.aclose()
