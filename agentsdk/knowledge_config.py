"""``KnowledgeConfig``: wiring a knowledge store, aggregation and compaction into an Agent.

``Agent(knowledge=KnowledgeConfig(store=...))`` does four things (three can be turned off):

1. registers ``store`` as the ``KnowledgeStore`` dependency (for assembly policies and
   injected tool parameters) — always;
2. offers the model the ``knowledge`` tool (``knowledge(action="read"|"write"|...)``) —
   ``expose_tool=False`` turns it off;
3. seeds ``SKILL.md`` files into the store on the first ask — ``bootstrap=`` replaces
   the default ``DefaultBootstrap(mention_tool=expose_tool)`` (pass a no-op
   :class:`StoreBootstrap` to seed nothing);
4. writes the stream's events to ``/log/{stream_id}.jsonl`` after every turn —
   ``write_event_log=False`` turns it off.

With ``compact``/``compact_trigger`` the stream is compacted before model calls; with
``aggregate``/``aggregate_trigger`` knowledge is aggregated at the end of turns. Both
publish lifecycle events on the agent's stream and observer feed
(``CompactionStarted/Completed/Failed``, ``AggregationStarted/Completed/Failed``,
``EventLogFailed``); a failing strategy never fails the turn.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol, runtime_checkable

from agentsdk.aggregate import AggregateStrategy, AggregateTrigger, StrategyContext
from agentsdk.compact import CompactStrategy, CompactTrigger
from agentsdk.events import (
    AggregationCompleted,
    AggregationFailed,
    AggregationStarted,
    BaseEvent,
    CompactionCompleted,
    CompactionFailed,
    CompactionStarted,
    EventLogFailed,
    describe_error,
)
from agentsdk.tools import Inject, Tool, tool
from knowledgestore.types import KnowledgeStore

if TYPE_CHECKING:
    from agentsdk.agent import Agent
    from agentsdk.stream import Stream

__all__ = ["DefaultBootstrap", "KnowledgeConfig", "KnowledgeRuntime", "StoreBootstrap", "knowledge_tool"]

log = logging.getLogger(__name__)

Emit = Callable[[BaseEvent], Awaitable[None]]
"""Appends an event to the turn's stream and publishes it to the agent's observers."""


@runtime_checkable
class StoreBootstrap(Protocol):
    """Prepares a store on an agent's first ask (e.g. seeds ``SKILL.md`` files)."""

    async def bootstrap(self, store: KnowledgeStore, actor_name: str) -> None:
        """Seed ``store`` for the agent named ``actor_name``."""
        ...


_ROOT_SKILL = """# Knowledge store of {actor}

Path-addressed text files that outlive a conversation.

- `/artifacts/` — documents you produce (reports, drafts, data).
- `/memory/` — what to remember: `/memory/working.md` (current state), `/memory/conversations/` (past sessions).
- `/log/` — event logs of past turns, one JSON object per line (written by the harness).
"""

_TOOL_HINT = """
Use the `knowledge` tool to work with it: `knowledge(action="list", path="/")`,
`knowledge(action="read", path=...)`, `knowledge(action="write", path=..., content=...)`,
`knowledge(action="append", ...)`, `knowledge(action="delete", path=...)`.
"""

_DIR_SKILLS = {
    "/artifacts/SKILL.md": "# /artifacts/\n\nDocuments and results worth keeping, one file per artifact.\n",
    "/memory/SKILL.md": (
        "# /memory/\n\n`working.md` is the rolling working memory (rewritten by aggregation); "
        "`conversations/` holds one summary per past conversation.\n"
    ),
    "/log/SKILL.md": "# /log/\n\n`{stream_id}.jsonl`: every event of a conversation, one JSON object per line.\n",
}


