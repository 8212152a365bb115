"""The event taxonomy an LLM turn is made of.

A conversation is an ordered list of events (a :class:`agentsdk.stream.Stream`):
what the user said (:class:`ModelRequest`), what the model answered
(:class:`ModelMessage`, possibly with :class:`ToolCall` s), which tools ran
(:class:`ToolCallEvent` / :class:`ToolResultEvent`), and lifecycle events the
harness emits around compaction, aggregation, event logging and halting.

Every event is a dataclass with an ``id`` and a ``created_at`` timestamp (both
keyword-only, filled in automatically) and serialises to a JSON-compatible dict
with :meth:`BaseEvent.to_dict`; :func:`event_from_dict` reads it back. The dict
carries the class name under ``"type"``. Nested values (``ToolCall``, ``Usage``,
the parts of a ``ModelRequest``) are tagged the same way.
"""

from __future__ import annotations

import base64
import dataclasses
import mimetypes
import os
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

from agentsdk.routing import Finish, Handoff

__all__ = [
    "AggregationCompleted",
    "AggregationFailed",
    "AggregationStarted",
    "AlertLevel",
    "BaseEvent",
    "CompactionCompleted",
    "CompactionFailed",
    "CompactionStarted",
    "CompactionSummary",
    "EventLogFailed",
    "HaltEvent",
    "ImageInput",
    "ModelMessage",
    "ModelMessageChunk",
    "ModelRequest",
    "ObserverAlert",
    "RequestPart",
    "SystemPrompt",
    "TaskCancelled",
    "TaskCompleted",
    "TaskFailed",
    "TaskProgress",
    "TaskStarted",
    "TextInput",
    "ToolCall",
    "ToolCallEvent",
    "ToolResultEvent",
    "Usage",
    "describe_error",
    "event_from_dict",
    "new_id",
    "utc_now",
]

_REGISTRY: dict[str, type[Any]] = {}
_RAW = {"raw": True}  # field metadata: a free-form JSON value, never decoded as tagged records

_T = TypeVar("_T")
_REGISTRY.update({"Handoff": Handoff, "Finish": Finish})  # nested in ToolResultEvent.routing


def new_id() -> str:
    """A fresh random identifier (32 hex characters)."""
    return uuid.uuid4().hex


def utc_now() -> str:
    """The current time as an ISO-8601 UTC string with a ``Z`` suffix."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _record(cls: type[_T]) -> type[_T]:
    """Register a dataclass under its class name so tagged dicts can be decoded."""
    _REGISTRY[cls.__name__] = cls
    return cls


_BYTES_TAG = "__bytes__"  # bytes values serialise as {"__bytes__": "<base64>"}


def _encode(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return {_BYTES_TAG: base64.b64encode(value).decode("ascii")}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {"type": type(value).__name__}
        for f in dataclasses.fields(value):
            out[f.name] = _encode(getattr(value, f.name))
        return out
    if isinstance(value, list | tuple):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _encode(v) for k, v in value.items()}
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if isinstance(value, dict):
        if set(value) == {_BYTES_TAG} and isinstance(value[_BYTES_TAG], str):
            return base64.b64decode(value[_BYTES_TAG])
        tag = value.get("type")
        if isinstance(tag, str) and tag in _REGISTRY:
            return _build(_REGISTRY[tag], value)
        return {k: _decode(v) for k, v in value.items()}
    return value


def _build(cls: type[_T], data: dict[str, Any]) -> _T:
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name not in data or not f.init:
            continue
        raw = data[f.name]
        kwargs[f.name] = raw if f.metadata.get("raw") else _decode(raw)
    # Unknown keys are ignored so logs written by a newer version still load.
    return cls(**kwargs)


@_record
@dataclass(slots=True)
class Usage:
    """Token accounting for one or more model calls."""

    prompt_tokens: int = 0
    """Tokens in the request (messages and tool schemas)."""
    completion_tokens: int = 0
    """Tokens the model generated."""
    total_tokens: int = 0
    """``prompt_tokens + completion_tokens`` as reported by the provider."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
        )


