"""Aggregation: extracting knowledge from a conversation into the store.

An :class:`AggregateStrategy` reads events and writes files; the agent runs it at the
end of a turn when its :class:`AggregateTrigger` fires (``KnowledgeConfig(aggregate=...,
aggregate_trigger=...)``). Two built-ins, each calling a (preferably cheap) model:

* :class:`WorkingMemoryAggregate` — rewrites the rolling ``/memory/working.md``
  (read back by ``WorkingMemoryPolicy``);
* :class:`ConversationSummaryAggregate` — writes ``/memory/conversations/{ts}_{stream_id}.md``
  (read back by ``EpisodicMemoryPolicy``).

Strategies report model usage with :meth:`StrategyContext.add_usage`; it ends up on
``AggregationCompleted.usage`` (and ``CompactionCompleted.usage`` for compaction).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from agentsdk.config import ModelConfig
from agentsdk.events import (
    BaseEvent,
    CompactionSummary,
    ImageInput,
    ModelMessage,
    ModelRequest,
    SystemPrompt,
    TextInput,
    ToolCallEvent,
    ToolResultEvent,
    Usage,
)
from agentsdk.stream import Stream
from knowledgestore.types import KnowledgeStore

if TYPE_CHECKING:
    from agentsdk.agent import Agent

__all__ = [
    "DEFAULT_SUMMARY_PROMPT",
    "DEFAULT_WORKING_MEMORY_PROMPT",
    "AggregateStrategy",
    "AggregateTrigger",
    "ConversationSummaryAggregate",
    "StrategyContext",
    "WorkingMemoryAggregate",
    "image_label",
    "render_transcript",
    "summarize",
]

DEFAULT_WORKING_MEMORY_PROMPT = """You maintain the working memory of an assistant: a short markdown \
document of what it must remember about the user and the ongoing work across conversations.

Current working memory:
{existing}

New conversation:
{events}

Rewrite the working memory to include what matters from the new conversation. Keep important \
existing context, remove stale information, be concise. Reply with the new document only."""
"""Default merge template of :class:`WorkingMemoryAggregate` (``{existing}`` / ``{events}``)."""

DEFAULT_SUMMARY_PROMPT = """Summarize this conversation for the assistant's future reference: \
who wanted what, what was decided or done, and what is still open. Be concise; reply with the \
summary only.

Conversation:
{events}"""
"""Default template of :class:`ConversationSummaryAggregate` (``{events}``)."""


@dataclass(slots=True)
class StrategyContext:
    """What an aggregation or compaction strategy may consult besides the events and store."""

    agent: Agent
    """The agent whose turn ended."""
    stream: Stream
    """The conversation stream (strategies must not modify it)."""
    dependencies: dict[Any, Any] = field(default_factory=dict)
    """The turn's dependencies."""
    turn: int = 0
    """How many turns (asks) this agent has completed, this one included."""
    usage: Usage = field(default_factory=Usage)
    """Model usage the strategy reported (see :meth:`add_usage`)."""

    @property
    def stream_id(self) -> str:
        """The stream's id (used in file names)."""
        return self.stream.stream_id

    def add_usage(self, usage: Usage | None) -> None:
        """Record tokens a strategy spent (reported on the ``*Completed`` event)."""
        if usage is not None:
            self.usage = self.usage + usage


@runtime_checkable
class AggregateStrategy(Protocol):
    """Extracts information from ``events`` and persists it in ``store``."""

    async def aggregate(self, events: list[BaseEvent], ctx: StrategyContext, store: KnowledgeStore) -> None:
        """Read ``events`` (those since the last aggregation of this stream) and write to ``store``."""
        ...


