"""AG2 envelopes from and to the hub's: event-type spellings, workflow packets, ids."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import orjson
from agentnet.v1 import envelope_pb2

from ag2gateway import ids
from netkernel.errors import InvalidArgument
from netkernel.wire import loads_json

EVENT_TO_AG2 = {
    "ag2.channel.invite_ack": "ag2.channel.invite.ack",
    "ag2.channel.invite_reject": "ag2.channel.invite.reject",
    "ag2.channel.expectation_violated": "ag2.expectation.violated",
}
"""Hub event type → AG2's spelling (types not listed are spelled the same)."""
EVENT_FROM_AG2 = {ag2: hub for hub, ag2 in EVENT_TO_AG2.items()}

_PRIORITY_TO_AG2 = {
    envelope_pb2.PRIORITY_BACKGROUND: "background",
    envelope_pb2.PRIORITY_URGENT: "urgent",
}
_PRIORITY_FROM_AG2 = {
    "background": envelope_pb2.PRIORITY_BACKGROUND,
    "normal": envelope_pb2.PRIORITY_NORMAL,
    "urgent": envelope_pb2.PRIORITY_URGENT,
}


EV_PACKET = "ag2.packet"


def packet_from_ag2(data: dict[str, Any]) -> dict[str, Any]:
    """A workflow packet's event_data with AG2's routing spelled as the hub reads it: AG2's ``kind``
    ``"text"`` is the hub's no kind, its ``tool`` the hub's ``tool_called``, a finish's ``reason`` the
    hub's ``close_reason`` (AG2's keys stay beside the hub's). A ``"handoff"`` without a target is AG2's
    static tool routing (a tool a ``ToolCalled`` transition names; the graph picks the next speaker):
    the hub's no kind with ``tool_called``, as the hub routes such a packet."""
    routing = data.get("routing")
    if not isinstance(routing, dict):
        return data
    out = dict(routing)
    if out.get("kind") == "text" or (out.get("kind") == "handoff" and not out.get("target")):
        del out["kind"]
        if "target" in out and not out["target"]:
            del out["target"]
    if isinstance(out.get("tool"), str) and "tool_called" not in out:
        out["tool_called"] = out["tool"]
    if out.get("kind") == "finish" and isinstance(out.get("reason"), str) and "close_reason" not in out:
        out["close_reason"] = out["reason"]
    return {**data, "routing": out}


def packet_to_ag2(data: dict[str, Any]) -> dict[str, Any]:
    """The inverse of :func:`packet_from_ag2`, for a packet any participant (AG2 or not) posted: a packet
    routed by the tool it called, with no kind, is AG2's static ``"handoff"`` (no target)."""
    routing = data.get("routing")
    if not isinstance(routing, dict):
        return {**data, "routing": {"kind": "text"}}
    out = dict(routing)
    out.setdefault("kind", "handoff" if isinstance(out.get("tool_called"), str) else "text")
    if isinstance(out.get("tool_called"), str):
        out.setdefault("tool", out["tool_called"])
    if out["kind"] == "finish" and isinstance(out.get("close_reason"), str):
        out.setdefault("reason", out["close_reason"])
    return {**data, "routing": out}


class IdMemory:
    """AG2 ids of hub envelopes this connection has seen, so a ``causation_id`` (a hub id) is shown as
    the AG2 id of the envelope it names. Bounded: the oldest entries go first."""

    def __init__(self, limit: int = 4096) -> None:
        self._ids: dict[str, str] = {}
        self._limit = limit

    def remember(self, hub_id: str, ag2: str) -> None:
        """Note one envelope's two ids."""
        self._ids[hub_id] = ag2
        if len(self._ids) > self._limit:
            del self._ids[next(iter(self._ids))]

    def ag2(self, hub_id: str) -> str:
        """The AG2 id of a hub id seen before, else the hub id itself."""
        return self._ids.get(hub_id, hub_id)


