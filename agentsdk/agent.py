"""``Agent``: an LLM with a prompt, tools and dependencies, run one turn at a time by ``ask``.

A turn (:meth:`Agent.ask`) appends the input to the stream, then loops: run the
assembly chain on a copy of the history → call the model → if it asked for tools,
run them (concurrently; results recorded in call order) and go again, at most
``max_tool_rounds`` times → the final :class:`~agentsdk.events.ModelMessage` is the
reply. Every event appended to the stream is also published to the agent's
observers (:meth:`Agent.subscribe`, :meth:`Agent.events`).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from agentsdk._assembly import AssemblyContext, AssemblyPolicy, run_assembly
from agentsdk.config import ModelConfig, streams
from agentsdk.events import (
    BaseEvent,
    HaltEvent,
    ImageInput,
    ModelMessage,
    ModelMessageChunk,
    ModelRequest,
    TextInput,
    ToolCall,
    ToolCallEvent,
    ToolResultEvent,
    Usage,
)
from agentsdk.llm_messages import events_to_messages
from agentsdk.routing import Finish, Handoff
from agentsdk.stream import Stream
from agentsdk.tools import Tool, ToolLike, as_tool

if TYPE_CHECKING:
    from agentsdk.a2a.client import AgentToAgent
    from agentsdk.knowledge_config import KnowledgeRuntime
    from agentsdk.mcp import MCPServer, MCPTool

__all__ = ["Agent", "AskInput", "ChunkHandler", "EventCallback", "EventFeed", "FinishReason", "Reply"]

log = logging.getLogger(__name__)

AskInput = str | BaseEvent | Sequence[BaseEvent] | None
"""What :meth:`Agent.ask` accepts: text, one event, events (``TextInput`` s and ``ImageInput`` s
are grouped into one ``ModelRequest``), or ``None`` to run on the stream's history alone."""

ChunkHandler = Callable[[ModelMessageChunk], Awaitable[None] | None]
"""``ask(..., on_chunk=...)``: called with each :class:`ModelMessageChunk` of a streaming model."""

EventCallback = Callable[[BaseEvent], Awaitable[None] | None]
"""An observer: called with every event the agent emits (sync or async)."""

FinishReason = Literal["stop", "max_tool_rounds", "halted"]
"""Why a turn ended."""


@dataclass(slots=True)
class Reply:
    """The outcome of one :meth:`Agent.ask` turn."""

    body: str
    """The final assistant text ("" when halted)."""
    events: list[BaseEvent]
    """This turn's events, in order (input included), as appended to the stream."""
    stream: Stream
    """The stream the turn ran on (history + this turn)."""
    usage: Usage = field(default_factory=Usage)
    """Tokens spent by all model calls of the turn."""
    tool_calls: list[ToolCall] = field(default_factory=list)
    """Every tool call the model made this turn, in order."""
    tool_results: list[ToolResultEvent] = field(default_factory=list)
    """Their results, in the same order."""
    halted: bool = False
    """True when an assembly policy halted the turn."""
    finish_reason: FinishReason = "stop"
    """``stop`` (the model answered), ``max_tool_rounds`` or ``halted``."""


