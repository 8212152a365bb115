"""Built-in assembly policies: what the model sees before each call.

Two kinds, and the order matters — **inject first, then reduce**:

* *injection* policies add to ``prompts``: :class:`WorkingMemoryPolicy`,
  :class:`EpisodicMemoryPolicy`, :class:`AlertPolicy`;
* *reduction* policies shrink ``events``: :class:`ConversationPolicy`,
  :class:`SlidingWindowPolicy`, :class:`TokenBudgetPolicy`, and :class:`HistoryLimiter`
  (AG2's simpler history cap; use it *or* the window/budget policies, not both).

Pass them as ``Agent(assembly=[...])``. :meth:`AssemblerMiddleware.validate_order`
returns warnings for known bad orderings. The memory policies find the store through
``context.dependencies.get(KnowledgeStore)`` (registered by ``KnowledgeConfig(store=...)``)
and do nothing when no store is registered.

Reduction never separates a tool call from its result: events are trimmed in whole
*groups* (see :func:`group_events`), and the newest group is always kept. A fresh
:class:`~agentsdk.events.HaltEvent` (one an earlier policy just added) always survives
reduction, so ``AlertPolicy`` can halt a turn whatever follows it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Literal

from agentsdk._assembly import AssemblyContext, AssemblyPolicy, run_assembly
from agentsdk.events import (
    BaseEvent,
    CompactionSummary,
    HaltEvent,
    ImageInput,
    ModelMessage,
    ModelRequest,
    ObserverAlert,
    SystemPrompt,
    TextInput,
    ToolCallEvent,
    ToolResultEvent,
)
from knowledgestore.types import KnowledgeStore

__all__ = [
    "IMAGE_CHARS",
    "AlertPolicy",
    "AssemblerMiddleware",
    "ConversationPolicy",
    "EpisodicMemoryPolicy",
    "HistoryLimiter",
    "PolicyKind",
    "SlidingWindowPolicy",
    "TokenBudgetPolicy",
    "WorkingMemoryPolicy",
    "event_chars",
    "group_events",
    "tail_groups",
]

log = logging.getLogger(__name__)

PolicyKind = Literal["injection", "reduction"]
"""What a policy does: add to the prompts or shrink the events."""

WORKING_MEMORY_PATH = "/memory/working.md"
CONVERSATIONS_DIR = "/memory/conversations/"

_CONVERSATION_TYPES = (
    ModelRequest,
    ModelMessage,
    ToolCallEvent,
    ToolResultEvent,
    CompactionSummary,
    TextInput,
    SystemPrompt,
)


# ---------------------------------------------------------------------------- helpers


def group_events(events: Sequence[BaseEvent]) -> list[list[BaseEvent]]:
    """Split ``events`` into groups that trimming must keep or drop as a whole.

    A :class:`ModelMessage` with tool calls forms one group with the directly following
    :class:`ToolCallEvent` / :class:`ToolResultEvent` s of those calls; a lone
    ``ToolCallEvent`` groups with its result. Every other event is a group of its own.
    """
    groups: list[list[BaseEvent]] = []
    pending: set[str] = set()
    for event in events:
        if pending and isinstance(event, ToolCallEvent | ToolResultEvent) and event.call_id in pending:
            groups[-1].append(event)
            if isinstance(event, ToolResultEvent):
                pending.discard(event.call_id)
            continue
        groups.append([event])
        if isinstance(event, ModelMessage) and event.tool_calls:
            pending = {c.id for c in event.tool_calls}
        elif isinstance(event, ToolCallEvent):
            pending = {event.call_id}
        else:
            pending = set()
    return groups


def tail_groups(
    events: Sequence[BaseEvent], budget: int, cost: Callable[[BaseEvent], int] = lambda _e: 1
) -> list[BaseEvent]:
    """The newest whole groups of ``events`` whose total ``cost`` fits in ``budget``.

    The newest group is always kept, even when it alone exceeds the budget (so the
    model never loses the call it is answering).
    """
    kept: list[list[BaseEvent]] = []
    total = 0
    for group in reversed(group_events(events)):
        group_cost = sum(cost(e) for e in group)
        if kept and total + group_cost > budget:
            break
        kept.append(group)
        total += group_cost
    return [e for group in reversed(kept) for e in group]


IMAGE_CHARS = 4 * 765
"""What one image counts as in :func:`event_chars`: 765 tokens (what OpenAI charges for a
1024×1024 image at high detail), at 4 characters per token."""


def _part_chars(part: BaseEvent) -> int:
    if isinstance(part, TextInput):
        return len(part.text)
    if isinstance(part, ImageInput):
        return IMAGE_CHARS
    if isinstance(part, ToolResultEvent):
        return len(part.content)
    return 0


def event_chars(event: BaseEvent) -> int:
    """Characters of what the model sees of ``event`` (used for token estimates; an image counts
    :data:`IMAGE_CHARS`)."""
    if isinstance(event, ModelRequest):
        return sum(_part_chars(p) for p in event.parts)
    if isinstance(event, ImageInput):
        return IMAGE_CHARS
    if isinstance(event, ModelMessage):
        return len(event.text) + sum(len(c.name) + len(json.dumps(c.arguments)) for c in event.tool_calls)
    if isinstance(event, ToolResultEvent):
        return len(event.content)
    if isinstance(event, ToolCallEvent):
        return len(event.name) + len(json.dumps(event.arguments))
    if isinstance(event, CompactionSummary):
        return len(event.summary)
    if isinstance(event, TextInput | SystemPrompt):
        return len(event.text)
    return 0  # lifecycle / observer events are not shown to the model


def _fresh_halts(events: Sequence[BaseEvent], context: AssemblyContext) -> tuple[list[BaseEvent], list[BaseEvent]]:
    """Split off HaltEvents that are not in the stream yet (added by an earlier policy)."""
    known = {e.id for e in context.stream.events}
    halts: list[BaseEvent] = [e for e in events if isinstance(e, HaltEvent) and e.id not in known]
    rest = [e for e in events if not (isinstance(e, HaltEvent) and e.id not in known)]
    return halts, rest


def _note(name: str, shown: int, total: int, noun: str = "events") -> str:
    return f"[{name}] Showing {shown} of {total} {noun}."


def _store(context: AssemblyContext, policy: str) -> KnowledgeStore | None:
    store: Any = context.dependencies.get(KnowledgeStore)
    if store is None:
        log.warning("%s: no KnowledgeStore dependency registered; nothing injected", policy)
    return store  # type: ignore[no-any-return]


# ---------------------------------------------------------------------------- injection


class WorkingMemoryPolicy:
    """Injects the working-memory file (``/memory/working.md``) into the prompts, when present."""

    name: ClassVar[str] = "working_memory"
    kind: ClassVar[PolicyKind] = "injection"

    def __init__(self, path: str = WORKING_MEMORY_PATH, *, header: str = "## Working memory") -> None:
        self.path = path
        """The store path read before every model call."""
        self.header = header
        """Heading put above the file's content."""

    async def apply(
        self, prompts: list[str], events: list[BaseEvent], context: AssemblyContext
    ) -> tuple[list[str], list[BaseEvent]]:
        """Append ``header + content`` to ``prompts`` when the file exists and is not blank."""
        store = _store(context, type(self).__name__)
        if store is None or not await store.exists(self.path):
            return prompts, events
        text = (await store.read(self.path)).strip()
        if not text:
            return prompts, events
        return [*prompts, f"{self.header}\n\n{text}"], events


