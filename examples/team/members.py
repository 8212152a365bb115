"""The team's two Python members: an analyst with a tool and a scribe whose memory lives in the knowledge service.

* ``<team>-analyst`` answers every turn by calling its ``estimate`` tool (a plain Python
  function; the model asks for it, the SDK runs it and hands the result back) and
  stating the result.
* ``<team>-scribe`` keeps a working memory (``/memory/working.md``) in the knowledge
  service, namespace ``<team>-scribe``: after each of its turns ``WorkingMemoryAggregate``
  rewrites it, and ``WorkingMemoryPolicy`` puts it into the scribe's system prompt on the
  next turn, in this process or any later one.

Both wait for work until Ctrl-C (SIGINT or SIGTERM):

    python examples/team/members.py --hub 127.0.0.1:50051 --knowledge 127.0.0.1:50052 \\
        --knowledge-token-file data/knowledge.token

Their credentials are kept in ``--state-dir`` (``data/team``): started again, it resumes the
same two identities. It prints ``ready <names>`` once both are registered and connected, and one line per tool
call (``tool estimate(...) -> ...``) and per memory write (``memory <namespace><path>``).

Model: by default a scripted model per member (no network, see :func:`analyst_reply` and
:func:`scribe_reply`); set ``OPENAI_BASE_URL`` (and ``OPENAI_API_KEY``, ``OPENAI_MODEL``)
to use an OpenAI-compatible endpoint instead.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from agentsdk import Agent, KnowledgeConfig, OpenAIConfig, ScriptedConfig, tool
from agentsdk.aggregate import AggregateTrigger, WorkingMemoryAggregate
from agentsdk.config import ModelConfig
from agentsdk.events import ToolCall
from agentsdk.knowledge import RemoteKnowledgeStore
from agentsdk.network import HubClient, Passport
from agentsdk.policies import ConversationPolicy, WorkingMemoryPolicy

MEMORY_HEADER = "## Working memory"  # what WorkingMemoryPolicy puts above the memory in the system prompt
_NEW_LINES = re.compile(r"New conversation:\n(.*?)\n\nRewrite the working memory", re.DOTALL)
_EXISTING = re.compile(r"Current working memory:\n(.*?)\n\nNew conversation:\n", re.DOTALL)
SCRIPTED_TURNS = 1000  # scripted replies per member: far more turns than a demo takes


@tool
def estimate(task: Annotated[str, Field(description="What is to be estimated, in a few words.")]) -> str:
    """Estimate the effort of a task in person-days (a deterministic rule of thumb: 1 day per 2 words)."""
    result = f"{max(1, len(task.split()) // 2)} person-days"
    print(f"tool estimate({task!r}) -> {result}", flush=True)
    return result


def analyst_reply(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] = ()) -> str | ToolCall:
    """The analyst's offline model: call ``estimate`` on the turn's input, then state its result."""
    last = messages[-1]
    if last.get("role") == "tool":
        return f"analyst: my estimate is {last.get('content')}."
    # The turn's input is what the previous speaker said, as "[name]: text": estimate the text.
    topic = re.sub(r"^\[[^\]]*\]: (Topic: )?", "", str(last.get("content") or "").splitlines()[-1])[:80]
    return ToolCall.create("estimate", {"task": topic})


def scribe_reply(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] = ()) -> str:
    """The scribe's offline model: its own turn (system prompt first) or the summarizer's call."""
    first = messages[0] if messages else {}
    if first.get("role") == "system":
        system = str(first.get("content") or "")
        if MEMORY_HEADER in system:
            notes = [n.lstrip("-* ").strip() for n in system.split(MEMORY_HEADER, 1)[1].strip().splitlines()]
            return "scribe: from my notes: " + " | ".join(n for n in notes if n)
        return "scribe: noted; I will remember this discussion."
    # WorkingMemoryAggregate's call: the existing memory and the new conversation in one message.
    prompt = str(first.get("content") or "")
    existing = _EXISTING.search(prompt)
    kept = [] if existing is None or existing.group(1).strip() in ("", "(empty)") else existing.group(1).splitlines()
    new = _NEW_LINES.search(prompt)
    # What the others said (the scribe's own turns are the "Assistant:" lines), one note each.
    heard = [line.removeprefix("User: ") for line in (new.group(1) if new else "").splitlines()]
    notes = [f"- {line[:160]}" for line in heard if line.strip() and not line.startswith("Assistant: ")]
    return "\n".join((kept + notes)[-8:])


def model(rule: Any) -> ModelConfig:
    """``OpenAIConfig`` when ``OPENAI_BASE_URL`` is set, else the scripted ``rule``."""
    base_url = os.environ.get("OPENAI_BASE_URL")
    if base_url:
        return OpenAIConfig(
            model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"),
            base_url=base_url,
            api_key=os.environ.get("OPENAI_API_KEY") or "unused",
        )
    return ScriptedConfig([rule] * SCRIPTED_TURNS)


async def main(argv: Sequence[str] | None = None) -> int:
    """Register the analyst and the scribe and serve their turns until SIGINT/SIGTERM."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hub", default="127.0.0.1:50051", help="the hub's host:port (make serve: 127.0.0.1:50051)")
    parser.add_argument("--knowledge", default="127.0.0.1:50052", help="the knowledge service's host:port")
    parser.add_argument(
        "--knowledge-token-file", type=Path, default=Path("data/knowledge.token"), help="its bearer token"
    )
    parser.add_argument("--team", default="team", help="prefix of the members' names (unique on a shared hub)")
    parser.add_argument(
        "--state-dir", type=Path, default=Path("data/team"), help="the members' credential files (a restart resumes)"
    )
    args = parser.parse_args(argv)
    token = args.knowledge_token_file.read_text().strip()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    namespace = f"{args.team}-scribe"
    memory = RemoteKnowledgeStore(args.knowledge, namespace=namespace, credential=token)
    async with memory, HubClient.connect(args.hub) as hc:
        # The service tells every watcher about each change: print the scribe's memory writes.
        await memory.on_change(
            "/memory", lambda change: print(f"memory {namespace}{change.path} v{change.version}", flush=True)
        )
        analyst = Agent(
            f"{args.team}-analyst",
            "You are the team's analyst. Estimate every task with the estimate tool, then state the estimate.",
            config=model(analyst_reply),
            tools=[estimate],
        )
        scribe = Agent(
            f"{args.team}-scribe",
            "You are the team's scribe. Keep track of what the team said and answer from your notes.",
            config=model(scribe_reply),
            knowledge=KnowledgeConfig(
                store=memory,
                aggregate=WorkingMemoryAggregate(config=model(scribe_reply)),
                aggregate_trigger=AggregateTrigger(on_end=True),
            ),
            assembly=[WorkingMemoryPolicy(), ConversationPolicy()],
        )
        # With a credential file, a restart resumes the same identity (and its cursors) instead of
        # registering the name again, which the hub would refuse.
        for agent, description in ((analyst, "estimates with a tool"), (scribe, "remembers, in the knowledge service")):
            await hc.register(
                agent,
                Passport(name=agent.name, description=description),
                credential_file=args.state_dir / f"{agent.name}.credential",
            )
        print(f"ready {analyst.name} {scribe.name}", flush=True)
        await stop.wait()
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(asyncio.run(main()))