class EventFeed:
    """An async iterator over the events an agent emits, with a bounded queue.

    When the queue is full the oldest event is dropped (counted in :attr:`dropped`) so
    a slow reader never stalls the agent. Close it (or leave the ``async with``) to stop.
    """

    def __init__(self, agent: Agent, maxsize: int) -> None:
        self._agent = agent
        self._queue: asyncio.Queue[BaseEvent | None] = asyncio.Queue(maxsize=maxsize)
        self._closed = False
        self.dropped = 0
        """Events discarded because the queue was full."""

    def _put(self, event: BaseEvent | None) -> None:
        if self._queue.full():
            self._queue.get_nowait()
            self.dropped += 1
        self._queue.put_nowait(event)

    async def next(self, timeout: float | None = None) -> BaseEvent:
        """The next event; ``TimeoutError`` after ``timeout`` seconds, ``StopAsyncIteration`` once closed."""
        if self._closed and self._queue.empty():
            raise StopAsyncIteration
        event = await asyncio.wait_for(self._queue.get(), timeout)
        if event is None:
            raise StopAsyncIteration
        return event

    def close(self) -> None:
        """Stop receiving; a pending :meth:`next` ends with ``StopAsyncIteration``."""
        if not self._closed:
            self._closed = True
            self._agent._feeds.discard(self)
            self._put(None)

    def __aiter__(self) -> AsyncIterator[BaseEvent]:
        return self

    async def __anext__(self) -> BaseEvent:
        return await self.next()

    async def __aenter__(self) -> EventFeed:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class Agent:
    """An LLM agent: a name, a system prompt, a model config, tools and dependencies."""

    def __init__(
        self,
        name: str,
        prompt: str = "",
        *,
        config: ModelConfig,
        tools: Iterable[ToolLike] = (),
        dependencies: Mapping[Any, Any] | None = None,
        knowledge: Any = None,
        assembly: Iterable[AssemblyPolicy] | None = None,
        max_tool_rounds: int = 10,
        mcp_servers: Iterable[MCPServer] = (),
    ) -> None:
        if max_tool_rounds < 0:
            raise ValueError("max_tool_rounds must be >= 0")
        self.name = name
        """The agent's name."""
        self.prompt = prompt
        """System prompt (first entry of the assembly ``prompts``)."""
        self.config = config
        """The model used for every call."""
        self.tools: list[Tool] = [as_tool(t) for t in tools]
        """The agent's own tools; mutable (plugins append to it). Plain callables are wrapped."""
        self.dependencies: dict[Any, Any] = dict(dependencies or {})
        """Values for injected tool parameters and assembly policies, by key (string or type)."""
        self.knowledge = knowledge
        """The ``KnowledgeConfig``; its ``store`` is registered as the ``KnowledgeStore`` dependency.

        A full :class:`~agentsdk.knowledge_config.KnowledgeConfig` also adds the ``knowledge``
        tool, store bootstrap, compaction, aggregation and the ``/log/`` event log; any other
        object with a ``store`` attribute only registers the dependency."""
        self.assembly: list[AssemblyPolicy] = list(assembly or ())
        """Assembly policies run, in order, before every model call."""
        self.max_tool_rounds = max_tool_rounds
        self.network: Any = None
        """The AgentClient once the agent is registered on a hub (set by ``hc.register``)."""
        """How many rounds of tool calls one turn may run before it is stopped."""
        self.mcp_servers: list[MCPServer] = list(mcp_servers)
        """MCP servers whose tools the agent offers beside its own (``docs/mcp.md``); connected by
        :meth:`start` (or the first ``ask``), closed by :meth:`stop`."""
        self._mcp_tools: list[MCPTool] | None = None
        self._mcp_lock = asyncio.Lock()
        self._callbacks: list[EventCallback] = []
        self._feeds: set[EventFeed] = set()
        store = getattr(knowledge, "store", None)
        if store is not None:
            from knowledgestore.types import KnowledgeStore

            self.dependencies.setdefault(KnowledgeStore, store)
        self._knowledge_runtime: KnowledgeRuntime | None = None
        if knowledge is not None:
            from agentsdk.knowledge_config import KnowledgeConfig, KnowledgeRuntime

            if isinstance(knowledge, KnowledgeConfig):
                self._knowledge_runtime = KnowledgeRuntime(knowledge)

    def __repr__(self) -> str:
        return f"Agent(name={self.name!r}, tools={[t.name for t in self.tools]!r})"

    def task(self, title: str = "", **options: Any) -> Any:
        """``async with agent.task("title") as task:`` — own a task mirrored to the hub.

        Needs the agent registered on a hub (``hc.register(agent, ...)``); see
        :meth:`agentsdk.network.AgentClient.task` for the options.
        """
        if self.network is None:
            raise RuntimeError("agent.task() needs the agent registered on a hub: hc.register(agent, passport, resume)")
        return self.network.task(title, **options)

    @property
    def a2a(self) -> AgentToAgent | None:
        """The pre-authenticated A2A client of this agent's hub identity (see ``docs/a2a.md``);
        None when it is not on a hub, or its A2A is disabled or disconnected."""
        return self.network.a2a if self.network is not None else None

    def a2a_tools(self) -> list[Tool]:
        """The A2A LLM tools of this agent's hub identity (``discover_available_agents``,
        ``invoke_a2a_agent``); empty when it is not on a hub or its A2A is disabled, so adding
        them everywhere is safe. ``hc.register(..., a2a=...)`` already adds them to ``tools``."""
        return self.network.a2a_tools() if self.network is not None else []

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Start the agent's MCP servers and list their tools (the first ``ask`` does it too);
        idempotent. Raises :class:`~agentsdk.mcp.MCPError` (nothing left running) when one fails."""
        async with self._mcp_lock:
            if self._mcp_tools is not None or not self.mcp_servers:
                return
            from agentsdk.mcp import mcp_tools

            results = await asyncio.gather(*(s.start() for s in self.mcp_servers), return_exceptions=True)
            failed = next((r for r in results if isinstance(r, BaseException)), None)
            if failed is None:
                try:
                    self._mcp_tools = mcp_tools(self.mcp_servers, reserved=[t.name for t in self.tools])
                    return
                except Exception as exc:
                    failed = exc
            await asyncio.gather(*(s.stop() for s in self.mcp_servers))
            raise failed

    async def stop(self) -> None:
        """Stop the agent's MCP servers (a stdio server's process ends); idempotent. A later
        ``ask`` or :meth:`start` starts them again."""
        async with self._mcp_lock:
            self._mcp_tools = None
            await asyncio.gather(*(s.stop() for s in self.mcp_servers))

    async def __aenter__(self) -> Agent:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    # ------------------------------------------------------------------ observers

    def subscribe(self, callback: EventCallback) -> Callable[[], None]:
        """Call ``callback`` with every event emitted during asks; returns an unsubscribe function.

        Callbacks run in emission order; an async callback is awaited before the turn
        continues. Exceptions they raise are logged and ignored.
        """
        self._callbacks.append(callback)

        def unsubscribe() -> None:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

        return unsubscribe

    def events(self, *, maxsize: int = 1000) -> EventFeed:
        """An :class:`EventFeed` of every event emitted from now on."""
        feed = EventFeed(self, maxsize)
        self._feeds.add(feed)
        return feed

    async def publish(self, event: BaseEvent) -> None:
        """Deliver ``event`` to observers (used by the turn loop and by harness components)."""
        for feed in list(self._feeds):
            feed._put(event)
        for callback in list(self._callbacks):
            try:
                result = callback(event)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("agent %r: event observer %r failed on %s", self.name, callback, event.event_type)

    # ------------------------------------------------------------------ the turn

    def tools_for_call(self, extra: Iterable[ToolLike] | None = None) -> list[Tool]:
        """The agent's tools, its started MCP servers' tools, then ``extra`` (which add, never
        replace); a name used twice is an error."""
        result: list[Tool] = []
        by_name: dict[str, Tool] = {}
        for candidate in [*self.tools, *(self._mcp_tools or ()), *(as_tool(t) for t in extra or ())]:
            existing = by_name.get(candidate.name)
            if existing is candidate:
                continue
            if existing is not None:
                raise ValueError(f"agent {self.name!r}: two different tools are named {candidate.name!r}")
            by_name[candidate.name] = candidate
            result.append(candidate)
        return result

    async def ask(
        self,
        input: AskInput = None,
        *,
        tools: Iterable[ToolLike] | None = None,
        dependencies: Mapping[Any, Any] | None = None,
        stream: Stream | None = None,
        on_chunk: ChunkHandler | None = None,
    ) -> Reply:
        """Run one turn.

        ``input`` is appended to ``stream`` (a fresh :class:`Stream` when ``None``),
        whose existing events are the history the model sees. ``tools`` are added to
        the agent's tools for this call; ``dependencies`` are merged over the agent's,
        which are merged over a registered agent's network ones (its client, hub and,
        inside ``agent.task(...)``, that task), so the network tools work in any turn.
        When the model streams (``OpenAIConfig(streaming=True)``), each text delta is published
        to the observers as a :class:`ModelMessageChunk` (not appended to the stream) and handed
        to ``on_chunk`` (sync or async; awaited before the stream is read on).
        Raises what the model config raises (e.g. ``openai.APIError``) and
        :class:`~agentsdk.tools.MissingDependencyError`; tool failures are shown to the model.
        When it raises, the events emitted so far (the input included) stay in ``stream``.
        """
        if self.mcp_servers and self._mcp_tools is None:
            await self.start()
        runtime = self._knowledge_runtime
        knowledge_tools: list[ToolLike] = list(runtime.tools) if runtime is not None else []
        turn = _Turn(
            agent=self,
            stream=stream if stream is not None else Stream(),
            tools=self.tools_for_call([*knowledge_tools, *(tools or ())]),
            dependencies={**self._network_dependencies(), **self.dependencies, **(dependencies or {})},
            on_chunk=on_chunk,
        )
        return await turn.run(_input_events(input))

    def _network_dependencies(self) -> dict[Any, Any]:
        """What a registered agent's every turn gets (its client, hub and current task), handler or not."""
        turn_dependencies = getattr(self.network, "turn_dependencies", None)
        return dict(turn_dependencies()) if turn_dependencies is not None else {}


