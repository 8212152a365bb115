"""Model configurations: how an agent runs one completion.

A :class:`ModelConfig` takes OpenAI-format chat messages and function-tool schemas
and returns a :class:`~agentsdk.events.ModelMessage`. :class:`OpenAIConfig` talks to
any OpenAI-compatible endpoint through ``openai.AsyncOpenAI``; :class:`ScriptedConfig`
replays scripted replies with no HTTP (tests, demos).

:func:`events_to_messages` is the one place our events become OpenAI chat messages;
:func:`message_from_completion` turns a chat completion back into an event.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from agentsdk.events import (
    BaseEvent,
    CompactionSummary,
    ImageInput,
    ModelMessage,
    ModelRequest,
    SystemPrompt,
    TextInput,
    ToolCall,
    ToolCallEvent,
    ToolResultEvent,
    Usage,
)

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = [
    "ChatMessage",
    "ChunkCallback",
    "ModelConfig",
    "OpenAIConfig",
    "ScriptExhaustedError",
    "ScriptedConfig",
    "ScriptedReply",
    "ToolSchema",
    "estimate_tokens",
    "events_to_messages",
    "message_from_chunks",
    "message_from_completion",
    "reply_to_message",
    "streams",
]

ChatMessage = dict[str, Any]
"""One OpenAI chat message (``{"role": ..., "content": ..., ...}``)."""
ToolSchema = dict[str, Any]
"""One OpenAI function-tool definition (``Tool.schema()``)."""

ChunkCallback = Callable[[str], Awaitable[None]]
"""Called with each text delta of a streamed completion, in order (``complete(..., on_chunk=...)``)."""

NO_RESULT = "(no result was recorded for this tool call)"
"""Content of the placeholder ``tool`` message for a call whose result is not in the history."""


@runtime_checkable
class ModelConfig(Protocol):
    """Something that can run one chat completion."""

    async def complete(self, messages: Sequence[ChatMessage], tools: Sequence[ToolSchema]) -> ModelMessage:
        """Run one completion over OpenAI-format ``messages`` offering ``tools``; return the reply."""
        ...


def streams(config: Any) -> bool:
    """True when ``config`` streams its completions: its ``streaming`` attribute is true, and its
    ``complete`` then takes ``on_chunk=`` (:data:`ChunkCallback`), called with each text delta."""
    return getattr(config, "streaming", False) is True


# ---------------------------------------------------------------------------- events → messages


def _arguments_text(call: ToolCall) -> str:
    return call.raw_arguments if call.raw_arguments is not None else json.dumps(call.arguments, ensure_ascii=False)


def _call_message(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": _arguments_text(call)}}


class _MessageBuilder:
    """Builds a valid OpenAI message list: every assistant ``tool_calls`` block is directly
    followed by one ``tool`` message per call (placeholders for missing results), and
    results whose call is not in the open block are shown as user text instead."""

    def __init__(self) -> None:
        self.messages: list[ChatMessage] = []
        self.pending: dict[str, str] = {}  # call id → tool name, for the open tool-call block
        self.announced: set[str] = set()

    def _close_block(self) -> None:
        for call_id in self.pending:
            self.messages.append({"role": "tool", "tool_call_id": call_id, "content": NO_RESULT})
        self.pending.clear()

    def add(self, message: ChatMessage) -> None:
        self._close_block()
        self.messages.append(message)

    def add_calls(self, text: str, calls: Sequence[ToolCall]) -> None:
        self._close_block()
        message: ChatMessage = {"role": "assistant", "content": text or None}
        if calls:
            message["tool_calls"] = [_call_message(c) for c in calls]
        self.messages.append(message)
        for call in calls:
            self.pending[call.id] = call.name
            self.announced.add(call.id)

    def add_orphan_call(self, call: ToolCall) -> None:
        """A ``ToolCallEvent`` whose call no ``ModelMessage`` announced (e.g. a projected history)."""
        last = self.messages[-1] if self.messages else None
        if last is not None and last["role"] == "assistant" and self.pending and not self._results_started():
            last.setdefault("tool_calls", []).append(_call_message(call))
            self.pending[call.id] = call.name
            self.announced.add(call.id)
        else:
            self.add_calls("", [call])

    def _results_started(self) -> bool:
        return bool(self.messages) and self.messages[-1]["role"] == "tool"

    def add_result(self, result: ToolResultEvent) -> None:
        if result.call_id in self.pending:
            del self.pending[result.call_id]
            self.messages.append({"role": "tool", "tool_call_id": result.call_id, "content": result.content})
        else:
            label = "error from" if result.is_error else "result of"
            self.add({"role": "user", "content": f"[{label} tool {result.name}]\n{result.content}"})

    def finish(self) -> list[ChatMessage]:
        self._close_block()
        return self.messages


def _image_part(image: ImageInput) -> dict[str, Any]:
    """An OpenAI ``image_url`` content part."""
    url: dict[str, Any] = {"url": image.model_url}
    if image.detail:
        url["detail"] = image.detail
    return {"type": "image_url", "image_url": url}


def _user_message(parts: Sequence[TextInput | ImageInput]) -> ChatMessage:
    """One ``user`` message: plain text when there are only texts (joined by newlines), else a
    list of ``text`` and ``image_url`` content parts in order."""
    if not any(isinstance(p, ImageInput) for p in parts):
        return {"role": "user", "content": "\n".join(p.text for p in parts if isinstance(p, TextInput))}
    content = [
        {"type": "text", "text": p.text} if isinstance(p, TextInput) else _image_part(p)
        for p in parts
        if not (isinstance(p, TextInput) and not p.text)
    ]
    return {"role": "user", "content": content}


def events_to_messages(prompts: Iterable[str], events: Iterable[BaseEvent]) -> list[ChatMessage]:
    """Map system prompts and history events to OpenAI chat messages.

    * ``prompts`` (non-empty ones) → one leading ``system`` message, joined by blank lines.
    * :class:`SystemPrompt` → ``system``; :class:`CompactionSummary` → ``system`` with the summary.
    * :class:`TextInput` / :class:`ImageInput` / :class:`ModelRequest` → ``user`` (tool-result
      parts → ``tool``); images make the user content a list of ``text`` and ``image_url`` parts.
    * :class:`ModelMessage` → ``assistant`` (with ``tool_calls``).
    * :class:`ToolCallEvent` → merged into the assistant message unless already announced.
    * :class:`ToolResultEvent` → ``tool`` with its ``tool_call_id``.
    * Lifecycle / observer events are not shown to the model.

    The result is always acceptable to the API: unanswered tool calls get a placeholder
    result and results without their call become user text.
    """
    builder = _MessageBuilder()
    system = "\n\n".join(p for p in prompts if p)
    if system:
        builder.add({"role": "system", "content": system})
    for event in events:
        if isinstance(event, SystemPrompt):
            builder.add({"role": "system", "content": event.text})
        elif isinstance(event, TextInput):
            builder.add({"role": "user", "content": event.text})
        elif isinstance(event, ImageInput):
            builder.add(_user_message([event]))
        elif isinstance(event, ModelRequest):
            inputs: list[TextInput | ImageInput] = []
            for part in event.parts:
                if isinstance(part, TextInput | ImageInput):
                    inputs.append(part)
                else:
                    if inputs:
                        builder.add(_user_message(inputs))
                        inputs = []
                    builder.add_result(part)
            if inputs:
                builder.add(_user_message(inputs))
        elif isinstance(event, ModelMessage):
            if event.text or event.tool_calls:
                builder.add_calls(event.text, event.tool_calls)
        elif isinstance(event, ToolCallEvent):
            if event.call_id not in builder.announced:
                builder.add_orphan_call(ToolCall(id=event.call_id, name=event.name, arguments=event.arguments))
        elif isinstance(event, ToolResultEvent):
            builder.add_result(event)
        elif isinstance(event, CompactionSummary):
            builder.add(
                {
                    "role": "system",
                    "content": f"Summary of {event.events_dropped} earlier events:\n{event.summary}",
                }
            )
    return builder.finish()


# ---------------------------------------------------------------------------- completions → events


def _parse_arguments(text: str | None) -> tuple[dict[str, Any], str | None]:
    if not text:
        return {}, None
    try:
        value = json.loads(text)
    except ValueError:
        return {}, text
    if isinstance(value, dict):
        return value, None
    return {}, text


def message_from_completion(completion: Any) -> ModelMessage:
    """Turn an ``openai`` ``ChatCompletion`` (first choice) into a :class:`ModelMessage` with usage."""
    if not completion.choices:
        raise ValueError("the chat completion has no choices")
    choice = completion.choices[0]
    calls: list[ToolCall] = []
    for raw in choice.message.tool_calls or []:
        function = getattr(raw, "function", None)
        if function is None:  # non-function tool calls (custom tools) are not supported
            continue
        arguments, raw_arguments = _parse_arguments(function.arguments)
        calls.append(ToolCall(id=raw.id, name=function.name, arguments=arguments, raw_arguments=raw_arguments))
    usage = None
    if completion.usage is not None:
        usage = Usage(
            prompt_tokens=completion.usage.prompt_tokens or 0,
            completion_tokens=completion.usage.completion_tokens or 0,
            total_tokens=completion.usage.total_tokens or 0,
        )
    return ModelMessage(
        text=choice.message.content or "",
        tool_calls=calls,
        usage=usage,
        model=completion.model,
        finish_reason=choice.finish_reason,
    )


async def message_from_chunks(chunks: AsyncIterable[Any], on_chunk: ChunkCallback | None = None) -> ModelMessage:
    """Join a streamed chat completion (``ChatCompletionChunk`` s, first choice) into a :class:`ModelMessage`.

    ``on_chunk`` is awaited with every non-empty text delta as it arrives; tool calls are
    assembled from their pieces by ``index``; usage is the chunk that reports it (the last,
    with ``stream_options.include_usage``)."""
    text: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    usage: Usage | None = None
    model: str | None = None
    finish_reason: str | None = None
    async for chunk in chunks:
        model = chunk.model or model
        if chunk.usage is not None:
            usage = Usage(
                prompt_tokens=chunk.usage.prompt_tokens or 0,
                completion_tokens=chunk.usage.completion_tokens or 0,
                total_tokens=chunk.usage.total_tokens or 0,
            )
        for choice in chunk.choices[:1]:
            finish_reason = choice.finish_reason or finish_reason
            delta = choice.delta
            if delta.content:
                text.append(delta.content)
                if on_chunk is not None:
                    await on_chunk(delta.content)
            for piece in delta.tool_calls or []:
                acc = calls.setdefault(piece.index, {"id": "", "name": "", "arguments": ""})
                acc["id"] = piece.id or acc["id"]
                if piece.function is not None:
                    acc["name"] = piece.function.name or acc["name"]
                    acc["arguments"] += piece.function.arguments or ""
    tool_calls = []
    for index in sorted(calls):
        acc = calls[index]
        arguments, raw_arguments = _parse_arguments(acc["arguments"])
        tool_calls.append(ToolCall(id=acc["id"], name=acc["name"], arguments=arguments, raw_arguments=raw_arguments))
    return ModelMessage(
        text="".join(text), tool_calls=tool_calls, usage=usage, model=model, finish_reason=finish_reason
    )


# ---------------------------------------------------------------------------- OpenAI


@dataclass
class OpenAIConfig:
    """A model behind an OpenAI-compatible chat-completions endpoint (``openai.AsyncOpenAI``).

    The client is created on first use and reused.
    """

    model: str
    """Model name, e.g. ``"gpt-5"``."""
    base_url: str | None = None
    """Endpoint, e.g. ``"http://127.0.0.1:8000/v1"``; ``None`` uses the client default/``OPENAI_BASE_URL``."""
    api_key: str | None = field(default=None, repr=False)
    """API key; ``None`` uses ``OPENAI_API_KEY``. Never in a repr (logs, tracebacks)."""
    temperature: float | None = None
    """Sampling temperature (omitted when ``None``)."""
    max_tokens: int | None = None
    """Completion token limit, sent as ``max_tokens`` (omitted when ``None``)."""
    extra_body: dict[str, Any] | None = None
    """Extra JSON fields merged into the request body (provider-specific options)."""
    timeout: float = 60.0
    """Per-request timeout in seconds."""
    max_retries: int = 2
    """Retries the client makes on connection errors, 429 and 5xx."""
    streaming: bool = False
    """Stream each completion (``stream: true`` with ``stream_options.include_usage``): the text
    arrives as deltas, handed to ``complete``'s ``on_chunk`` (an agent publishes them as
    :class:`~agentsdk.events.ModelMessageChunk` events; on a hub they go to the channel)."""
    _client: AsyncOpenAI | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def client(self) -> AsyncOpenAI:
        """The shared ``openai.AsyncOpenAI`` client (created on first access)."""
        if self._client is None:
            from openai import AsyncOpenAI

            self._client = AsyncOpenAI(
                api_key=self.api_key, base_url=self.base_url, timeout=self.timeout, max_retries=self.max_retries
            )
        return self._client

    async def complete(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSchema], *, on_chunk: ChunkCallback | None = None
    ) -> ModelMessage:
        """One chat completion: a POST to ``/chat/completions`` through the client.

        With :attr:`streaming`, the response is read as server-sent chunks: ``on_chunk`` is awaited
        with each text delta in order (the stream is read no faster than it returns), tool call
        pieces are joined by index, and the returned message is the whole of it, with the usage
        of the final chunk.

        The body is what ``chat.completions.create`` would send, built here as plain JSON:
        ``create`` first walks every message and tool schema through the client's typed
        transform (aliases, base64 file parts), which changes nothing in the messages this
        SDK builds (text, tool calls, tool results) but cost a fifth of an agent process's
        CPU per turn. The client's own ``post`` keeps its base URL, headers, timeout and
        retries; ``extra_body`` is merged last, as ``create`` merges it.
        """
        from openai.types.chat import ChatCompletion

        body: dict[str, Any] = {"model": self.model, "messages": list(messages)}
        if tools:
            body["tools"] = list(tools)
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if self.streaming:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        if self.extra_body:
            body.update(self.extra_body)
        if not self.streaming:
            completion = await self.client.post("/chat/completions", body=body, cast_to=ChatCompletion)
            return message_from_completion(completion)
        from openai import AsyncStream
        from openai.types.chat import ChatCompletionChunk

        chunks = await self.client.post(
            "/chat/completions",
            body=body,
            cast_to=ChatCompletion,
            stream=True,
            stream_cls=AsyncStream[ChatCompletionChunk],
        )
        return await message_from_chunks(chunks, on_chunk)

    async def aclose(self) -> None:
        """Close the HTTP client (a new one is created if the config is used again)."""
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()


# ---------------------------------------------------------------------------- scripted


ScriptedReply = str | ModelMessage | ToolCall | list[ToolCall] | BaseException | Callable[..., Any]
"""One scripted reply: text, a full :class:`ModelMessage`, one or several :class:`ToolCall` s,
an exception to raise, or a callable producing one of those (may be async)."""


class ScriptExhaustedError(LookupError):
    """A scripted model was asked for more replies than it was given."""


def reply_to_message(reply: Any) -> ModelMessage:
    """Normalise a non-callable :data:`ScriptedReply` into a fresh :class:`ModelMessage`."""
    if isinstance(reply, str):
        return ModelMessage(text=reply, finish_reason="stop")
    if isinstance(reply, ToolCall):
        reply = [reply]
    if isinstance(reply, list) and all(isinstance(c, ToolCall) for c in reply) and reply:
        calls = [
            ToolCall(id=c.id, name=c.name, arguments=dict(c.arguments), raw_arguments=c.raw_arguments) for c in reply
        ]
        return ModelMessage(tool_calls=calls, finish_reason="tool_calls")
    if isinstance(reply, ModelMessage):
        return ModelMessage(
            text=reply.text,
            tool_calls=list(reply.tool_calls),
            usage=reply.usage,
            model=reply.model,
            finish_reason=reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop"),
        )
    raise TypeError(
        f"unsupported scripted reply {reply!r}: use a str, a ModelMessage, a ToolCall, a list of ToolCalls, "
        "an exception or a callable"
    )


def estimate_tokens(value: Any) -> int:
    """A rough token count (4 characters per token) used when no provider reports usage."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return max(1, len(text) // 4) if text else 0