class EpisodicMemoryPolicy:
    """Injects summaries of recent conversations (``/memory/conversations/*.md``), newest last.

    Files are ordered by name (``ConversationSummaryAggregate`` names them
    ``{timestamp}_{stream_id}.md``); the last ``max_episodes`` are shown.
    """

    name: ClassVar[str] = "episodic_memory"
    kind: ClassVar[PolicyKind] = "injection"

    def __init__(
        self,
        max_episodes: int = 5,
        transparent: bool = True,
        *,
        directory: str = CONVERSATIONS_DIR,
        header: str = "## Earlier conversations",
    ) -> None:
        if max_episodes < 1:
            raise ValueError("max_episodes must be >= 1")
        self.max_episodes = max_episodes
        """How many of the most recent episodes to inject."""
        self.transparent = transparent
        """Add ``[episodic_memory] Showing X of Y episodes.`` to the prompts."""
        self.directory = directory.rstrip("/") + "/"
        self.header = header

    async def apply(
        self, prompts: list[str], events: list[BaseEvent], context: AssemblyContext
    ) -> tuple[list[str], list[BaseEvent]]:
        """Append the newest episodes (and the transparency note) to ``prompts``."""
        store = _store(context, type(self).__name__)
        if store is None:
            return prompts, events
        names = [n for n in await store.list(self.directory) if n.endswith(".md")]
        if not names:
            return prompts, events
        chosen = names[-self.max_episodes :]
        parts = [self.header]
        for name in chosen:
            parts.append(f"### {name.removesuffix('.md')}\n\n{(await store.read(self.directory + name)).strip()}")
        out = [*prompts, "\n\n".join(parts)]
        if self.transparent:
            out.append(_note(self.name, len(chosen), len(names), "episodes"))
        return out, events


