"""KnowledgeConfig's four behaviours, compaction/aggregation wiring and lifecycle events in Agent."""

from __future__ import annotations

import builtins

import pytest

import agentsdk
from agentsdk import Agent, KnowledgeConfig, ScriptedConfig, Stream
from agentsdk.aggregate import AggregateTrigger, StrategyContext, WorkingMemoryAggregate
from agentsdk.compact import CompactTrigger, TailWindowCompact
from agentsdk.events import (
    AggregationCompleted,
    AggregationFailed,
    AggregationStarted,
    BaseEvent,
    CompactionCompleted,
    CompactionFailed,
    CompactionStarted,
    EventLogFailed,
    HaltEvent,
    ModelMessage,
    ModelRequest,
    ObserverAlert,
    TextInput,
    ToolCall,
)
from agentsdk.knowledge import KnowledgeStore, MemoryKnowledgeStore
from agentsdk.policies import AlertPolicy, ConversationPolicy, WorkingMemoryPolicy

SKILLS = ["/SKILL.md", "/artifacts/SKILL.md", "/log/SKILL.md", "/memory/SKILL.md"]


async def all_files(store: KnowledgeStore, path: str = "/") -> builtins.list[str]:
    out: list[str] = []
    for child in await store.list(path):
        full = path + child
        out += await all_files(store, full) if child.endswith("/") else [full]
    return sorted(out)


class Boom:
    """A custom strategy that always fails."""

    async def aggregate(self, events: list[BaseEvent], ctx: StrategyContext, store: KnowledgeStore) -> None:
        raise RuntimeError("aggregate bug")

    async def compact(self, events: list[BaseEvent], ctx: StrategyContext, store: KnowledgeStore) -> list[BaseEvent]:
        raise RuntimeError("compact bug")


class NoBootstrap:
    async def bootstrap(self, store: KnowledgeStore, actor_name: str) -> None:
        pass


def test_knowledge_config_is_exported_and_validated() -> None:
    assert agentsdk.KnowledgeConfig is KnowledgeConfig
    with pytest.raises(ValueError, match="aggregate_trigger"):
        KnowledgeConfig(store=MemoryKnowledgeStore(), aggregate=Boom())
    with pytest.raises(ValueError, match="compact_trigger"):
        KnowledgeConfig(store=MemoryKnowledgeStore(), compact_trigger=CompactTrigger(max_events=1))


async def test_defaults_tool_bootstrap_and_event_log() -> None:
    store = MemoryKnowledgeStore()
    config = ScriptedConfig([ToolCall("c1", "knowledge", {"action": "write", "path": "/a.md", "content": "hi"}), "ok"])
    agent = Agent("journal", config=config, knowledge=KnowledgeConfig(store=store))
    stream = Stream(stream_id="s1")
    reply = await agent.ask("remember hi", stream=stream)
    assert reply.body == "ok" and reply.tool_results[0].content == "wrote 2 characters to /a.md"
    assert [t["function"]["name"] for t in config.requests[0][1]] == ["knowledge"]
    assert agent.tools == []  # the knowledge tool is added per call, not to agent.tools
    assert await store.read("/a.md") == "hi"
    assert await all_files(store) == sorted(["/a.md", *SKILLS, "/log/s1.jsonl"])
    assert "`knowledge` tool" in await store.read("/SKILL.md")
    assert await store.read("/log/s1.jsonl") == stream.to_jsonl()


async def test_opt_outs() -> None:
    store = MemoryKnowledgeStore()
    config = ScriptedConfig(["ok"])
    agent = Agent("a", config=config, knowledge=KnowledgeConfig(store=store, expose_tool=False, write_event_log=False))
    await agent.ask("hi")
    assert config.requests[0][1] == []
    assert await all_files(store) == sorted(SKILLS)
    assert "knowledge` tool" not in await store.read("/SKILL.md")

    store2 = MemoryKnowledgeStore()
    agent2 = Agent(
        "b",
        config=ScriptedConfig(["ok"]),
        knowledge=KnowledgeConfig(store=store2, write_event_log=False, bootstrap=NoBootstrap()),
    )
    await agent2.ask("hi")
    assert await all_files(store2) == []


async def test_aggregation_lifecycle_and_working_memory_reaches_next_turn() -> None:
    store = MemoryKnowledgeStore()
    summarizer = ScriptedConfig(["Likes tea.", "Likes tea. Named Ada."])
    config = ScriptedConfig(["Noted.", "Hello Ada."])
    agent = Agent(
        "a",
        "Base.",
        config=config,
        knowledge=KnowledgeConfig(
            store=store,
            expose_tool=False,
            aggregate=WorkingMemoryAggregate(config=summarizer),
            aggregate_trigger=AggregateTrigger(on_end=True),
        ),
        assembly=[WorkingMemoryPolicy(), ConversationPolicy()],
    )
    seen: list[BaseEvent] = []
    agent.subscribe(seen.append)
    stream = Stream()
    reply = await agent.ask("I like tea", stream=stream)
    assert [e.event_type for e in reply.events[-2:]] == ["AggregationStarted", "AggregationCompleted"]
    done = reply.events[-1]
    assert isinstance(done, AggregationCompleted) and done.strategy == "WorkingMemoryAggregate"
    assert done.usage is not None and done.usage.total_tokens > 0
    assert isinstance(seen[-2], AggregationStarted) and seen[-1] is done
    assert await store.read("/memory/working.md") == "Likes tea.\n"

    await agent.ask("I'm Ada", stream=stream)
    assert config.requests[1][0][0]["content"] == "Base.\n\n## Working memory\n\nLikes tea."
    # Only the new events (since the last aggregation) went to the summarizer.
    second = summarizer.requests[1][0][0]["content"]
    assert "I'm Ada" in second and "I like tea" not in second


