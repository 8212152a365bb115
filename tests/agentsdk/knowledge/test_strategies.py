"""Aggregation and compaction strategies and their triggers (ScriptedConfig as the summarizer)."""

from __future__ import annotations

import json

import pytest

from agentsdk import Agent, ScriptedConfig, Stream
from agentsdk.aggregate import (
    AggregateTrigger,
    ConversationSummaryAggregate,
    StrategyContext,
    WorkingMemoryAggregate,
    render_transcript,
)
from agentsdk.compact import CompactTrigger, SummarizeCompact, TailWindowCompact
from agentsdk.events import (
    BaseEvent,
    CompactionSummary,
    ModelMessage,
    ModelRequest,
    TextInput,
    ToolCall,
    ToolCallEvent,
    ToolResultEvent,
)
from agentsdk.knowledge import MemoryKnowledgeStore


def conversation() -> list[BaseEvent]:
    return [
        ModelRequest([TextInput("I like green tea.")]),
        ModelMessage(tool_calls=[ToolCall("c1", "ping", {"x": 1})]),
        ToolCallEvent("c1", "ping", {"x": 1}),
        ToolResultEvent("c1", "ping", "pong"),
        ModelMessage("Noted."),
    ]


def context(stream_id: str = "s1") -> StrategyContext:
    return StrategyContext(agent=Agent("a", config=ScriptedConfig([])), stream=Stream(stream_id=stream_id))


def test_render_transcript() -> None:
    assert render_transcript(conversation()) == (
        'User: I like green tea.\nAssistant called ping({"x": 1})\nTool result (ping): pong\nAssistant: Noted.'
    )


async def test_working_memory_aggregate_merges_existing_and_events() -> None:
    store = MemoryKnowledgeStore()
    await store.write("/memory/working.md", "Name: Ada")
    summarizer = ScriptedConfig(["Name: Ada\nLikes green tea."])
    ctx = context()
    await WorkingMemoryAggregate(config=summarizer, prompt="OLD={existing} NEW={events} {literal}").aggregate(
        conversation(), ctx, store
    )
    assert await store.read("/memory/working.md") == "Name: Ada\nLikes green tea.\n"
    sent = summarizer.requests[0][0][0]["content"]
    assert sent.startswith("OLD=Name: Ada NEW=User: I like green tea.") and sent.endswith("{literal}")
    assert ctx.usage.total_tokens > 0


async def test_conversation_summary_aggregate_writes_episode() -> None:
    store = MemoryKnowledgeStore()
    await ConversationSummaryAggregate(config=ScriptedConfig(["Tea talk."])).aggregate(
        conversation(), context("s9"), store
    )
    [name] = await store.list("/memory/conversations/")
    assert name.endswith("_s9.md")
    assert await store.read(f"/memory/conversations/{name}") == "Tea talk.\n"


def test_aggregate_trigger() -> None:
    assert not AggregateTrigger().enabled
    assert not AggregateTrigger().should_run(turn=1, new_events=10)
    assert AggregateTrigger(on_end=True).should_run(turn=1, new_events=1)
    assert not AggregateTrigger(on_end=True).should_run(turn=1, new_events=0)
    every2 = AggregateTrigger(every_n_turns=2)
    assert [every2.should_run(turn=t, new_events=3) for t in (1, 2, 3, 4)] == [False, True, False, True]
    assert AggregateTrigger(every_n_events=5).should_run(turn=1, new_events=5)
    assert not AggregateTrigger(every_n_events=5).should_run(turn=1, new_events=4)
    with pytest.raises(ValueError):
        AggregateTrigger(every_n_turns=0)


async def test_tail_window_compact_keeps_groups_and_persists() -> None:
    store = MemoryKnowledgeStore()
    events = conversation()
    kept = await TailWindowCompact(target=3).compact(events, context(), store)
    assert kept == events[-1:]  # the 3-event tool group does not fit next to the last message
    kept = await TailWindowCompact(target=4, persist=True).compact(events, context(), store)
    assert kept == events[1:]
    lines = (await store.read("/log/s1.compacted.jsonl")).splitlines()
    assert [json.loads(x)["type"] for x in lines] == ["ModelRequest"]


async def test_summarize_compact_puts_one_summary_at_head() -> None:
    store = MemoryKnowledgeStore()
    summarizer = ScriptedConfig(["The user likes tea."])
    previous = CompactionSummary("Earlier stuff.", events_dropped=7)
    events = [previous, *conversation()]
    out = await SummarizeCompact(target=1, config=summarizer).compact(events, context(), store)
    head = out[0]
    assert isinstance(head, CompactionSummary)
    assert head.summary == "The user likes tea." and head.events_dropped == 7 + 4
    assert out[1:] == events[-1:]
    assert "Summary of 7 earlier events: Earlier stuff." in summarizer.requests[0][0][0]["content"]
    # Nothing to drop: no model call.
    assert await SummarizeCompact(target=10, config=summarizer).compact(events, context(), store) == events
    assert summarizer.calls == 1


def test_compact_trigger() -> None:
    events = conversation()
    assert not CompactTrigger().should_run(events)
    assert CompactTrigger(max_events=4).should_run(events)
    assert not CompactTrigger(max_events=5).should_run(events)
    assert CompactTrigger(max_tokens=2).should_run(events)
    assert not CompactTrigger(max_tokens=1000).should_run(events)
    with pytest.raises(ValueError):
        CompactTrigger(chars_per_token=0)