class ScriptedConfig:
    """A model that replays scripted replies in order — no HTTP.

    Each call to :meth:`complete` consumes the next reply. A callable reply is called
    with ``(messages, tools)`` (OpenAI-format, exactly what a server would receive) and
    may return any other reply kind; an exception reply is raised. Usage is estimated
    at 4 characters per token unless the reply carries its own.
    """

    def __init__(self, responses: Iterable[ScriptedReply], *, model: str = "scripted") -> None:
        self.responses: list[ScriptedReply] = list(responses)
        """Replies not consumed yet."""
        self.model = model
        """Model name reported on each :class:`ModelMessage`."""
        self.requests: list[tuple[list[ChatMessage], list[ToolSchema]]] = []
        """Every ``(messages, tools)`` this model was called with."""
        self.calls = 0
        """How many completions were requested."""

    def add(self, *responses: ScriptedReply) -> None:
        """Append more replies to the script."""
        self.responses.extend(responses)

    async def complete(self, messages: Sequence[ChatMessage], tools: Sequence[ToolSchema]) -> ModelMessage:
        """Return the next scripted reply."""
        snapshot = (json.loads(json.dumps(list(messages))), json.loads(json.dumps(list(tools))))
        self.requests.append(snapshot)
        self.calls += 1
        if not self.responses:
            raise ScriptExhaustedError(
                f"ScriptedConfig ran out of replies: completion #{self.calls} requested but the script had "
                f"{self.calls - 1}; the last message was {messages[-1] if messages else None!r}"
            )
        reply: Any = self.responses.pop(0)
        if callable(reply) and not isinstance(reply, BaseException | ToolCall):
            reply = reply(snapshot[0], snapshot[1])
            if inspect.isawaitable(reply):
                reply = await _await_any(reply)
        if isinstance(reply, BaseException):
            raise reply
        message = reply_to_message(reply)
        message.model = message.model or self.model
        if message.usage is None:
            prompt = estimate_tokens(snapshot)
            completion = estimate_tokens(message.text) + sum(estimate_tokens(c.arguments) for c in message.tool_calls)
            message.usage = Usage(prompt, completion, prompt + completion)
        return message


async def _await_any(value: Awaitable[Any]) -> Any:
    """Await an awaitable whose result type is unknown."""
    return await value
