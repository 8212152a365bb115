"""Unit tests of the built-in assembly policies and AssemblerMiddleware.validate_order."""

from __future__ import annotations

import pytest

from agentsdk import Agent, ScriptedConfig, Stream
from agentsdk.assembly import AssemblerMiddleware, AssemblyContext
from agentsdk.events import (
    AggregationStarted,
    BaseEvent,
    CompactionSummary,
    HaltEvent,
    ModelMessage,
    ModelRequest,
    ObserverAlert,
    TextInput,
    ToolCall,
    ToolCallEvent,
    ToolResultEvent,
)
from agentsdk.knowledge import KnowledgeStore, MemoryKnowledgeStore
from agentsdk.policies import (
    AlertPolicy,
    ConversationPolicy,
    EpisodicMemoryPolicy,
    HistoryLimiter,
    SlidingWindowPolicy,
    TokenBudgetPolicy,
    WorkingMemoryPolicy,
    group_events,
)


def ctx(store: KnowledgeStore | None = None, stream: Stream | None = None) -> AssemblyContext:
    deps = {KnowledgeStore: store} if store is not None else {}
    return AssemblyContext(agent=Agent("a", config=ScriptedConfig([])), stream=stream or Stream(), dependencies=deps)


def req(text: str) -> ModelRequest:
    return ModelRequest([TextInput(text)])


def tool_round(call_id: str) -> list[BaseEvent]:
    return [
        ModelMessage(tool_calls=[ToolCall(call_id, "ping", {})]),
        ToolCallEvent(call_id, "ping", {}),
        ToolResultEvent(call_id, "ping", "pong"),
    ]


async def test_working_memory_injected_when_present() -> None:
    store = MemoryKnowledgeStore()
    policy = WorkingMemoryPolicy()
    assert await policy.apply(["Base."], [], ctx(store)) == (["Base."], [])
    await store.write("/memory/working.md", "User likes tea.\n")
    prompts, _ = await policy.apply(["Base."], [], ctx(store))
    assert prompts == ["Base.", "## Working memory\n\nUser likes tea."]
    # No store registered: nothing injected, nothing raised.
    assert await policy.apply(["Base."], [], ctx()) == (["Base."], [])


async def test_episodic_memory_injects_newest_episodes_with_note() -> None:
    store = MemoryKnowledgeStore()
    for i in range(4):
        await store.write(f"/memory/conversations/2025010{i}T000000Z_s{i}.md", f"episode {i}")
    prompts, _ = await EpisodicMemoryPolicy(max_episodes=2).apply([], [], ctx(store))
    assert "episode 2" in prompts[0] and "episode 3" in prompts[0] and "episode 1" not in prompts[0]
    assert prompts[0].index("episode 2") < prompts[0].index("episode 3")
    assert prompts[1] == "[episodic_memory] Showing 2 of 4 episodes."
    prompts, _ = await EpisodicMemoryPolicy(max_episodes=2, transparent=False).apply([], [], ctx(store))
    assert len(prompts) == 1


async def test_alert_policy_injects_and_halts_on_fatal_once() -> None:
    events: list[BaseEvent] = [req("hi"), ObserverAlert("warning", "slow tool", source="latency")]
    prompts, out = await AlertPolicy().apply([], events, ctx())
    assert prompts == ["## Observer alerts\n- [WARNING from latency] slow tool"]
    assert out == events
    events.append(ObserverAlert("fatal", "leaking secrets", source="guard"))
    prompts, out = await AlertPolicy().apply([], events, ctx())
    assert "[FATAL from guard] leaking secrets" in prompts[0]
    halt = out[-1]
    assert isinstance(halt, HaltEvent) and halt.reason == "FATAL alert from guard: leaking secrets"
    # Once a HaltEvent follows the alert, later calls are not halted again.
    _, again = await AlertPolicy().apply([], [*events, halt, req("next")], ctx())
    assert not any(isinstance(e, HaltEvent) for e in again[len(events) + 1 :])


