"""Workflow payloads as the hub reads them: EV_PACKET routing, context updates, and JSON value helpers.

The packet's shape (``routing``, ``context_updates``, ``body``, the routing keys and kinds) is
written once in :mod:`netkernel.packet`; this module validates a received one against it.
Every part is optional; unknown top-level and routing keys are tolerated (forward
compatibility), but ``context_updates`` / EV_CONTEXT_SET accept only ``set`` and ``delete``
so a typo cannot silently drop an update. EV_TEXT counts as a packet with no routing and no updates.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from hubsvc.adapters.base import ChannelSpec
from netkernel.envelope import EV_PACKET, Envelope
from netkernel.errors import InvalidArgument
from netkernel.packet import (
    BODY,
    CONTEXT_UPDATES,
    KIND_FINISH,
    KIND_HANDOFF,
    ROUTING,
    ROUTING_KINDS,
    UPDATE_DELETE,
    UPDATE_KEYS,
    UPDATE_SET,
)

MAX_CLOSE_REASON = 64
"""Longest close reason a packet's Finish or a terminate target may name (characters)."""


def close_reason_problem(value: Any) -> str | None:
    """Why ``value`` cannot be a close reason (a non-empty string of at most 64 characters), or None."""
    if not isinstance(value, str) or not value.strip():
        return f"must be a non-empty string, got {value!r}"
    if len(value) > MAX_CLOSE_REASON:
        return f"is {len(value)} characters long; at most {MAX_CLOSE_REASON} are allowed"
    return None


def _invalid(spec: ChannelSpec, where: str, problem: str, fix: str) -> InvalidArgument:
    return InvalidArgument(
        f"{spec.type} channel '{spec.channel_id}': {where} {problem}; {fix}",
        metadata={"channel_id": spec.channel_id, "field": where},
    )


def json_problem(value: Any) -> str | None:
    """Why ``value`` is not plain JSON data (str keys, finite numbers), or None when it is."""
    if value is None or isinstance(value, str | bool | int):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{value!r} is not a finite number"
    if isinstance(value, list | tuple):
        for item in value:
            problem = json_problem(item)
            if problem:
                return problem
        return None
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"object key {key!r} is not a string"
            problem = json_problem(item)
            if problem:
                return problem
        return None
    return f"{type(value).__name__} value {value!r} is not JSON"


def canonical_json(value: Any) -> str:
    """Deterministic JSON text of ``value`` (sorted keys, no spaces): an immutable snapshot."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: like ``==`` but ``true`` ≠ ``1`` (Python's bool is an int)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple | Mapping) or isinstance(b, list | tuple | Mapping):
        return False
    return bool(a == b)


@dataclass(frozen=True)
class ContextUpdates:
    """Validated context changes: ``set`` applied first, then ``delete``."""

    set_json: str = "{}"
    """The ``set`` object as canonical JSON (kept as text so the value is immutable)."""
    delete: tuple[str, ...] = ()

    def apply(self, context: Mapping[str, Any]) -> dict[str, Any]:
        """A new context dict with the updates applied (``context`` is not modified)."""
        out = dict(context)
        out.update(json.loads(self.set_json))
        for key in self.delete:
            out.pop(key, None)
        return out


@dataclass(frozen=True)
class Routing:
    """The routing part of a packet: which tool(s) the speaker called this round, and a typed decision."""

    tool_called: str | None = None
    tools_called: tuple[str, ...] = ()
    reason: str = ""
    """Why (the routing call's ``reason`` argument, or a Handoff's reason); informational."""
    kind: str | None = None
    """``"handoff"`` / ``"finish"`` when a typed routing value decided the turn, else None."""
    target: str | None = None
    """A handoff's next speaker (a participant id or name, as sent)."""
    close_reason: str | None = None
    """A finish's close reason (None: :data:`DEFAULT_FINISH_REASON`)."""
    summary: str = ""
    """A finish's summary; informational."""

    def called(self, tool: str) -> bool:
        """True when ``tool`` ran this turn (``tool_called`` or one of ``tools_called``)."""
        return self.tool_called == tool or tool in self.tools_called

    def routing_tool(self, routing_tools: Collection[str]) -> str | None:
        """The one tool that routes this packet: ``tool_called`` when set, else the first of
        ``tools_called`` that is one of ``routing_tools`` (a packet routes on one tool: the first wins)."""
        if self.tool_called is not None:
            return self.tool_called
        return next((t for t in self.tools_called if t in routing_tools), None)


@dataclass(frozen=True)
class Packet:
    """A substantive workflow envelope reduced to what the transition graph needs."""

    routing: Routing = Routing()
    updates: ContextUpdates = ContextUpdates()


