"""Model configurations: how an agent runs one completion.

A :class:`ModelConfig` takes OpenAI-format chat messages and function-tool schemas
and returns a :class:`~agentsdk.events.ModelMessage`. :class:`OpenAIConfig` talks to
any OpenAI-compatible endpoint through ``openai.AsyncOpenAI``; :class:`ScriptedConfig`
replays scripted replies with no HTTP (tests, demos).

The conversion between our events and chat messages (:func:`events_to_messages`,
:func:`message_from_completion`, :func:`message_from_chunks`) lives in :mod:`agentsdk.llm_messages`;
this module re-exports it.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from agentsdk.events import ModelMessage, ToolCall, Usage
from agentsdk.llm_messages import (
    NO_RESULT,
    ChatMessage,
    ChunkCallback,
    events_to_messages,
    message_from_chunks,
    message_from_completion,
)

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = [
    "NO_RESULT",
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

ToolSchema = dict[str, Any]
"""One OpenAI function-tool definition (``Tool.schema()``)."""


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
