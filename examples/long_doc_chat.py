"""Chat through a long document: assembly policies cap what the model sees, compaction shrinks the stream.

A synthetic document (generated, deterministic — no downloads) is fed part by part, one
ask per part, on ONE ``Stream``. Two mechanisms keep the model's input bounded:

* ``KnowledgeConfig(compact=..., compact_trigger=CompactTrigger(max_events=M))`` shrinks
  the stream itself whenever it grows past M events — ``SummarizeCompact`` (default; one
  summarizer call, the dropped events become a ``CompactionSummary``) or
  ``TailWindowCompact`` (``--compact tail``; no model call);
* ``assembly=[ConversationPolicy(), SlidingWindowPolicy(max_events=W)]`` (or
  ``--policy budget`` → ``TokenBudgetPolicy``) caps what each model call sees.

    python examples/long_doc_chat.py
    python examples/long_doc_chat.py --parts 30 --compact tail --compact-at 10 --keep 4
    python examples/long_doc_chat.py --policy budget --budget 1200

Prints, per model call, how many events the model saw, and every compaction observed
(``CompactionCompleted``: events before → after), then a one-line summary:
``calls=N max_seen=K window=W compactions=C``. The output is deterministic with the
default scripted model. Set ``OPENAI_BASE_URL`` (and ``OPENAI_API_KEY``, ``OPENAI_MODEL``)
to use an OpenAI-compatible endpoint instead.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import sys
from collections.abc import Sequence
from typing import Any

from agentsdk import Agent, KnowledgeConfig, OpenAIConfig, ScriptedConfig, Stream
from agentsdk.assembly import AssemblyContext, AssemblyPolicy
from agentsdk.compact import CompactStrategy, CompactTrigger, SummarizeCompact, TailWindowCompact
from agentsdk.config import ModelConfig
from agentsdk.events import BaseEvent, CompactionCompleted, CompactionFailed, CompactionSummary
from agentsdk.knowledge import MemoryKnowledgeStore
from agentsdk.policies import ConversationPolicy, SlidingWindowPolicy, TokenBudgetPolicy

PROMPT = "You read a long report one part at a time. Acknowledge each part in one short line."

_WORDS = (
    "river harbour ledger signal quarry lantern meadow turbine archive compass orchard beacon "
    "furnace glacier canyon market bridge reactor library vineyard"
).split()

_PART = re.compile(r"Part (\d+)/(\d+)")
_RANGE = re.compile(r"parts (\d+)-(\d+)")


def make_document(parts: int, sentences: int = 12, seed: int = 7) -> list[str]:
    """``parts`` deterministic sections of pseudo-prose (about 1 KB each)."""
    rng = random.Random(seed)
    out = []
    for number in range(1, parts + 1):
        body = " ".join(
            " ".join(rng.choice(_WORDS) for _ in range(rng.randint(8, 14))).capitalize() + "." for _ in range(sentences)
        )
        out.append(f"## Section {number}\n\n{body}")
    return out


def scripted_reply(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] = ()) -> str:
    """The offline model: acknowledges the newest part, or (as the summarizer) names the parts read."""
    if messages and messages[0].get("role") == "system":  # a reader call
        last = str(messages[-1].get("content") or "")
        match = _PART.search(last)
        return f"Noted part {match.group(1)}." if match else "Noted."
    # SummarizeCompact: one user message with the transcript of the dropped events (earlier summaries included).
    text = str(messages[0].get("content") or "") if messages else ""
    numbers = [int(m.group(1)) for m in _PART.finditer(text)]
    numbers += [int(n) for m in _RANGE.finditer(text) for n in m.groups()]
    if not numbers:
        return "Nothing read yet."
    return f"The reader has gone through parts {min(numbers)}-{max(numbers)} of the report."


class SeenRecorder:
    """Last in the chain: records how many events (and which kinds) each model call sees."""

    def __init__(self) -> None:
        self.calls: list[list[BaseEvent]] = []
        """The events of every model call, in order."""

    async def apply(
        self, prompts: list[str], events: list[BaseEvent], context: AssemblyContext
    ) -> tuple[list[str], list[BaseEvent]]:
        self.calls.append(list(events))
        return prompts, events


def pick_model(max_calls: int) -> tuple[ModelConfig, OpenAIConfig | None]:
    """``OpenAIConfig`` when ``OPENAI_BASE_URL`` is set, else the scripted model."""
    base_url = os.environ.get("OPENAI_BASE_URL")
    if base_url:
        config = OpenAIConfig(
            model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"),
            base_url=base_url,
            api_key=os.environ.get("OPENAI_API_KEY") or "unused",
        )
        return config, config
    return ScriptedConfig([scripted_reply] * max_calls), None


async def run(args: argparse.Namespace) -> int:
    document = make_document(args.parts)
    model, closeable = pick_model(max_calls=2 * args.parts + 2)
    compact: CompactStrategy = (
        TailWindowCompact(target=args.keep) if args.compact == "tail" else SummarizeCompact(args.keep, config=model)
    )
    reducer: AssemblyPolicy = (
        TokenBudgetPolicy(max_tokens=args.budget) if args.policy == "budget" else SlidingWindowPolicy(args.window)
    )
    seen = SeenRecorder()
    agent = Agent(
        "reader",
        PROMPT,
        config=model,
        knowledge=KnowledgeConfig(
            store=MemoryKnowledgeStore(),
            expose_tool=False,
            write_event_log=False,
            compact=compact,
            compact_trigger=CompactTrigger(max_events=args.compact_at),
        ),
        assembly=[ConversationPolicy(), reducer, seen],
    )
    compactions: list[str] = []

    def on_event(event: BaseEvent) -> None:
        if isinstance(event, CompactionCompleted):
            compactions.append(f"{event.events_before} -> {event.events_after} events")
            print(f"  compaction #{len(compactions)}: {event.events_before} -> {event.events_after} events")
        elif isinstance(event, CompactionFailed):
            print(f"  compaction failed: {event.error}")

    agent.subscribe(on_event)
    limit = f"window={args.window}" if args.policy == "window" else f"budget={args.budget} tokens"
    print(f"document: {len(document)} parts, {sum(map(len, document))} chars; {limit}; compact={args.compact}")
    stream = Stream()
    try:
        for number, part in enumerate(document, start=1):
            reply = await agent.ask(f"Part {number}/{len(document)} of the report:\n\n{part}", stream=stream)
            events = seen.calls[-1]
            summaries = sum(isinstance(e, CompactionSummary) for e in events)
            note = f" (incl. {summaries} summary)" if summaries else ""
            print(f"ask {number:02d}: model saw {len(events)} events{note}; stream has {len(stream.events)}")
            print(f"  reply: {reply.body}")
    finally:
        if closeable is not None:
            await closeable.aclose()
    summary = next((e for e in reversed(stream.events) if isinstance(e, CompactionSummary)), None)
    if summary is not None:
        print(f"latest summary ({summary.events_dropped} events): {summary.summary}")
    max_seen = max(len(events) for events in seen.calls)
    print(f"calls={len(seen.calls)} max_seen={max_seen} {limit} compactions={len(compactions)}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--parts", type=int, default=16, help="document parts, one ask each (default 16)")
    parser.add_argument("--policy", choices=["window", "budget"], default="window", help="assembly reduction")
    parser.add_argument("--window", type=int, default=8, help="SlidingWindowPolicy max_events (default 8)")
    parser.add_argument("--budget", type=int, default=1500, help="TokenBudgetPolicy max_tokens (default 1500)")
    parser.add_argument("--compact", choices=["summarize", "tail"], default="summarize", help="compaction strategy")
    parser.add_argument("--compact-at", type=int, default=12, help="CompactTrigger max_events (default 12)")
    parser.add_argument("--keep", type=int, default=4, help="events kept by compaction (default 4)")
    return asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
