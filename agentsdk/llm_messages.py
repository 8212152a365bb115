"""Our events as an LLM's chat messages and back: the one conversion between the agent's history
(:mod:`agentsdk.events`, which :mod:`agentsdk.network.views` projects a channel's envelopes into)
and the OpenAI chat-completions format every :class:`~agentsdk.config.ModelConfig` speaks.

* :func:`events_to_messages` — system prompts and history events → OpenAI chat messages (the
  one place; a channel's envelopes reach the model through it);
* :func:`message_from_completion` / :func:`message_from_chunks` — a chat completion (whole or
  streamed) → a :class:`~agentsdk.events.ModelMessage`.

:mod:`agentsdk.config` re-exports these names (their old import path).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Sequence
from typing import Any

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

__all__ = [
    "NO_RESULT",
    "ChatMessage",
    "ChunkCallback",
    "events_to_messages",
    "message_from_chunks",
    "message_from_completion",
]

ChatMessage = dict[str, Any]
"""One OpenAI chat message (``{"role": ..., "content": ..., ...}``)."""

ChunkCallback = Callable[[str], Awaitable[None]]
"""Called with each text delta of a streamed completion, in order (``complete(..., on_chunk=...)``)."""

NO_RESULT = "(no result was recorded for this tool call)"
"""Content of the placeholder ``tool`` message for a call whose result is not in the history."""


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