class AlertPolicy:
    """Delivers :class:`~agentsdk.events.ObserverAlert` s to the model; halts on a FATAL one.

    The newest ``max_alerts`` alerts in the history are listed in the prompts. A
    ``fatal`` alert that no :class:`~agentsdk.events.HaltEvent` follows yet adds a new
    ``HaltEvent`` to the events, which stops the turn before the model call (so a later
    turn on the same stream is not halted again by the same alert).
    """

    name: ClassVar[str] = "alert"
    kind: ClassVar[PolicyKind] = "injection"

    def __init__(self, max_alerts: int = 10) -> None:
        if max_alerts < 1:
            raise ValueError("max_alerts must be >= 1")
        self.max_alerts = max_alerts
        """How many of the newest alerts to show."""

    async def apply(
        self, prompts: list[str], events: list[BaseEvent], context: AssemblyContext
    ) -> tuple[list[str], list[BaseEvent]]:
        """Add the alerts to ``prompts``; append a ``HaltEvent`` for an unhandled FATAL alert."""
        alerts = [e for e in events if isinstance(e, ObserverAlert)]
        if not alerts:
            return prompts, events
        lines = ["## Observer alerts"]
        for alert in alerts[-self.max_alerts :]:
            source = f" from {alert.source}" if alert.source else ""
            lines.append(f"- [{alert.level.upper()}{source}] {alert.message}")
        prompts = [*prompts, "\n".join(lines)]
        last_halt = max((i for i, e in enumerate(events) if isinstance(e, HaltEvent)), default=-1)
        fatal = [e for e in events[last_halt + 1 :] if isinstance(e, ObserverAlert) and e.level == "fatal"]
        if fatal:
            alert = fatal[-1]
            source = f" from {alert.source}" if alert.source else ""
            events = [*events, HaltEvent(f"FATAL alert{source}: {alert.message}")]
        return prompts, events


# ---------------------------------------------------------------------------- reduction


class ConversationPolicy:
    """Keeps only conversation events: requests, messages, tool calls/results, compaction summaries.

    ``TextInput`` and ``SystemPrompt`` events are kept too; lifecycle and observer events
    (compaction/aggregation notices, alerts, old halts) are dropped.
    """

    name: ClassVar[str] = "conversation"
    kind: ClassVar[PolicyKind] = "reduction"

    async def apply(
        self, prompts: list[str], events: list[BaseEvent], context: AssemblyContext
    ) -> tuple[list[str], list[BaseEvent]]:
        """Drop every non-conversation event (a fresh ``HaltEvent`` survives)."""
        halts, rest = _fresh_halts(events, context)
        return prompts, [e for e in rest if isinstance(e, _CONVERSATION_TYPES)] + halts


