"""End to end over HTTP: working memory written after conversation 1 reaches conversation 2.

A real ScriptedOpenAIServer, the real openai client (OpenAIConfig) and a SqliteKnowledgeStore
file reopened by a brand-new Agent.
"""

from __future__ import annotations

from pathlib import Path

from agentsdk import OpenAIConfig
from agentsdk.knowledge import SqliteKnowledgeStore
from agentsdk.testing import ScriptedOpenAIServer
from tests.agentsdk.knowledge.journal import journal_agent


async def test_working_memory_persists_across_agents(
    tmp_path: Path, server: ScriptedOpenAIServer, config: OpenAIConfig
) -> None:
    db = tmp_path / "journal.db"
    server.add("Lovely, a walk by the river.", "- User: Ada\n- Enjoys river walks")

    async with SqliteKnowledgeStore(str(db)) as store:
        reply = await journal_agent(store, config).ask("I'm Ada. Today I walked by the river.")
        assert reply.body == "Lovely, a walk by the river."
        first_system = server.requests[0]["messages"][0]["content"]
        assert "Working memory" not in first_system
        assert [t["function"]["name"] for t in server.requests[0]["tools"]] == ["knowledge"]
        aggregation = server.requests[1]
        assert "tools" not in aggregation
        assert "I'm Ada. Today I walked by the river." in aggregation["messages"][0]["content"]

    server.add("Welcome back, Ada! Another river walk?", "- User: Ada\n- Enjoys river walks\n- Returned")
    async with SqliteKnowledgeStore(str(db)) as store:
        reply = await journal_agent(store, config).ask("Hi again, any ideas for today?")
        assert reply.body == "Welcome back, Ada! Another river walk?"
        system = server.requests[2]["messages"][0]["content"]
        assert system == (
            "You are a daily journal companion.\n\n## Working memory\n\n- User: Ada\n- Enjoys river walks"
        )
        # Conversation 2 starts fresh: no replayed chat history, only the new question.
        assert [m["role"] for m in server.requests[2]["messages"]] == ["system", "user"]
        assert await store.read("/memory/working.md") == "- User: Ada\n- Enjoys river walks\n- Returned\n"