class DefaultBootstrap:
    """Writes ``/SKILL.md``, ``/artifacts/SKILL.md``, ``/memory/SKILL.md`` and ``/log/SKILL.md``.

    Existing files are left alone. With ``mention_tool`` the root skill tells the model
    to use the ``knowledge`` tool.
    """

    def __init__(self, mention_tool: bool = True) -> None:
        self.mention_tool = mention_tool
        """Whether ``/SKILL.md`` points the model at the ``knowledge`` tool."""

    def files(self, actor_name: str) -> dict[str, str]:
        """The files this bootstrap seeds: path → content."""
        root = _ROOT_SKILL.format(actor=actor_name) + (_TOOL_HINT if self.mention_tool else "")
        return {"/SKILL.md": root, **_DIR_SKILLS}

    async def bootstrap(self, store: KnowledgeStore, actor_name: str) -> None:
        """Seed the missing ``SKILL.md`` files."""
        for path, content in self.files(actor_name).items():
            if not await store.exists(path):
                await store.write(path, content)


KnowledgeAction = Literal["list", "read", "write", "append", "delete", "exists"]


async def _knowledge(
    action: KnowledgeAction,
    path: str = "/",
    content: str = "",
    store: Annotated[KnowledgeStore | None, Inject(KnowledgeStore)] = None,
) -> str:
    """Read and write the persistent knowledge store (start with action="list", path="/").

    Args:
        action: list a directory, read/write/append/delete a file, or check whether it exists.
        path: absolute store path, e.g. "/memory/notes.md" (a directory for "list").
        content: the text to write or append.
    """
    if store is None:
        raise RuntimeError("no knowledge store is configured")
    if action == "list":
        children = await store.list(path)
        return "\n".join(children) if children else f"(no files under {path})"
    if action == "read":
        return await store.read(path)
    if action == "write":
        await store.write(path, content)
        return f"wrote {len(content)} characters to {path}"
    if action == "append":
        offset = await store.append(path, content)
        return f"appended {len(content)} characters to {path} at byte {offset}"
    if action == "delete":
        await store.delete(path)
        return f"deleted {path}"
    return "true" if await store.exists(path) else "false"


def knowledge_tool() -> Tool:
    """The ``knowledge`` action tool (its store is the injected ``KnowledgeStore`` dependency)."""
    return tool(name="knowledge")(_knowledge)


@dataclass
class KnowledgeConfig:
    """Knowledge store, compaction and aggregation for ``Agent(knowledge=...)`` (see the module doc)."""

    store: KnowledgeStore
    """The store; always registered as the ``KnowledgeStore`` dependency."""
    expose_tool: bool = True
    """Offer the model the ``knowledge`` tool."""
    write_event_log: bool = True
    """Write the stream's events to ``/log/{stream_id}.jsonl`` after every turn."""
    compact: CompactStrategy | None = None
    """How to compact the stream (needs ``compact_trigger``)."""
    compact_trigger: CompactTrigger | None = None
    """When to compact (checked before every model call)."""
    aggregate: AggregateStrategy | None = None
    """How to aggregate knowledge (needs ``aggregate_trigger``)."""
    aggregate_trigger: AggregateTrigger | None = None
    """When to aggregate (checked at the end of every turn)."""
    bootstrap: StoreBootstrap | None = None
    """Seeds the store on the first ask; ``None`` means ``DefaultBootstrap(mention_tool=expose_tool)``."""

    def __post_init__(self) -> None:
        if (self.compact is None) != (self.compact_trigger is None):
            raise ValueError("KnowledgeConfig: compact and compact_trigger must be given together")
        if (self.aggregate is None) != (self.aggregate_trigger is None):
            raise ValueError("KnowledgeConfig: aggregate and aggregate_trigger must be given together")

    def resolved_bootstrap(self) -> StoreBootstrap:
        """The bootstrap to run: ``bootstrap`` or ``DefaultBootstrap(mention_tool=expose_tool)``."""
        return self.bootstrap if self.bootstrap is not None else DefaultBootstrap(mention_tool=self.expose_tool)