class SlidingWindowPolicy:
    """Keeps the newest ``max_events`` events (whole tool-call groups only)."""

    name: ClassVar[str] = "sliding_window"
    kind: ClassVar[PolicyKind] = "reduction"

    def __init__(self, max_events: int = 50, transparent: bool = True) -> None:
        if max_events < 1:
            raise ValueError("max_events must be >= 1")
        self.max_events = max_events
        """The window size (exceeded only when the newest tool-call group alone is larger)."""
        self.transparent = transparent
        """Add ``[sliding_window] Showing X of Y events.`` to the prompts."""

    async def apply(
        self, prompts: list[str], events: list[BaseEvent], context: AssemblyContext
    ) -> tuple[list[str], list[BaseEvent]]:
        """Trim to the window; note the counts when transparent."""
        halts, rest = _fresh_halts(events, context)
        kept = tail_groups(rest, self.max_events)
        if self.transparent:
            prompts = [*prompts, _note(self.name, len(kept), len(rest))]
        return prompts, kept + halts


class HistoryLimiter:
    """Caps the history at ``max_events`` events, keeping the first request and the newest events.

    AG2's ``HistoryLimiter`` (a middleware there, an assembly policy here; the same effect: it
    runs before every model call and changes what the model sees, never the stream). When the
    history is longer than ``max_events``: a leading :class:`~agentsdk.events.ModelRequest` (the
    task the conversation started with) stays, followed by the newest events that fill the rest
    of the cap; otherwise the newest ``max_events`` events. Cuts fall between whole tool-call
    groups (a result never loses its call), so ``max_events`` is a target: the newest group is
    kept even when it alone is larger. No note is added to the prompts (use
    :class:`SlidingWindowPolicy` for that); do not combine the two (both trim).
    """

    name: ClassVar[str] = "history_limiter"
    kind: ClassVar[PolicyKind] = "reduction"

    def __init__(self, max_events: int) -> None:
        if isinstance(max_events, bool) or not isinstance(max_events, int) or max_events < 1:
            raise ValueError(
                f"max_events must be a positive integer (how many events the model sees); got {max_events!r}"
            )
        self.max_events = max_events
        """The cap."""

    async def apply(
        self, prompts: list[str], events: list[BaseEvent], context: AssemblyContext
    ) -> tuple[list[str], list[BaseEvent]]:
        """The first request and the newest events, at most ``max_events`` (whole groups)."""
        halts, rest = _fresh_halts(events, context)
        if len(rest) <= self.max_events:
            return prompts, rest + halts
        first = rest[0]
        if isinstance(first, ModelRequest):
            kept = [first] if self.max_events == 1 else [first, *tail_groups(rest[1:], self.max_events - 1)]
        else:
            kept = tail_groups(rest, self.max_events)
        return prompts, kept + halts