async def test_conversation_policy_keeps_conversation_events_and_fresh_halts() -> None:
    summary = CompactionSummary("earlier", events_dropped=3)
    old_halt = HaltEvent("old")
    stream = Stream(events=[old_halt])
    fresh = HaltEvent("now")
    events: list[BaseEvent] = [
        summary,
        req("q"),
        AggregationStarted("x"),
        ObserverAlert("info", "fyi"),
        *tool_round("c1"),
        old_halt,
        ModelMessage("a"),
        fresh,
    ]
    _, out = await ConversationPolicy().apply([], events, ctx(stream=stream))
    assert [e.event_type for e in out] == [
        "CompactionSummary",
        "ModelRequest",
        "ModelMessage",
        "ToolCallEvent",
        "ToolResultEvent",
        "ModelMessage",
        "HaltEvent",
    ]
    assert out[-1] is fresh


def test_group_events_keeps_calls_with_results() -> None:
    events = [req("q"), *tool_round("c1"), ModelMessage("done")]
    assert [len(g) for g in group_events(events)] == [1, 3, 1]
    lone = [ToolCallEvent("c2", "ping", {}), ToolResultEvent("c2", "ping", "pong")]
    assert [len(g) for g in group_events(lone)] == [2]


async def test_sliding_window_never_splits_a_tool_call() -> None:
    events = [req("q1"), ModelMessage("a1"), req("q2"), *tool_round("c1"), ModelMessage("done")]
    prompts, out = await SlidingWindowPolicy(max_events=3).apply(["P"], events, ctx())
    # The tool group (3 events) does not fit next to "done": only "done" is kept.
    assert out == events[-1:]
    assert prompts == ["P", "[sliding_window] Showing 1 of 7 events."]
    _, out = await SlidingWindowPolicy(max_events=4, transparent=False).apply([], events, ctx())
    assert out == events[-4:]
    # The newest group is kept even when larger than the window.
    _, out = await SlidingWindowPolicy(max_events=1).apply([], events[:-1], ctx())
    assert out == events[-4:-1]
    with pytest.raises(ValueError):
        SlidingWindowPolicy(max_events=0)


async def test_history_limiter_keeps_the_first_request_and_the_newest_events() -> None:
    events = [req("task"), ModelMessage("a1"), req("q2"), *tool_round("c1"), ModelMessage("done")]
    _, out = await HistoryLimiter(max_events=10).apply(["P"], events, ctx())
    assert out == events  # within the cap: unchanged
    prompts, out = await HistoryLimiter(max_events=3).apply(["P"], events, ctx())
    # The task stays; the tool group (3 events) does not fit beside "done" in the 2 left.
    assert out == [events[0], events[-1]] and prompts == ["P"]  # no note added
    _, out = await HistoryLimiter(max_events=5).apply([], events, ctx())
    assert out == [events[0], *events[-4:]]
    _, out = await HistoryLimiter(max_events=1).apply([], events, ctx())
    assert out == [events[0]]
    # Without a leading request: the newest whole groups (the newest one even when larger).
    _, out = await HistoryLimiter(max_events=2).apply([], events[1:-1], ctx())
    assert out == events[-4:-1]
    halt = HaltEvent("stop")
    _, out = await HistoryLimiter(max_events=1).apply([], [*events, halt], ctx())
    assert out == [events[0], halt]  # a fresh halt survives the cap
    for bad in (0, -1, True):
        with pytest.raises(ValueError, match="max_events"):
            HistoryLimiter(max_events=bad)


async def test_token_budget_counts_prompts() -> None:
    events: list[BaseEvent] = [req("x" * 40), req("y" * 40), req("z" * 40)]  # 10 tokens each
    _, out = await TokenBudgetPolicy(max_tokens=25, transparent=False).apply([], events, ctx())
    assert out == events[-2:]
    prompts, out = await TokenBudgetPolicy(max_tokens=25).apply(["p" * 40], events, ctx())
    assert out == events[-1:]
    assert prompts[-1] == "[token_budget] Showing 1 of 3 events."