@_record
@dataclass(slots=True)
class ToolCall:
    """One function call the model asked for."""

    id: str
    """Provider-assigned call id; the matching :class:`ToolResultEvent` carries it as ``call_id``."""
    name: str
    """Name of the tool to call."""
    arguments: dict[str, Any] = field(default_factory=dict, metadata=_RAW)
    """Decoded JSON arguments (empty when the model sent something that is not a JSON object)."""
    raw_arguments: str | None = None
    """The argument text exactly as sent, kept only when it was not a JSON object."""

    @classmethod
    def create(cls, name: str, arguments: dict[str, Any] | None = None, *, id: str | None = None) -> ToolCall:
        """A call with a generated ``call_…`` id (handy in scripts and tests)."""
        return cls(id=id or f"call_{new_id()[:24]}", name=name, arguments=dict(arguments or {}))


@dataclass(slots=True)
class BaseEvent:
    """Base of every event. Subclasses are dataclasses; ``id``/``created_at`` are keyword-only."""

    id: str = field(default_factory=new_id, kw_only=True)
    """Unique event id."""
    created_at: str = field(default_factory=utc_now, kw_only=True)
    """ISO-8601 UTC creation time."""

    def __init_subclass__(cls) -> None:
        # No zero-argument super() here: slots=True dataclasses are re-created classes.
        _REGISTRY[cls.__name__] = cls

    def to_dict(self) -> dict[str, Any]:
        """A JSON-compatible dict with the class name under ``"type"``."""
        encoded: dict[str, Any] = _encode(self)
        return encoded

    @property
    def event_type(self) -> str:
        """The tag this event serialises under (its class name)."""
        return type(self).__name__


def event_from_dict(data: dict[str, Any]) -> BaseEvent:
    """Rebuild an event from :meth:`BaseEvent.to_dict` output.

    Raises ``ValueError`` for a missing or unknown ``type`` tag.
    """
    tag = data.get("type")
    cls = _REGISTRY.get(tag) if isinstance(tag, str) else None
    if cls is None or not issubclass(cls, BaseEvent):
        known = sorted(n for n, c in _REGISTRY.items() if issubclass(c, BaseEvent))
        raise ValueError(f"unknown event type {tag!r}; known types: {', '.join(known)}")
    event: BaseEvent = _build(cls, data)
    return event


@dataclass(slots=True)
class SystemPrompt(BaseEvent):
    """Instructions for the model, placed in the history as a system message."""

    text: str
    """The instruction text."""


@dataclass(slots=True)
class TextInput(BaseEvent):
    """A piece of user text; usually a part of a :class:`ModelRequest`."""

    text: str
    """The text."""


@dataclass(slots=True)
class ToolResultEvent(BaseEvent):
    """What a tool returned (or the error it raised), shown to the model as a ``tool`` message."""

    call_id: str
    """The :attr:`ToolCall.id` this answers."""
    name: str
    """Name of the tool that ran."""
    content: str
    """The result rendered as text (JSON for structured values)."""
    is_error: bool = False
    """True when the call failed (bad arguments, unknown tool, the tool raised)."""
    routing: Handoff | Finish | None = None
    """The typed routing value the tool returned (:class:`~agentsdk.routing.Handoff` /
    :class:`~agentsdk.routing.Finish`), else None; a workflow's round-end packet carries it."""


