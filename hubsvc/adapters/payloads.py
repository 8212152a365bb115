"""Workflow payload shapes: EV_PACKET routing, context updates, and JSON value helpers.

EV_PACKET ``event_data = {"routing": {"tool_called": name | None, "tools_called": [names]},
"context_updates": {"set": {...}, "delete": [...]}, "body": "<text>"}``; every part is
optional, unknown top-level and routing keys are tolerated (forward compatibility), but
``context_updates`` / EV_CONTEXT_SET accept only ``set`` and ``delete`` so a typo
cannot silently drop an update. EV_TEXT counts as a packet with no routing and no updates.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hubsvc.adapters.base import ChannelSpec
from netkernel.envelope import EV_PACKET, Envelope
from netkernel.errors import InvalidArgument

_UPDATE_KEYS = ("set", "delete")


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
    """The routing part of a packet: which tool(s) the speaker called this round."""

    tool_called: str | None = None
    tools_called: tuple[str, ...] = ()

    def called(self, tool: str) -> bool:
        """True when ``tool`` is ``tool_called`` or one of ``tools_called``."""
        return self.tool_called == tool or tool in self.tools_called


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
    unknown = sorted(str(k) for k in data if k not in _UPDATE_KEYS)
    if unknown:
        raise _invalid(spec, where, f"has unknown key(s) {unknown}", "use only 'set' (an object) and 'delete' (a list)")
    set_part = data.get("set")
    if set_part is None:
        set_part = {}
    if not isinstance(set_part, Mapping):
        raise _invalid(spec, f"{where}.set", f"must be an object, got {type(set_part).__name__}", "map keys to values")
    problem = json_problem(set_part)
    if problem:
        raise _invalid(spec, f"{where}.set", f"is not JSON: {problem}", "use strings, finite numbers, lists, objects")
    delete = data.get("delete")
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
    return Routing(tool_called=tool, tools_called=tuple(tools))


def parse_packet(env: Envelope, *, spec: ChannelSpec) -> Packet:
    """The routing and context updates of a substantive envelope (EV_TEXT → an empty packet)."""
    if env.event_type != EV_PACKET:
        return Packet()
    data = env.event_data
    if not isinstance(data, Mapping):
        raise _invalid(spec, "ag2.packet event_data", "must be an object", "send routing, context_updates and body")
    body = data.get("body")
    if body is not None and not isinstance(body, str):
        raise _invalid(spec, "ag2.packet body", f"must be a string, got {type(body).__name__}", "send the text")
    return Packet(
        routing=parse_routing(data.get("routing"), spec=spec, where="ag2.packet routing"),
        updates=parse_context_updates(data.get("context_updates"), spec=spec, where="ag2.packet context_updates"),
    )
