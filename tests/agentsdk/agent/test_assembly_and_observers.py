"""The assembly hook before every model call (and halting), and the agent's observers."""

from __future__ import annotations

from typing import Any

from agentsdk import Agent, OpenAIConfig, ScriptedConfig, Stream, tool
from agentsdk.assembly import AssemblyContext, AssemblyPolicy, run_assembly
from agentsdk.events import BaseEvent, HaltEvent, ModelMessage, ModelRequest, ObserverAlert, TextInput, ToolCall
from agentsdk.policies import AlertPolicy, TokenBudgetPolicy
from agentsdk.testing import ScriptedOpenAIServer


@tool
def ping() -> str:
    """Reply pong."""
    return "pong"


class Recorder:
    """Records what it saw; adds a prompt; keeps only the last ``keep`` events."""

    def __init__(self, keep: int | None = None) -> None:
        self.keep = keep
        self.seen: list[tuple[list[str], list[str], int, Any]] = []

    async def apply(
        self, prompts: list[str], events: list[BaseEvent], context: AssemblyContext
    ) -> tuple[list[str], list[BaseEvent]]:
        self.seen.append(
            (list(prompts), [e.event_type for e in events], context.model_call, context.dependencies.get("memory"))
        )
        memory = context.dependencies.get("memory")
        prompts = [*prompts, f"Memory: {memory}"] if memory else prompts
        if self.keep is not None:
            events = events[-self.keep :] if self.keep else []
        return prompts, events


class HaltOnCall:
    """Halts the turn before the given model call."""

    def __init__(self, call: int) -> None:
        self.call = call

    async def apply(
        self, prompts: list[str], events: list[BaseEvent], context: AssemblyContext
    ) -> tuple[list[str], list[BaseEvent]]:
        if context.model_call == self.call:
            return prompts, [*events, HaltEvent(f"halted before call {self.call}")]
        return prompts, events


async def test_policies_run_before_every_model_call(server: ScriptedOpenAIServer, config: OpenAIConfig) -> None:
    first, second = Recorder(), Recorder(keep=2)
    assert isinstance(first, AssemblyPolicy)
    server.add(ToolCall("c1", "ping", {}), "done")
    agent = Agent(
        "a", "Base prompt.", config=config, tools=[ping], assembly=[first, second], dependencies={"memory": "likes tea"}
    )
    stream = Stream(events=[ModelRequest([TextInput("old question")]), ModelMessage("old answer")])
    reply = await agent.ask("new question", stream=stream)
    assert reply.body == "done"

    assert [s[2] for s in first.seen] == [0, 1]
    assert first.seen[0][1] == ["ModelRequest", "ModelMessage", "ModelRequest"]
    assert first.seen[1][1] == [
        "ModelRequest",
        "ModelMessage",
        "ModelRequest",
        "ModelMessage",
        "ToolCallEvent",
        "ToolResultEvent",
    ]
    assert first.seen[0][3] == "likes tea"
    # The second policy receives the first one's output.
    assert second.seen[0][0] == ["Base prompt.", "Memory: likes tea"]

    # The model sees the assembled view; the stream keeps everything.
    first_request = server.requests[0]["messages"]
    assert first_request[0] == {"role": "system", "content": "Base prompt.\n\nMemory: likes tea\n\nMemory: likes tea"}
    assert [m["content"] for m in first_request[1:]] == ["old answer", "new question"]
    assert len(stream.events) == 2 + 5


async def test_policy_can_halt_the_turn(server: ScriptedOpenAIServer, config: OpenAIConfig) -> None:
    server.add(ToolCall("c1", "ping", {}))
    agent = Agent("a", config=config, tools=[ping], assembly=[HaltOnCall(1)])
    reply = await agent.ask("go")
    assert reply.halted and reply.finish_reason == "halted" and reply.body == ""
    assert len(server.requests) == 1
    halt = reply.events[-1]
    assert isinstance(halt, HaltEvent) and halt.reason == "halted before call 1"
    assert reply.stream.events[-1] is halt

    # A HaltEvent already in the history does not halt later turns.
    class PassThrough:
        async def apply(
            self, prompts: list[str], events: list[BaseEvent], context: AssemblyContext
        ) -> tuple[list[str], list[BaseEvent]]:
            return prompts, events

    agent.assembly = [PassThrough()]
    server.add("after the halt")
    again = await agent.ask("continue", stream=reply.stream)
    assert again.body == "after the halt" and not again.halted