class KnowledgeRuntime:
    """The per-agent harness behind a :class:`KnowledgeConfig` (used by ``Agent``; not public API)."""

    def __init__(self, config: KnowledgeConfig) -> None:
        self.config = config
        self.tools: list[Tool] = [knowledge_tool()] if config.expose_tool else []
        self.turns = 0
        self._bootstrapped = False
        self._aggregated_until: dict[str, str] = {}  # stream id → id of the last aggregated event

    def _context(self, agent: Agent, stream: Stream, dependencies: dict[Any, Any]) -> StrategyContext:
        return StrategyContext(agent=agent, stream=stream, dependencies=dependencies, turn=self.turns)

    async def start_turn(self, agent: Agent) -> None:
        """Run the bootstrap on the first ask (store errors propagate)."""
        if not self._bootstrapped:
            self._bootstrapped = True
            await self.config.resolved_bootstrap().bootstrap(self.config.store, agent.name)

    async def before_model_call(self, agent: Agent, stream: Stream, dependencies: dict[Any, Any], emit: Emit) -> None:
        """Compact the stream when the trigger fires; emit the lifecycle events."""
        strategy, trigger = self.config.compact, self.config.compact_trigger
        if strategy is None or trigger is None:
            return
        events = list(stream.events)
        try:
            if not trigger.should_run(events):
                return
        except Exception as exc:
            log.exception("agent %r: compaction trigger failed", agent.name)
            await emit(CompactionFailed(describe_error(exc)))
            return
        mark = len(stream.events)
        await emit(CompactionStarted(events_before=len(events)))
        ctx = self._context(agent, stream, dependencies)
        try:
            new_events = list(await strategy.compact(events, ctx, self.config.store))
        except Exception as exc:
            log.exception("agent %r: compaction strategy %s failed", agent.name, type(strategy).__name__)
            await emit(CompactionFailed(describe_error(exc)))
            return
        stream.events[:] = new_events + stream.events[mark:]
        await emit(CompactionCompleted(len(events), len(new_events), ctx.usage))

    async def end_turn(self, agent: Agent, stream: Stream, dependencies: dict[Any, Any], emit: Emit) -> None:
        """Aggregate when the trigger fires, then write the event log; failures become events."""
        self.turns += 1
        await self._aggregate(agent, stream, dependencies, emit)
        if self.config.write_event_log:
            try:
                await self.config.store.write(f"/log/{stream.stream_id}.jsonl", stream.to_jsonl())
            except Exception as exc:
                log.exception("agent %r: writing the event log failed", agent.name)
                await emit(EventLogFailed(describe_error(exc)))

    def _new_events(self, stream: Stream) -> list[BaseEvent]:
        last = self._aggregated_until.get(stream.stream_id)
        ids = [e.id for e in stream.events]
        if last is None or last not in ids:
            return list(stream.events)
        return list(stream.events[ids.index(last) + 1 :])

    async def _aggregate(self, agent: Agent, stream: Stream, dependencies: dict[Any, Any], emit: Emit) -> None:
        strategy, trigger = self.config.aggregate, self.config.aggregate_trigger
        if strategy is None or trigger is None:
            return
        events = self._new_events(stream)
        name = type(strategy).__name__
        try:
            if not trigger.should_run(turn=self.turns, new_events=len(events)):
                return
        except Exception as exc:
            log.exception("agent %r: aggregation trigger failed", agent.name)
            await emit(AggregationFailed(describe_error(exc)))
            return
        if events:
            self._aggregated_until[stream.stream_id] = events[-1].id
        await emit(AggregationStarted(strategy=name))
        ctx = self._context(agent, stream, dependencies)
        try:
            await strategy.aggregate(events, ctx, self.config.store)
        except Exception as exc:
            log.exception("agent %r: aggregation strategy %s failed", agent.name, name)
            await emit(AggregationFailed(describe_error(exc)))
            return
        await emit(AggregationCompleted(strategy=name, usage=ctx.usage))