@dataclass(slots=True)
class ImageInput(BaseEvent):
    """An image for the model; usually a part of a :class:`ModelRequest` (AG2's ``ImageInput``).

    By reference — ``ImageInput("https://example.com/cat.png")`` — or inline —
    ``ImageInput(data=raw_bytes, media_type="image/png")``, or ``ImageInput.from_path("cat.png")``.
    Sent to the model as an OpenAI ``image_url`` content part (inline bytes as a ``data:`` URL);
    in an envelope it is one item of ``event_data["images"]`` (:meth:`to_event_data`).
    """

    url: str = ""
    """The image's http(s) URL (empty for inline data)."""
    data: bytes = b""
    """The image's bytes (empty for a URL)."""
    media_type: str = ""
    """``image/png``, ``image/jpeg``, ``image/gif`` or ``image/webp``; required with ``data``."""
    detail: str = ""
    """``auto``, ``low`` or ``high`` (how closely the model looks); empty leaves it to the model."""

    @classmethod
    def from_path(cls, path: str | os.PathLike[str], media_type: str | None = None) -> ImageInput:
        """An inline image read from a file; the media type comes from its extension unless given."""
        guessed = media_type or mimetypes.guess_type(os.fspath(path))[0]
        if not guessed or not guessed.startswith("image/"):
            raise ValueError(f"cannot tell the image media type of {os.fspath(path)!r}; pass media_type=")
        with open(path, "rb") as f:
            return cls(data=f.read(), media_type=guessed)

    @property
    def model_url(self) -> str:
        """What the model is sent: the URL, or a ``data:<media_type>;base64,…`` URL of the bytes."""
        if self.url:
            return self.url
        return f"data:{self.media_type};base64,{base64.b64encode(self.data).decode('ascii')}"

    def to_event_data(self) -> dict[str, Any]:
        """The image as one item of an envelope's ``event_data["images"]`` (docs/network.md "Images")."""
        item: dict[str, Any] = {"url": self.url} if self.url else {"data": base64.b64encode(self.data).decode("ascii")}
        if self.media_type:
            item["media_type"] = self.media_type
        if self.detail:
            item["detail"] = self.detail
        return item

    @classmethod
    def from_event_data(cls, item: dict[str, Any]) -> ImageInput:
        """Read one item of an envelope's ``event_data["images"]`` back (see :meth:`to_event_data`)."""
        data = item.get("data")
        return cls(
            url=str(item.get("url") or ""),
            data=base64.b64decode(data) if isinstance(data, str) and data else b"",
            media_type=str(item.get("media_type") or ""),
            detail=str(item.get("detail") or ""),
        )


RequestPart = TextInput | ImageInput | ToolResultEvent
"""What a :class:`ModelRequest` may contain."""


@dataclass(slots=True)
class ModelRequest(BaseEvent):
    """A message *from the user* to the model (one or more parts)."""

    parts: list[RequestPart] = field(default_factory=list)
    """Text and image parts become one user message; tool results become ``tool`` messages."""

    @property
    def text(self) -> str:
        """The text parts joined by newlines."""
        return "\n".join(p.text for p in self.parts if isinstance(p, TextInput))


@dataclass(slots=True)
class ModelMessage(BaseEvent):
    """A message *from the assistant*: text and/or tool calls."""

    text: str = ""
    """The assistant's text (may be empty when it only calls tools)."""
    tool_calls: list[ToolCall] = field(default_factory=list)
    """Tool calls the model asked for, in order."""
    usage: Usage | None = None
    """Tokens spent producing this message, when known."""
    model: str | None = None
    """The model that produced it, when known."""
    finish_reason: str | None = None
    """Provider finish reason (``stop``, ``tool_calls``, ``length``, …)."""


@dataclass(slots=True)
class ModelMessageChunk(BaseEvent):
    """A piece of the assistant's text as the model streams it (``OpenAIConfig(streaming=True)``).

    Published to the agent's observers while the model call runs, never appended to the stream:
    the :class:`ModelMessage` that follows carries the whole text (AG2's ``ModelMessageChunk``).
    """

    content: str
    """The text delta."""
    call: int = 0
    """Which model call of the turn it belongs to (0 = the first; one more after each tool round)."""


@dataclass(slots=True)
class ToolCallEvent(BaseEvent):
    """The harness is running a tool call (emitted before the matching :class:`ToolResultEvent`)."""

    call_id: str
    """The :attr:`ToolCall.id`."""
    name: str
    """Name of the tool."""
    arguments: dict[str, Any] = field(default_factory=dict, metadata=_RAW)
    """The arguments as the model sent them."""