@dataclass(frozen=True, slots=True)
class AggregateTrigger:
    """When aggregation runs, checked at the end of every turn (``Agent.ask``).

    It fires when *any* enabled condition holds; ``AggregateTrigger()`` never fires.
    A turn is one ``ask``; ``on_end=True`` therefore runs after every ask.
    """

    every_n_turns: int | None = None
    """Fire after every N-th turn of the agent."""
    every_n_events: int | None = None
    """Fire once at least N events arrived since the stream's last aggregation."""
    on_end: bool = False
    """Fire at the end of every turn (one summarizer call per turn — use with care)."""

    def __post_init__(self) -> None:
        for name in ("every_n_turns", "every_n_events"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1 (or None)")

    @property
    def enabled(self) -> bool:
        """Whether any condition is set."""
        return self.on_end or self.every_n_turns is not None or self.every_n_events is not None

    def should_run(self, *, turn: int, new_events: int) -> bool:
        """Whether to aggregate after turn number ``turn`` (1-based) with ``new_events`` unaggregated events."""
        if new_events == 0:
            return False
        if self.on_end:
            return True
        if self.every_n_turns is not None and turn % self.every_n_turns == 0:
            return True
        return self.every_n_events is not None and new_events >= self.every_n_events


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + " …"


def image_label(image: ImageInput) -> str:
    """How a transcript shows an image: ``[image <url>]``, or ``[image: <media type>, <n> bytes]``
    for inline data (its bytes are never put in a summarizer prompt)."""
    if image.url:
        return f"[image {_clip(image.url, 200)}]"
    return f"[image: {image.media_type or 'unknown type'}, {len(image.data)} bytes]"


def render_transcript(events: Sequence[BaseEvent], *, max_chars_per_event: int = 2_000) -> str:
    """Render conversation events as a plain-text transcript for a summarizer prompt.

    Lifecycle and observer events are skipped; long texts are clipped.
    """
    lines: list[str] = []
    for event in events:
        if isinstance(event, ModelRequest):
            for part in event.parts:
                if isinstance(part, TextInput):
                    lines.append(f"User: {_clip(part.text, max_chars_per_event)}")
                elif isinstance(part, ImageInput):
                    lines.append(f"User: {image_label(part)}")
                else:
                    lines.append(f"Tool result ({part.name}): {_clip(part.content, max_chars_per_event)}")
        elif isinstance(event, ImageInput):
            lines.append(f"User: {image_label(event)}")
        elif isinstance(event, TextInput):
            lines.append(f"User: {_clip(event.text, max_chars_per_event)}")
        elif isinstance(event, ModelMessage):
            if event.text:
                lines.append(f"Assistant: {_clip(event.text, max_chars_per_event)}")
            for call in event.tool_calls:
                args = json.dumps(call.arguments, ensure_ascii=False)
                lines.append(f"Assistant called {call.name}({_clip(args, max_chars_per_event)})")
        elif isinstance(event, ToolResultEvent):
            label = "Tool error" if event.is_error else "Tool result"
            lines.append(f"{label} ({event.name}): {_clip(event.content, max_chars_per_event)}")
        elif isinstance(event, CompactionSummary):
            lines.append(f"Summary of {event.events_dropped} earlier events: {event.summary}")
        elif isinstance(event, SystemPrompt):
            lines.append(f"System: {_clip(event.text, max_chars_per_event)}")
        elif isinstance(event, ToolCallEvent):
            continue  # the ModelMessage already shows the call
    return "\n".join(lines)


def _fill(template: str, **values: str) -> str:
    # str.replace, not str.format: templates may contain other braces (JSON examples, …).
    for key, value in values.items():
        template = template.replace("{" + key + "}", value)
    return template


async def summarize(config: ModelConfig, prompt: str, ctx: StrategyContext) -> str:
    """One model call with ``prompt`` as the user message; records usage on ``ctx``; returns the text."""
    message = await config.complete([{"role": "user", "content": prompt}], [])
    ctx.add_usage(message.usage)
    return message.text.strip()


class WorkingMemoryAggregate:
    """Rewrites the rolling working-memory file from its old content and the new events.

    Destructive by design: every run replaces ``/memory/working.md`` with the model's
    merge of ``{existing}`` (the current file, or ``(empty)``) and ``{events}`` (a
    transcript of the new events). Override the template with ``prompt=``.
    """

    def __init__(
        self, config: ModelConfig, prompt: str = DEFAULT_WORKING_MEMORY_PROMPT, *, path: str = "/memory/working.md"
    ) -> None:
        self.config = config
        """The summarizer model (a cheaper one than the agent's is fine)."""
        self.prompt = prompt
        """The merge template (``{existing}`` and ``{events}`` are filled in)."""
        self.path = path
        """Where the working memory lives."""

    async def aggregate(self, events: list[BaseEvent], ctx: StrategyContext, store: KnowledgeStore) -> None:
        """Merge the transcript of ``events`` into the working-memory file."""
        transcript = render_transcript(events)
        if not transcript:
            return
        existing = (await store.read(self.path)).strip() if await store.exists(self.path) else ""
        text = await summarize(self.config, _fill(self.prompt, existing=existing or "(empty)", events=transcript), ctx)
        if text:
            await store.write(self.path, text + "\n")


class ConversationSummaryAggregate:
    """Writes a summary of the new events to ``/memory/conversations/{ts}_{stream_id}.md``.

    ``ts`` is the UTC time of the run (``20250131T120000123456Z``), so names sort by age.
    """

    def __init__(
        self,
        config: ModelConfig,
        prompt: str = DEFAULT_SUMMARY_PROMPT,
        *,
        directory: str = "/memory/conversations/",
    ) -> None:
        self.config = config
        """The summarizer model."""
        self.prompt = prompt
        """The template (``{events}`` is filled in)."""
        self.directory = directory.rstrip("/") + "/"
        """Where episodes are written."""

    async def aggregate(self, events: list[BaseEvent], ctx: StrategyContext, store: KnowledgeStore) -> None:
        """Summarize ``events`` into a new episode file."""
        transcript = render_transcript(events)
        if not transcript:
            return
        text = await summarize(self.config, _fill(self.prompt, events=transcript), ctx)
        ts = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        await store.write(f"{self.directory}{ts}_{ctx.stream_id}.md", text + "\n")