def parse_context_updates(data: Any, *, spec: ChannelSpec, where: str) -> ContextUpdates:
    """Validate ``{"set": {...}, "delete": [...]}`` (both optional); InvalidArgument if malformed."""
    if data is None:
        return ContextUpdates()
    if not isinstance(data, Mapping):
        raise _invalid(
            spec, where, f"must be an object, got {type(data).__name__}", 'send {"set": {...}, "delete": [...]}'
        )
    unknown = sorted(str(k) for k in data if k not in UPDATE_KEYS)
    if unknown:
        raise _invalid(spec, where, f"has unknown key(s) {unknown}", "use only 'set' (an object) and 'delete' (a list)")
    set_part = data.get(UPDATE_SET)
    if set_part is None:
        set_part = {}
    if not isinstance(set_part, Mapping):
        raise _invalid(spec, f"{where}.set", f"must be an object, got {type(set_part).__name__}", "map keys to values")
    problem = json_problem(set_part)
    if problem:
        raise _invalid(spec, f"{where}.set", f"is not JSON: {problem}", "use strings, finite numbers, lists, objects")
    delete = data.get(UPDATE_DELETE)
    if delete is None:
        delete = []
    if not isinstance(delete, list | tuple) or not all(isinstance(k, str) for k in delete):
        raise _invalid(spec, f"{where}.delete", f"must be a list of key strings, got {delete!r}", 'e.g. ["draft"]')
    return ContextUpdates(set_json=canonical_json(set_part), delete=tuple(delete))


def parse_routing(data: Any, *, spec: ChannelSpec, where: str) -> Routing:
    """Validate a packet's ``routing`` object; InvalidArgument if malformed."""
    if data is None:
        return Routing()
    if not isinstance(data, Mapping):
        raise _invalid(spec, where, f"must be an object, got {type(data).__name__}", 'send {"tool_called": "<name>"}')
    tool = data.get("tool_called")
    if tool is not None and not isinstance(tool, str):
        raise _invalid(spec, f"{where}.tool_called", f"must be a string or null, got {tool!r}", "name the tool")
    tools = data.get("tools_called")
    if tools is None:
        tools = []
    if not isinstance(tools, list | tuple) or not all(isinstance(t, str) for t in tools):
        raise _invalid(spec, f"{where}.tools_called", f"must be a list of strings, got {tools!r}", "list tool names")
    texts = {}
    for key in ("reason", "summary"):
        value = data.get(key)
        if value is not None and not isinstance(value, str):
            raise _invalid(spec, f"{where}.{key}", f"must be a string, got {value!r}", "send text, or leave it out")
        texts[key] = value or ""
    kind = data.get("kind")
    if kind is not None and kind not in ROUTING_KINDS:
        raise _invalid(
            spec, f"{where}.kind", f"is {kind!r}", f"use {' or '.join(repr(k) for k in ROUTING_KINDS)}, or leave it out"
        )
    target = data.get("target")
    if kind == KIND_HANDOFF:
        if not isinstance(target, str) or not target:
            raise _invalid(spec, f"{where}.target", f"must name the next speaker, got {target!r}", "give an id or name")
        if spec.resolve(target) is None:
            names = ", ".join(f"{spec.names.get(p, p)} ({p})" for p in spec.participants)
            raise _invalid(spec, f"{where}.target", f"'{target}' is not a participant", f"hand off to one of: {names}")
    elif target is not None:
        raise _invalid(spec, f"{where}.target", "is only for kind 'handoff'", 'add "kind": "handoff" or remove it')
    close_reason = data.get("close_reason")
    if kind == KIND_FINISH and close_reason is not None:
        problem = close_reason_problem(close_reason)
        if problem:
            raise _invalid(spec, f"{where}.close_reason", problem, "name why the workflow ended, e.g. 'approved'")
    elif close_reason is not None:
        raise _invalid(spec, f"{where}.close_reason", "is only for kind 'finish'", 'add "kind": "finish" or remove it')
    return Routing(
        tool_called=tool,
        tools_called=tuple(tools),
        reason=texts["reason"],
        kind=kind,
        target=target if kind == KIND_HANDOFF else None,
        close_reason=close_reason if kind == KIND_FINISH else None,
        summary=texts["summary"],
    )


def parse_packet(env: Envelope, *, spec: ChannelSpec) -> Packet:
    """The routing and context updates of a substantive envelope (EV_TEXT → an empty packet)."""
    if env.event_type != EV_PACKET:
        return Packet()
    data = env.event_data
    if not isinstance(data, Mapping):
        raise _invalid(spec, "ag2.packet event_data", "must be an object", "send routing, context_updates and body")
    body = data.get(BODY)
    if body is not None and not isinstance(body, str):
        raise _invalid(spec, "ag2.packet body", f"must be a string, got {type(body).__name__}", "send the text")
    return Packet(
        routing=parse_routing(data.get(ROUTING), spec=spec, where="ag2.packet routing"),
        updates=parse_context_updates(data.get(CONTEXT_UPDATES), spec=spec, where="ag2.packet context_updates"),
    )