async def test_every_n_turns_trigger() -> None:
    store = MemoryKnowledgeStore()
    summarizer = ScriptedConfig(["m1"])
    agent = Agent(
        "a",
        config=ScriptedConfig(["1", "2", "3"]),
        knowledge=KnowledgeConfig(
            store=store,
            aggregate=WorkingMemoryAggregate(config=summarizer),
            aggregate_trigger=AggregateTrigger(every_n_turns=2),
        ),
    )
    stream = Stream()
    for text in ("a", "b", "c"):
        await agent.ask(text, stream=stream)
    assert summarizer.calls == 1
    assert "User: a" in summarizer.requests[0][0][0]["content"]


async def test_failing_strategies_emit_failed_events_and_turn_completes() -> None:
    feed_events: list[BaseEvent] = []
    agent = Agent(
        "a",
        config=ScriptedConfig(["fine"]),
        knowledge=KnowledgeConfig(
            store=MemoryKnowledgeStore(),
            compact=Boom(),
            compact_trigger=CompactTrigger(max_events=1),
            aggregate=Boom(),
            aggregate_trigger=AggregateTrigger(on_end=True),
        ),
    )
    stream = Stream(events=[ModelRequest([TextInput("old")]), ModelMessage("older")])
    async with agent.events() as feed:
        reply = await agent.ask("go", stream=stream)
        while True:
            try:
                feed_events.append(await feed.next(timeout=0.1))
            except TimeoutError:
                break
    assert reply.body == "fine"
    types = [e.event_type for e in feed_events]
    assert types == [
        "ModelRequest",
        "CompactionStarted",
        "CompactionFailed",
        "ModelMessage",
        "AggregationStarted",
        "AggregationFailed",
    ]
    failed = [e for e in feed_events if isinstance(e, CompactionFailed | AggregationFailed)]
    assert [f.error for f in failed] == ["RuntimeError: compact bug", "RuntimeError: aggregate bug"]
    assert len(stream.events) == 3 + 5  # the stream was left alone


async def test_compaction_before_model_call() -> None:
    config = ScriptedConfig(["answer"])
    agent = Agent(
        "a",
        config=config,
        knowledge=KnowledgeConfig(
            store=MemoryKnowledgeStore(),
            expose_tool=False,
            write_event_log=False,
            compact=TailWindowCompact(target=2),
            compact_trigger=CompactTrigger(max_events=3),
        ),
    )
    history: list[BaseEvent] = []
    for i in range(3):
        history += [ModelRequest([TextInput(f"q{i}")]), ModelMessage(f"a{i}")]
    stream = Stream(events=history)
    reply = await agent.ask("q3", stream=stream)
    started, completed = reply.events[1], reply.events[2]
    assert isinstance(started, CompactionStarted) and started.events_before == 7
    assert isinstance(completed, CompactionCompleted) and (completed.events_before, completed.events_after) == (7, 2)
    assert [m["content"] for m in config.requests[0][0]] == ["a2", "q3"]
    assert [e.event_type for e in stream.events] == [
        "ModelMessage",
        "ModelRequest",
        "CompactionStarted",
        "CompactionCompleted",
        "ModelMessage",
    ]


async def test_event_log_failure_is_an_event() -> None:
    class BrokenLog(MemoryKnowledgeStore):
        async def write(self, path: str, content: str) -> None:
            if path.startswith("/log/") and path.endswith(".jsonl"):
                raise OSError("disk full")
            await super().write(path, content)

    agent = Agent("a", config=ScriptedConfig(["ok"]), knowledge=KnowledgeConfig(store=BrokenLog()))
    reply = await agent.ask("hi")
    last = reply.events[-1]
    assert isinstance(last, EventLogFailed) and last.error == "OSError: disk full"


async def test_alert_policy_halts_agent_on_fatal() -> None:
    config = ScriptedConfig(["after"])
    agent = Agent("a", config=config, assembly=[AlertPolicy(), ConversationPolicy()])
    stream = Stream(events=[ObserverAlert("fatal", "stop now", source="guard")])
    reply = await agent.ask("go", stream=stream)
    assert reply.halted and config.calls == 0
    assert isinstance(reply.events[-1], HaltEvent)
    again = await agent.ask("continue", stream=stream)
    assert again.body == "after"
    assert "[FATAL from guard] stop now" in config.requests[0][0][0]["content"]
