"""A daily journal companion that remembers you across runs (persistent working memory).

The "60-second recipe" of docs/memory.md as a script: one ask per run, the user's line
from the command line. After the ask, ``WorkingMemoryAggregate`` rewrites
``/memory/working.md`` in a ``DiskKnowledgeStore`` under ``--state``; the next run (a new
process, a new Agent) reads it back with ``WorkingMemoryPolicy`` into the system prompt —
no chat history is replayed.

    python examples/journal_companion.py --state ./journal-state "I'm Ada; I walked by the river."
    python examples/journal_companion.py --state ./journal-state "Hi again!"
    # → I remember: The user wrote: I'm Ada; I walked by the river.

The working memory is a plain file: ``./journal-state/memory/working.md``.

Model: by default a scripted model (no network) that answers "I remember: <first line of
the working memory>" when its system prompt carries working memory and "Nice to meet
you! …" otherwise; as the summarizer it appends the user's lines to the memory. Set
``OPENAI_BASE_URL`` (and ``OPENAI_API_KEY``, ``OPENAI_MODEL``) to use an OpenAI-compatible
endpoint instead. ``DiskKnowledgeStore`` needs watchdog: ``pip install 'agent-network[disk]'``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

from agentsdk import Agent, KnowledgeConfig, OpenAIConfig, ScriptedConfig
from agentsdk.aggregate import AggregateTrigger, WorkingMemoryAggregate
from agentsdk.config import ModelConfig
from agentsdk.knowledge import DiskKnowledgeStore, KnowledgeStore
from agentsdk.policies import ConversationPolicy, WorkingMemoryPolicy

PROMPT = "You are a daily journal companion."
MEMORY_HEADER = "## Working memory"  # what WorkingMemoryPolicy puts above the memory in the system prompt

_EXISTING = re.compile(r"Current working memory:\n(.*?)\n\nNew conversation:\n", re.DOTALL)


def scripted_reply(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] = ()) -> str:
    """The offline model: a chat reply, or (for the summarizer call) the new working memory."""
    first = messages[0] if messages else {}
    if first.get("role") == "system":  # the journal's own turn: its system prompt comes first
        system = str(first.get("content") or "")
        if MEMORY_HEADER in system:
            memory = system.split(MEMORY_HEADER, 1)[1].strip()
            first_line = memory.splitlines()[0].lstrip("-* ").strip() if memory else ""
            return f"I remember: {first_line}"
        return "Nice to meet you! I'll remember that."
    # WorkingMemoryAggregate: one user message with the merge template (existing memory + transcript).
    prompt = str(first.get("content") or "")
    match = _EXISTING.search(prompt)
    existing = match.group(1).strip() if match else ""
    lines = [] if existing in ("", "(empty)") else existing.splitlines()
    for line in prompt.splitlines():
        if line.startswith("User: "):
            lines.append(f"- The user wrote: {line.removeprefix('User: ')}")
    return "\n".join(lines)


def pick_model() -> tuple[ModelConfig, OpenAIConfig | None]:
    """``OpenAIConfig`` when ``OPENAI_BASE_URL`` is set, else the scripted model (chat + summary call)."""
    base_url = os.environ.get("OPENAI_BASE_URL")
    if base_url:
        config = OpenAIConfig(
            model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"),
            base_url=base_url,
            api_key=os.environ.get("OPENAI_API_KEY") or "unused",
        )
        return config, config
    return ScriptedConfig([scripted_reply] * 2), None


def journal(store: KnowledgeStore, model: ModelConfig) -> Agent:
    """The recipe: aggregate working memory after every ask, inject it before every call."""
    return Agent(
        "journal",
        PROMPT,
        config=model,
        knowledge=KnowledgeConfig(
            store=store,
            aggregate=WorkingMemoryAggregate(config=model),
            aggregate_trigger=AggregateTrigger(on_end=True),
        ),
        assembly=[
            WorkingMemoryPolicy(),  # injects /memory/working.md on every model call
            ConversationPolicy(),  # then drops lifecycle events from the model's view
        ],
    )


async def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("line", nargs="+", help="what you want to tell the journal")
    parser.add_argument("--state", default="./journal-state", help="store root (default: ./journal-state)")
    args = parser.parse_args(argv)
    model, closeable = pick_model()
    try:
        async with DiskKnowledgeStore(args.state) as store:
            reply = await journal(store, model).ask(" ".join(args.line))
    finally:
        if closeable is not None:
            await closeable.aclose()
    print(reply.body)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