@dataclass(slots=True)
class CompactionSummary(BaseEvent):
    """Stands in for events a compaction removed from the history."""

    summary: str
    """Summary of the dropped events."""
    events_dropped: int = 0
    """How many events it replaces."""


@dataclass(slots=True)
class CompactionStarted(BaseEvent):
    """A compaction strategy is about to run."""

    events_before: int = 0
    """Length of the history being compacted."""


@dataclass(slots=True)
class CompactionCompleted(BaseEvent):
    """A compaction finished."""

    events_before: int
    """History length before."""
    events_after: int
    """History length after."""
    usage: Usage | None = None
    """Tokens the strategy spent (summarising compactions call a model)."""


@dataclass(slots=True)
class CompactionFailed(BaseEvent):
    """A compaction strategy (or its trigger) raised."""

    error: str
    """The exception rendered as ``Type: message``."""


@dataclass(slots=True)
class AggregationStarted(BaseEvent):
    """An aggregation strategy is about to run."""

    strategy: str = ""
    """Name of the strategy."""


@dataclass(slots=True)
class AggregationCompleted(BaseEvent):
    """An aggregation finished."""

    strategy: str
    """Name of the strategy."""
    usage: Usage | None = None
    """Tokens the strategy spent."""


@dataclass(slots=True)
class AggregationFailed(BaseEvent):
    """An aggregation strategy (or its trigger) raised."""

    error: str
    """The exception rendered as ``Type: message``."""


@dataclass(slots=True)
class EventLogFailed(BaseEvent):
    """Writing the turn's events to the knowledge store's ``/log/`` failed."""

    error: str
    """The exception rendered as ``Type: message``."""


@dataclass(slots=True)
class HaltEvent(BaseEvent):
    """Stop the turn: no further model call is made (e.g. a FATAL observer alert)."""

    reason: str
    """Why the turn was halted."""


AlertLevel = Literal["info", "warning", "error", "fatal"]
"""Severity of an :class:`ObserverAlert`; ``fatal`` halts the turn under ``AlertPolicy``."""


@dataclass(slots=True)
class ObserverAlert(BaseEvent):
    """An observer flagged something about the conversation."""

    level: AlertLevel
    """Severity."""
    message: str
    """What the observer saw."""
    source: str = ""
    """Name of the observer that raised it."""


@dataclass(slots=True)
class TaskStarted(BaseEvent):
    """The agent started a task (``async with agent.task(...)``); mirrored to the hub."""

    task_id: str
    """The hub's task id."""
    title: str = ""
    """The task's title."""


@dataclass(slots=True)
class TaskProgress(BaseEvent):
    """The agent reported progress on its task (``task.progress`` or the ``tasks`` tool)."""

    task_id: str
    """The hub's task id."""
    payload: Any = field(default=None, metadata=_RAW)
    """The progress value (any JSON value)."""


@dataclass(slots=True)
class TaskCompleted(BaseEvent):
    """The agent's task ended successfully (``task.complete``, the ``tasks`` tool, or a clean exit)."""

    task_id: str
    """The hub's task id."""
    result: Any = field(default=None, metadata=_RAW)
    """The result (any JSON value)."""


@dataclass(slots=True)
class TaskFailed(BaseEvent):
    """The agent's task ended with an error (``task.fail`` or a block that raised)."""

    task_id: str
    """The hub's task id."""
    error: str = ""
    """What went wrong."""


@dataclass(slots=True)
class TaskCancelled(BaseEvent):
    """The agent accepted a cancel request and ended its task (``task.cancel``)."""

    task_id: str
    """The hub's task id."""
    reason: str = ""
    """Why it was cancelled."""


def describe_error(exc: BaseException) -> str:
    """Render an exception as ``Type: message`` for the ``error`` field of ``*Failed`` events."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
