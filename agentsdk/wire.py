"""Conversion between :class:`agentsdk.envelope.Envelope` and the wire message.

One place does it so the hub and the SDK agree byte for byte.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from agentnet.v1 import envelope_pb2

from agentsdk.envelope import Envelope, Priority
from agentsdk.errors import InvalidArgument

_PRIORITY_TO_WIRE: dict[str, envelope_pb2.Priority.ValueType] = {
    "background": envelope_pb2.PRIORITY_BACKGROUND,
    "normal": envelope_pb2.PRIORITY_NORMAL,
    "urgent": envelope_pb2.PRIORITY_URGENT,
}
_PRIORITY_FROM_WIRE: dict[envelope_pb2.Priority.ValueType, Priority] = {
    envelope_pb2.PRIORITY_UNSPECIFIED: "normal",
    envelope_pb2.PRIORITY_BACKGROUND: "background",
    envelope_pb2.PRIORITY_NORMAL: "normal",
    envelope_pb2.PRIORITY_URGENT: "urgent",
}


def _has_float(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is float:
            return True
        if kind is dict:
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
    return False


def loads_json(text: str) -> Any:
    """Parse JSON exactly, fast.

    orjson is several times faster than the stdlib parser but turns integers beyond
    64 bits into floats; so a result holding any float is parsed again by the exact
    stdlib parser. Ints always stay ints.
    """
    value = orjson.loads(text)
    if _has_float(value):
        return json.loads(text)
    return value


def dumps_json(value: Any) -> str:
    """Compact, exact JSON (ints stay ints, non-ASCII kept as is)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def parse_json_object(text: str, what: str) -> dict[str, Any]:
    """Parse ``text`` as a JSON object ("" = {}); refuse anything else with InvalidArgument."""
    if not text:
        return {}
    try:
        value = loads_json(text)
    except json.JSONDecodeError as exc:  # orjson's error is a subclass
        raise InvalidArgument(
            f"{what} is not valid JSON ({exc.msg} at position {exc.pos}); send a JSON object."
        ) from None
    if not isinstance(value, dict):
        raise InvalidArgument(f"{what} must be a JSON object, got {type(value).__name__}; wrap the value in an object.")
    return value


def envelope_to_wire(env: Envelope, *, event_data_json: str | None = None) -> envelope_pb2.Envelope:
    """Build the wire message for ``env``.

    ``event_data_json`` may pass the JSON text ``env.event_data`` was parsed from, to
    avoid serialising it again.
    """
    if event_data_json is None:
        event_data_json = dumps_json(env.event_data) if env.event_data else ""
    msg = envelope_pb2.Envelope(
        channel_id=env.channel_id,
        sender_id=env.sender_id,
        event_type=env.event_type,
        event_data_json=event_data_json,
        envelope_id=env.envelope_id,
        priority=_PRIORITY_TO_WIRE.get(env.priority, envelope_pb2.PRIORITY_NORMAL),
        depth=env.depth,
        created_at=env.created_at,
        seq=env.seq,
    )
    if env.audience is not None:
        msg.audience.agent_ids.extend(env.audience)
    if env.task_id is not None:
        msg.task_id = env.task_id
    if env.causation_id is not None:
        msg.causation_id = env.causation_id
    if env.trace_id is not None:
        msg.trace_id = env.trace_id
    if env.idempotency_key is not None:
        msg.idempotency_key = env.idempotency_key
    if env.ttl_seconds is not None:
        msg.ttl_seconds = env.ttl_seconds
    return msg


def envelope_from_wire(msg: envelope_pb2.Envelope) -> Envelope:
    """Build an :class:`Envelope` from the wire message (event_data must be a JSON object)."""
    priority = _PRIORITY_FROM_WIRE.get(msg.priority)
    if priority is None:
        raise InvalidArgument(f"unknown priority {msg.priority}; use BACKGROUND, NORMAL or URGENT.")
    raw = msg.event_data_json
    data: Any = {}
    if raw:
        try:
            data = loads_json(raw)
        except ValueError:  # orjson.JSONDecodeError and json.JSONDecodeError are ValueErrors
            data = None
        if type(data) is not dict:  # exact check on the hot path; parse again for the error message
            data = parse_json_object(raw, "event_data_json")
    return Envelope(
        channel_id=msg.channel_id,
        sender_id=msg.sender_id,
        audience=list(msg.audience.agent_ids) if msg.HasField("audience") else None,
        event_type=msg.event_type,
        event_data=data,
        envelope_id=msg.envelope_id,
        task_id=msg.task_id if msg.HasField("task_id") else None,
        causation_id=msg.causation_id if msg.HasField("causation_id") else None,
        trace_id=msg.trace_id if msg.HasField("trace_id") else None,
        priority=priority,
        depth=msg.depth,
        idempotency_key=msg.idempotency_key if msg.HasField("idempotency_key") else None,
        created_at=msg.created_at,
        ttl_seconds=msg.ttl_seconds if msg.HasField("ttl_seconds") else None,
        seq=msg.seq,
    )