def _input_events(input: AskInput) -> list[BaseEvent]:
    if input is None:
        return []
    if isinstance(input, str):
        return [ModelRequest([TextInput(input)])] if input else []
    items: Sequence[BaseEvent] = [input] if isinstance(input, BaseEvent) else input
    out: list[BaseEvent] = []
    texts: list[TextInput | ImageInput | ToolResultEvent] = []
    for item in items:
        if not isinstance(item, BaseEvent):
            raise TypeError(f"ask() input must be a str or events, got {type(item).__name__}")
        if isinstance(item, TextInput | ImageInput):
            texts.append(item)
            continue
        if texts:
            out.append(ModelRequest(list(texts)))
            texts = []
        out.append(item)
    if texts:
        out.append(ModelRequest(texts))
    return out


@dataclass
class _Turn:
    """State of one ``ask``."""

    agent: Agent
    stream: Stream
    tools: list[Tool]
    dependencies: dict[Any, Any]
    on_chunk: ChunkHandler | None = None
    events: list[BaseEvent] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    calls: list[ToolCall] = field(default_factory=list)
    results: list[ToolResultEvent] = field(default_factory=list)

    async def emit(self, event: BaseEvent) -> None:
        self.stream.append(event)
        self.events.append(event)
        await self.agent.publish(event)

    def reply(self, body: str, finish_reason: FinishReason) -> Reply:
        return Reply(
            body=body,
            events=self.events,
            stream=self.stream,
            usage=self.usage,
            tool_calls=self.calls,
            tool_results=self.results,
            halted=finish_reason == "halted",
            finish_reason=finish_reason,
        )

    async def run(self, input_events: list[BaseEvent]) -> Reply:
        runtime = self.agent._knowledge_runtime
        if runtime is not None:
            await runtime.start_turn(self.agent)
        reply = await self.loop(input_events)
        if runtime is not None:
            await runtime.end_turn(self.agent, self.stream, self.dependencies, self.emit)
        return reply

    async def loop(self, input_events: list[BaseEvent]) -> Reply:
        for event in input_events:
            await self.emit(event)
        runtime = self.agent._knowledge_runtime
        schemas = [t.schema() for t in self.tools]
        by_name = {t.name: t for t in self.tools}
        rounds = 0
        model_call = 0
        while True:
            if runtime is not None:
                await runtime.before_model_call(self.agent, self.stream, self.dependencies, self.emit)
            prompts = [self.agent.prompt] if self.agent.prompt else []
            history = list(self.stream.events)
            if self.agent.assembly:
                context = AssemblyContext(
                    agent=self.agent, stream=self.stream, dependencies=self.dependencies, model_call=model_call
                )
                prompts, history = await run_assembly(self.agent.assembly, prompts, history, context)
                known = {e.id for e in self.stream.events}
                halt = next((e for e in history if isinstance(e, HaltEvent) and e.id not in known), None)
                if halt is not None:
                    await self.emit(halt)
                    return self.reply("", "halted")
            message = await self.complete(events_to_messages(prompts, history), schemas, model_call)
            model_call += 1
            await self.emit(message)
            if message.usage is not None:
                self.usage = self.usage + message.usage
            if not message.tool_calls:
                return self.reply(message.text, "stop")
            if rounds >= self.agent.max_tool_rounds:
                return await self.stop_at_round_limit(message.tool_calls)
            rounds += 1
            await self.run_tools(message.tool_calls, by_name)

    async def complete(self, messages: list[dict[str, Any]], schemas: list[dict[str, Any]], call: int) -> ModelMessage:
        """One model call; a streaming model's deltas go to the observers and ``on_chunk`` as they come."""
        config = self.agent.config
        if not streams(config):
            return await config.complete(messages, schemas)

        async def chunk(delta: str) -> None:
            event = ModelMessageChunk(delta, call=call)
            await self.agent.publish(event)
            if self.on_chunk is not None:
                result = self.on_chunk(event)
                if inspect.isawaitable(result):
                    await result

        completed: ModelMessage = await config.complete(messages, schemas, on_chunk=chunk)  # type: ignore[call-arg]
        return completed

    async def run_tools(self, calls: list[ToolCall], by_name: Mapping[str, Tool]) -> None:
        for call in calls:
            await self.emit(ToolCallEvent(call.id, call.name, dict(call.arguments)))
        outputs = await asyncio.gather(*(self.run_one(call, by_name) for call in calls))
        for call, result in zip(calls, outputs, strict=True):
            self.calls.append(call)
            self.results.append(result)
            await self.emit(result)

    async def run_one(self, call: ToolCall, by_name: Mapping[str, Tool]) -> ToolResultEvent:
        found = by_name.get(call.name)
        if found is None:
            available = ", ".join(sorted(by_name)) or "none"
            return ToolResultEvent(
                call.id, call.name, f"Error: there is no tool named {call.name!r} (available: {available})", True
            )
        if call.raw_arguments is not None:
            return ToolResultEvent(
                call.id,
                call.name,
                f"Error: the arguments for tool {call.name!r} are not a JSON object: {call.raw_arguments!r}",
                True,
            )
        output = await found.invoke(call.arguments, self.dependencies)
        routing = output.value if isinstance(output.value, Handoff | Finish) else None
        return ToolResultEvent(call.id, call.name, output.content, output.is_error, routing=routing)

    async def stop_at_round_limit(self, calls: list[ToolCall]) -> Reply:
        limit = self.agent.max_tool_rounds
        for call in calls:
            self.calls.append(call)
            result = ToolResultEvent(
                call.id, call.name, f"Not run: the limit of {limit} tool rounds for this turn was reached.", True
            )
            self.results.append(result)
            await self.emit(result)
        body = (
            f"Stopped: the model was still calling tools after {limit} tool rounds "
            f"(max_tool_rounds={limit}); no final answer was produced."
        )
        await self.emit(ModelMessage(text=body, finish_reason="max_tool_rounds"))
        return self.reply(body, "max_tool_rounds")