async def test_token_budget_rounds_each_event_up() -> None:
    # 41 characters are 11 tokens at 4 characters a token (10.25, rounded up), not 10.
    assert TokenBudgetPolicy(chars_per_token=4).tokens(41) == 11
    assert TokenBudgetPolicy(chars_per_token=4).tokens(1) == 1
    events: list[BaseEvent] = [req("x" * 41), req("y" * 41), req("z" * 41)]
    _, out = await TokenBudgetPolicy(max_tokens=30, transparent=False).apply([], events, ctx())
    assert out == events[-2:]  # 3 x 11 = 33 tokens do not fit 30; rounding down would keep all three


async def test_token_budget_counts_every_prompt() -> None:
    events: list[BaseEvent] = [req("x" * 40), req("y" * 40), req("z" * 40)]  # 10 tokens each
    prompts = ["p" * 40, "q" * 40]  # 20 tokens together
    _, out = await TokenBudgetPolicy(max_tokens=40, transparent=False).apply(prompts, events, ctx())
    assert out == events[-2:]  # 40 - 20 leaves room for two; counting only the first prompt would keep three


async def test_token_budget_keeps_a_fresh_halt_past_the_budget() -> None:
    events: list[BaseEvent] = [req("x" * 400), req("y" * 400)]
    fresh = HaltEvent("FATAL alert from guard: stop")
    _, out = await TokenBudgetPolicy(max_tokens=10, transparent=False).apply([], [*events, fresh], ctx())
    assert out == [events[-1], fresh]
    # A halt already in the stream is history like any other event: it does not come back past the budget.
    stream = Stream(events=[fresh])
    _, out = await TokenBudgetPolicy(max_tokens=100, transparent=False).apply([], [fresh, *events], ctx(stream=stream))
    assert out == [events[-1]]


def test_validate_order() -> None:
    good = [WorkingMemoryPolicy(), EpisodicMemoryPolicy(), AlertPolicy(), ConversationPolicy(), SlidingWindowPolicy()]
    assert AssemblerMiddleware.validate_order(good) == []
    warnings = AssemblerMiddleware.validate_order([SlidingWindowPolicy(), WorkingMemoryPolicy()])
    assert len(warnings) == 1 and "WorkingMemoryPolicy (position 1) injects after the reduction" in warnings[0]
    warnings = AssemblerMiddleware.validate_order([AlertPolicy(), WorkingMemoryPolicy()])
    assert warnings == [
        "WorkingMemoryPolicy (position 1) comes after AlertPolicy (position 0): "
        "inject memory first, then AlertPolicy, then reductions."
    ]
    warnings = AssemblerMiddleware.validate_order([TokenBudgetPolicy(), ConversationPolicy()])
    assert len(warnings) == 1 and warnings[0].startswith("ConversationPolicy (position 1) comes after TokenBudget")
    warnings = AssemblerMiddleware.validate_order([ConversationPolicy(), ConversationPolicy()])
    assert warnings == ["ConversationPolicy appears twice (positions 0 and 1)."]
    assert AssemblerMiddleware.validate_order([ConversationPolicy(), HistoryLimiter(20)]) == []
    warnings = AssemblerMiddleware.validate_order([HistoryLimiter(20), SlidingWindowPolicy()])
    assert warnings == [
        "SlidingWindowPolicy (position 1) and HistoryLimiter both trim the history: "
        "use HistoryLimiter or the window/budget policies, not both."
    ]


async def test_assembler_middleware_runs_chain() -> None:
    store = MemoryKnowledgeStore()
    await store.write("/memory/working.md", "tea")
    chain = AssemblerMiddleware([WorkingMemoryPolicy(), SlidingWindowPolicy(max_events=1, transparent=False)])
    prompts, events = await chain.apply([], [req("a"), req("b")], ctx(store))
    assert prompts == ["## Working memory\n\ntea"] and len(events) == 1