class TokenBudgetPolicy:
    """Keeps the newest events that fit ``max_tokens`` together with the prompts.

    Tokens are estimated as characters / ``chars_per_token``; the prompts (including
    anything injected before this policy) count against the budget.
    """

    name: ClassVar[str] = "token_budget"
    kind: ClassVar[PolicyKind] = "reduction"

    def __init__(self, max_tokens: int = 32_000, chars_per_token: int = 4, transparent: bool = True) -> None:
        if max_tokens < 1 or chars_per_token < 1:
            raise ValueError("max_tokens and chars_per_token must be >= 1")
        self.max_tokens = max_tokens
        """The budget for prompts + events."""
        self.chars_per_token = chars_per_token
        """Characters per estimated token."""
        self.transparent = transparent
        """Add ``[token_budget] Showing X of Y events.`` to the prompts."""

    def tokens(self, chars: int) -> int:
        """Estimated tokens for ``chars`` characters (rounded up)."""
        return -(-chars // self.chars_per_token)

    async def apply(
        self, prompts: list[str], events: list[BaseEvent], context: AssemblyContext
    ) -> tuple[list[str], list[BaseEvent]]:
        """Trim the oldest groups until prompts + events fit the budget."""
        halts, rest = _fresh_halts(events, context)
        budget = self.max_tokens - self.tokens(sum(len(p) for p in prompts))
        kept = tail_groups(rest, budget, lambda e: self.tokens(event_chars(e)))
        if self.transparent:
            prompts = [*prompts, _note(self.name, len(kept), len(rest))]
        return prompts, kept + halts


# ---------------------------------------------------------------------------- the chain


def _kind(policy: object) -> str | None:
    kind = getattr(policy, "kind", None)
    return kind if kind in ("injection", "reduction") else None


class AssemblerMiddleware:
    """Runs an assembly chain; :meth:`validate_order` checks a chain for known bad orderings.

    ``Agent(assembly=[...])`` runs the chain itself; use this class for manual harnesses.
    A custom policy takes part in the order checks by setting ``kind = "injection"`` or
    ``kind = "reduction"``.
    """

    def __init__(self, policies: Sequence[AssemblyPolicy]) -> None:
        self.policies = list(policies)
        """The chain, in order."""

    async def apply(
        self, prompts: list[str], events: list[BaseEvent], context: AssemblyContext
    ) -> tuple[list[str], list[BaseEvent]]:
        """Run the chain (see :func:`agentsdk.assembly.run_assembly`)."""
        return await run_assembly(self.policies, prompts, events, context)

    @staticmethod
    def validate_order(policies: Sequence[object]) -> list[str]:
        """Warnings for known bad orderings of ``policies`` (empty when the order is fine).

        * an injection policy after a reduction policy (the injection escapes the budget);
        * a memory injection after ``AlertPolicy`` (inject memory, then alerts, then reduce);
        * ``ConversationPolicy`` after a window/budget policy (the window counted events
          that are dropped afterwards);
        * ``HistoryLimiter`` together with ``SlidingWindowPolicy`` or ``TokenBudgetPolicy``
          (both trim the history: pick one);
        * the same policy type twice.
        """
        warnings: list[str] = []
        first_reduction: tuple[int, object] | None = None
        alert_at: int | None = None
        window_at: tuple[int, object] | None = None
        seen: dict[type, int] = {}
        for i, policy in enumerate(policies):
            name = type(policy).__name__
            kind = _kind(policy)
            if type(policy) in seen:
                warnings.append(f"{name} appears twice (positions {seen[type(policy)]} and {i}).")
            seen.setdefault(type(policy), i)
            if kind == "injection" and first_reduction is not None:
                r_i, r_policy = first_reduction
                warnings.append(
                    f"{name} (position {i}) injects after the reduction {type(r_policy).__name__} "
                    f"(position {r_i}): its prompt text is not counted by the reduction. Put injection first."
                )
            if isinstance(policy, WorkingMemoryPolicy | EpisodicMemoryPolicy) and alert_at is not None:
                warnings.append(
                    f"{name} (position {i}) comes after AlertPolicy (position {alert_at}): "
                    "inject memory first, then AlertPolicy, then reductions."
                )
            if isinstance(policy, ConversationPolicy) and window_at is not None:
                w_i, w_policy = window_at
                warnings.append(
                    f"ConversationPolicy (position {i}) comes after {type(w_policy).__name__} (position {w_i}): "
                    "the window counted lifecycle events that are dropped afterwards. Filter first."
                )
            if isinstance(policy, HistoryLimiter) or isinstance(policy, SlidingWindowPolicy | TokenBudgetPolicy):
                others = [
                    p for p in policies[:i] if isinstance(p, HistoryLimiter) != isinstance(policy, HistoryLimiter)
                ]
                trimmers = [
                    p for p in others if isinstance(p, HistoryLimiter | SlidingWindowPolicy | TokenBudgetPolicy)
                ]
                if trimmers:
                    warnings.append(
                        f"{name} (position {i}) and {type(trimmers[0]).__name__} both trim the history: "
                        "use HistoryLimiter or the window/budget policies, not both."
                    )
            if isinstance(policy, AlertPolicy) and alert_at is None:
                alert_at = i
            if isinstance(policy, SlidingWindowPolicy | TokenBudgetPolicy) and window_at is None:
                window_at = (i, policy)
            if kind == "reduction" and first_reduction is None:
                first_reduction = (i, policy)
        return warnings
