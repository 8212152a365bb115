"""Compaction: shortening the stream's history itself (not just what the model sees).

A :class:`CompactStrategy` returns the events that replace the stream's history; the
agent runs it before a model call when its :class:`CompactTrigger` fires
(``KnowledgeConfig(compact=..., compact_trigger=...)``). Built-ins:

* :class:`TailWindowCompact` — keep the newest ``target`` events (no model call),
  optionally appending the dropped ones to ``/log/{stream_id}.compacted.jsonl``;
* :class:`SummarizeCompact` — replace the dropped events by one
  :class:`~agentsdk.events.CompactionSummary` at the head (one model call).

Both cut only between whole tool-call groups (a call never loses its result).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from agentsdk.aggregate import StrategyContext, render_transcript, summarize
from agentsdk.config import ModelConfig
from agentsdk.events import (
    AggregationCompleted,
    AggregationFailed,
    AggregationStarted,
    BaseEvent,
    CompactionCompleted,
    CompactionFailed,
    CompactionStarted,
    CompactionSummary,
    EventLogFailed,
)
from agentsdk.policies import event_chars, tail_groups
from knowledgestore.types import KnowledgeStore

__all__ = [
    "DEFAULT_COMPACT_PROMPT",
    "CompactStrategy",
    "CompactTrigger",
    "StrategyContext",
    "SummarizeCompact",
    "TailWindowCompact",
]

DEFAULT_COMPACT_PROMPT = """Summarize the earlier part of a conversation so the assistant can \
continue it without the full history. Keep facts, decisions, open questions and results of tool \
calls; be concise. Reply with the summary only.

{events}"""
"""Default template of :class:`SummarizeCompact` (``{events}``)."""


@runtime_checkable
class CompactStrategy(Protocol):
    """Returns the events that replace the stream's history."""

    async def compact(self, events: list[BaseEvent], ctx: StrategyContext, store: KnowledgeStore) -> list[BaseEvent]:
        """The new history for ``events`` (the whole current stream)."""
        ...


@dataclass(frozen=True, slots=True)
class CompactTrigger:
    """When compaction runs, checked before every model call; fires when *any* threshold is exceeded.

    ``CompactTrigger()`` never fires. Tokens are estimated as characters / ``chars_per_token``
    of what the model sees of each event.
    """

    max_events: int | None = None
    """Fire when the stream has more than this many events."""
    max_tokens: int | None = None
    """Fire when the stream's estimated tokens exceed this."""
    chars_per_token: int = 4
    """Characters per estimated token."""

    def __post_init__(self) -> None:
        if self.max_events is not None and self.max_events < 1:
            raise ValueError("max_events must be >= 1 (or None)")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError("max_tokens must be >= 1 (or None)")
        if self.chars_per_token < 1:
            raise ValueError("chars_per_token must be >= 1")

    def estimate_tokens(self, events: list[BaseEvent]) -> int:
        """Estimated tokens of ``events``."""
        return -(-sum(event_chars(e) for e in events) // self.chars_per_token)

    def should_run(self, events: list[BaseEvent]) -> bool:
        """Whether ``events`` exceed a threshold (the harness's own lifecycle events do not count)."""
        events = _without_lifecycle(events)
        if self.max_events is not None and len(events) > self.max_events:
            return True
        return self.max_tokens is not None and self.estimate_tokens(events) > self.max_tokens


_LIFECYCLE = (
    CompactionStarted,
    CompactionCompleted,
    CompactionFailed,
    AggregationStarted,
    AggregationCompleted,
    AggregationFailed,
    EventLogFailed,
)


def _without_lifecycle(events: list[BaseEvent]) -> list[BaseEvent]:
    """The history without the memory harness's lifecycle events (observers got those already)."""
    return [e for e in events if not isinstance(e, _LIFECYCLE)]


def _split(events: list[BaseEvent], target: int) -> tuple[list[BaseEvent], list[BaseEvent]]:
    """(dropped, kept): the newest ``target`` events kept whole; lifecycle events neither count nor stay."""
    events = _without_lifecycle(events)
    kept = tail_groups(events, target)
    return events[: len(events) - len(kept)], kept


class TailWindowCompact:
    """Keeps the newest ``target`` events (whole tool-call groups) and drops the rest.

    With ``persist=True`` the dropped events are appended, as JSON lines, to
    ``/log/{stream_id}.compacted.jsonl`` so nothing is lost for good.
    """

    def __init__(self, target: int, *, persist: bool = False) -> None:
        if target < 1:
            raise ValueError("target must be >= 1")
        self.target = target
        """How many events to keep."""
        self.persist = persist
        """Append dropped events to the store's ``/log/``."""

    async def compact(self, events: list[BaseEvent], ctx: StrategyContext, store: KnowledgeStore) -> list[BaseEvent]:
        """The newest ``target`` events."""
        dropped, kept = _split(events, self.target)
        if dropped and self.persist:
            lines = "".join(json.dumps(e.to_dict(), ensure_ascii=False) + "\n" for e in dropped)
            await store.append(f"/log/{ctx.stream_id}.compacted.jsonl", lines)
        return kept


class SummarizeCompact:
    """Replaces everything but the newest ``target`` events by one :class:`CompactionSummary`.

    An earlier summary among the dropped events is part of the transcript, so summaries
    roll up; ``events_dropped`` counts every original event the new summary stands for.
    """

    def __init__(self, target: int, config: ModelConfig, prompt: str = DEFAULT_COMPACT_PROMPT) -> None:
        if target < 1:
            raise ValueError("target must be >= 1")
        self.target = target
        """How many recent events to keep verbatim."""
        self.config = config
        """The summarizer model."""
        self.prompt = prompt
        """The template (``{events}`` is filled in)."""

    async def compact(self, events: list[BaseEvent], ctx: StrategyContext, store: KnowledgeStore) -> list[BaseEvent]:
        """``[CompactionSummary, *newest events]``."""
        dropped, kept = _split(events, self.target)
        if not dropped:
            return list(events)
        text = await summarize(self.config, self.prompt.replace("{events}", render_transcript(dropped)), ctx)
        count = sum(e.events_dropped if isinstance(e, CompactionSummary) else 1 for e in dropped)
        return [CompactionSummary(summary=text, events_dropped=count), *kept]