async def test_a_fatal_alert_halts_the_turn_through_a_token_budget(
    server: ScriptedOpenAIServer, config: OpenAIConfig
) -> None:
    server.add("must not be asked")
    agent = Agent("a", config=config, assembly=[AlertPolicy(), TokenBudgetPolicy(max_tokens=5)])
    history = Stream(events=[ModelRequest([TextInput("q" * 400)]), ObserverAlert("fatal", "leaking secrets", "guard")])
    reply = await agent.ask("go on", stream=history)
    assert reply.halted and reply.finish_reason == "halted"
    assert server.requests == []  # the model was never called
    halt = reply.events[-1]
    assert isinstance(halt, HaltEvent) and halt.reason == "FATAL alert from guard: leaking secrets"


async def test_run_assembly_copies_inputs() -> None:
    events: list[BaseEvent] = [TextInput("x")]
    prompts = ["p"]
    agent = Agent("a", config=ScriptedConfig([]))
    context = AssemblyContext(agent=agent, stream=Stream(), dependencies={})
    out_prompts, out_events = await run_assembly([Recorder(keep=0)], prompts, events, context)
    assert out_events == [] and len(events) == 1
    assert out_prompts == ["p"] and out_prompts is not prompts


async def test_observers_see_every_event() -> None:
    config = ScriptedConfig([ToolCall("c1", "ping", {}), "done"])
    agent = Agent("a", config=config, tools=[ping])
    sync_seen: list[str] = []
    async_seen: list[str] = []

    async def on_event(event: BaseEvent) -> None:
        async_seen.append(event.event_type)

    def broken(event: BaseEvent) -> None:
        raise RuntimeError("observer bug")  # logged, never breaks the turn

    unsubscribe = agent.subscribe(lambda e: sync_seen.append(e.event_type))
    agent.subscribe(on_event)
    agent.subscribe(broken)
    async with agent.events() as feed:
        reply = await agent.ask("go")
        expected = [e.event_type for e in reply.events]
        assert sync_seen == async_seen == expected
        got = [(await feed.next(timeout=1)).event_type for _ in expected]
        assert got == expected

    unsubscribe()
    config.add("again")
    await agent.ask("again")
    assert sync_seen == expected
    assert len(async_seen) == len(expected) + 2


async def test_event_feed_is_bounded_and_closes() -> None:
    agent = Agent("a", config=ScriptedConfig(["one"]))
    feed = agent.events(maxsize=1)
    await agent.ask("go")  # two events, room for one: the oldest is dropped
    assert feed.dropped == 1
    last = await feed.next(timeout=1)
    assert isinstance(last, ModelMessage) and last.text == "one"
    feed.close()
    collected = [e async for e in feed]
    assert collected == []


async def test_knowledge_store_is_a_dependency_for_policies() -> None:
    from types import SimpleNamespace

    from agentsdk.knowledge import KnowledgeStore, MemoryKnowledgeStore

    store = MemoryKnowledgeStore()
    await store.write("/memory/working.md", "User likes tea.")

    class WorkingMemory:
        async def apply(
            self, prompts: list[str], events: list[BaseEvent], context: AssemblyContext
        ) -> tuple[list[str], list[BaseEvent]]:
            found = context.dependencies.get(KnowledgeStore)
            assert found is store
            return [*prompts, await found.read("/memory/working.md")], events

    config = ScriptedConfig(["Tea, then."])
    agent = Agent("a", "Base.", config=config, knowledge=SimpleNamespace(store=store), assembly=[WorkingMemory()])
    reply = await agent.ask("What should I drink?")
    assert reply.body == "Tea, then."
    assert config.requests[0][0][0] == {"role": "system", "content": "Base.\n\nUser likes tea."}