def envelope_to_ag2(env: envelope_pb2.Envelope, memory: IdMemory) -> dict[str, Any]:
    """An admitted hub envelope in AG2's ``Envelope.to_dict()`` shape, for :func:`ag2gateway.frames.encode`
    (its ``event_data`` may be JSON text to splice in, an ``orjson.Fragment``)."""
    ag2 = ids.ag2_id(env)
    memory.remember(env.envelope_id, ag2)
    return {
        "channel_id": env.channel_id,
        "sender_id": env.sender_id,
        "audience": list(env.audience.agent_ids) if env.HasField("audience") else None,
        "event_type": EVENT_TO_AG2.get(env.event_type, env.event_type),
        "event_data": _event_data_to_ag2(env),
        "envelope_id": ag2,
        "task_id": env.task_id if env.HasField("task_id") else None,
        "causation_id": memory.ag2(env.causation_id) if env.HasField("causation_id") else None,
        "trace_id": env.trace_id if env.HasField("trace_id") else None,
        "priority": _PRIORITY_TO_AG2.get(env.priority, "normal"),
        "depth": env.depth,
        "idempotency_key": env.idempotency_key if env.HasField("idempotency_key") else None,
        "created_at": env.created_at,
        "ttl_seconds": env.ttl_seconds if env.HasField("ttl_seconds") else None,
    }


def _event_data_to_ag2(env: envelope_pb2.Envelope) -> dict[str, Any] | orjson.Fragment:
    """The event data as AG2 shows it: the hub's JSON text itself, spliced into the frame as it is
    (not parsed and written again: exact for any number, and a fraction of the cost), except a
    workflow packet's, whose routing is respelled."""
    if not env.event_data_json:
        return {}
    if env.event_type == EV_PACKET:
        return packet_to_ag2(loads_json(env.event_data_json))
    return orjson.Fragment(env.event_data_json)


def _dumps(data: dict[str, Any]) -> str:
    """``data`` as JSON text: orjson, several times faster than ``json.dumps`` (a frame's JSON was parsed by
    orjson, so it writes it back exactly; what it refuses, e.g. an integer beyond 64 bits, ``json.dumps`` writes)."""
    try:
        return orjson.dumps(data).decode()
    except TypeError:
        return json.dumps(data)


def _opt_str(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidArgument(f"envelope.{key} must be a string or null", metadata={"field": f"envelope.{key}"})
    return value


def envelope_from_ag2(data: Any) -> envelope_pb2.Envelope:
    """The hub envelope an AG2 client's ``post_envelope`` asks for (hub-stamped fields are ignored)."""
    if not isinstance(data, dict):
        raise InvalidArgument("params.envelope must be an Envelope object (Envelope.to_dict())")
    channel_id, event_type, event_data = data.get("channel_id"), data.get("event_type"), data.get("event_data")
    if not isinstance(channel_id, str) or not isinstance(event_type, str):
        raise InvalidArgument("envelope.channel_id and envelope.event_type must be strings")
    if not isinstance(event_data, dict):
        raise InvalidArgument("envelope.event_data must be a JSON object")
    out = envelope_pb2.Envelope(
        channel_id=channel_id,
        event_type=EVENT_FROM_AG2.get(event_type, event_type),
        event_data_json=_dumps(packet_from_ag2(event_data) if event_type == EV_PACKET else event_data),
    )
    audience = data.get("audience")
    if audience is not None:
        if not isinstance(audience, list) or not all(isinstance(a, str) for a in audience):
            raise InvalidArgument("envelope.audience must be null or a list of agent ids")
        out.audience.agent_ids.extend(audience)
    for key in ("task_id", "trace_id", "idempotency_key"):
        value = _opt_str(data, key)
        if value is not None:
            setattr(out, key, value)
    causation = _opt_str(data, "causation_id")
    if causation is not None:
        out.causation_id = ids.hub_envelope_id(causation)
    priority = data.get("priority", "normal")
    if priority not in _PRIORITY_FROM_AG2:
        raise InvalidArgument(f"envelope.priority must be one of {sorted(_PRIORITY_FROM_AG2)}, got {priority!r}")
    out.priority = _PRIORITY_FROM_AG2[priority]
    depth, ttl = data.get("depth", 0), data.get("ttl_seconds")
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < 0:
        raise InvalidArgument("envelope.depth must be a non-negative integer")
    out.depth = depth
    if ttl is not None:
        if not isinstance(ttl, int) or isinstance(ttl, bool):
            raise InvalidArgument("envelope.ttl_seconds must be an integer or null")
        out.ttl_seconds = ttl
    return out
