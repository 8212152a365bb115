"""Every conversion between the kernel's models and the wire messages, in one place.

The Envelope model ↔ ``agentnet.v1.Envelope``, each enum ↔ the names the SDK and the
tools use (written once here, inverses derived), and exact JSON (ints stay ints). The
hub and the SDK both convert through this module, so they agree byte for byte.
"""

from __future__ import annotations

import dataclasses
import json
import operator
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, Literal, TypeVar

import orjson
from agentnet.v1 import a2a_pb2, channel_pb2, envelope_pb2, identity_pb2, knowledge_pb2, task_pb2

from netkernel.envelope import Envelope, Priority
from netkernel.errors import InvalidArgument

N = TypeVar("N", bound=str)
V = TypeVar("V", bound=int)
E = TypeVar("E", bound=Envelope)


class EnumNames(Generic[N, V]):
    """One protobuf enum's values and the names the SDK and tools use for them, written once.

    ``by_name`` maps each name to its wire value; ``by_value`` is derived from it, plus
    ``aliases`` (extra wire values read as a name, e.g. an UNSPECIFIED priority as "normal").
    """

    def __init__(self, by_name: Mapping[N, V], *, aliases: Mapping[V, N] | None = None) -> None:
        self.by_name: dict[N, V] = dict(by_name)
        self.by_value: dict[V, N] = {value: name for name, value in by_name.items()}
        self.by_value.update(aliases or {})

    def to_wire(self, name: N) -> V:
        """The wire value of ``name`` (KeyError for an unknown name)."""
        return self.by_name[name]

    def name_of(self, value: V, default: N) -> N:
        """The name of a wire value; ``default`` for values this map does not name."""
        return self.by_value.get(value, default)


PRIORITY: EnumNames[Priority, envelope_pb2.Priority.ValueType] = EnumNames(
    {
        "background": envelope_pb2.PRIORITY_BACKGROUND,
        "normal": envelope_pb2.PRIORITY_NORMAL,
        "urgent": envelope_pb2.PRIORITY_URGENT,
    },
    aliases={envelope_pb2.PRIORITY_UNSPECIFIED: "normal"},
)
PassportKindName = Literal["agent", "human", "remote_agent"]
"""The named passport kinds (an unset kind is UNSPECIFIED on the wire, None in the SDK)."""
PASSPORT_KIND: EnumNames[PassportKindName, identity_pb2.PassportKind.ValueType] = EnumNames(
    {
        "agent": identity_pb2.PASSPORT_KIND_AGENT,
        "human": identity_pb2.PASSPORT_KIND_HUMAN,
        "remote_agent": identity_pb2.PASSPORT_KIND_REMOTE_AGENT,
    }
)
"""Passport kinds; UNSPECIFIED is no name (an unset kind, registered as "agent")."""
CHANNEL_STATE: EnumNames[str, channel_pb2.ChannelState.ValueType] = EnumNames(
    {
        "pending": channel_pb2.CHANNEL_STATE_PENDING,
        "opened": channel_pb2.CHANNEL_STATE_OPENED,
        "closed": channel_pb2.CHANNEL_STATE_CLOSED,
        "expired": channel_pb2.CHANNEL_STATE_EXPIRED,
    }
)
TASK_STATE: EnumNames[str, task_pb2.TaskState.ValueType] = EnumNames(
    {
        "running": task_pb2.TASK_STATE_RUNNING,
        "completed": task_pb2.TASK_STATE_COMPLETED,
        "failed": task_pb2.TASK_STATE_FAILED,
        "cancelled": task_pb2.TASK_STATE_CANCELLED,
        "expired": task_pb2.TASK_STATE_EXPIRED,
    }
)
InvocationStatus = Literal["completed", "input-required", "failed", "running", "canceled"]
"""Outcome of an A2A call ("running" only appears in execution listings)."""
INVOCATION_STATUS: EnumNames[InvocationStatus, a2a_pb2.InvocationStatus.ValueType] = EnumNames(
    {
        "completed": a2a_pb2.INVOCATION_STATUS_COMPLETED,
        "input-required": a2a_pb2.INVOCATION_STATUS_INPUT_REQUIRED,
        "failed": a2a_pb2.INVOCATION_STATUS_FAILED,
        "running": a2a_pb2.INVOCATION_STATUS_RUNNING,
        "canceled": a2a_pb2.INVOCATION_STATUS_CANCELED,
    }
)
CHANGE_KIND: EnumNames[str, knowledge_pb2.ChangeKind.ValueType] = EnumNames(
    {
        "written": knowledge_pb2.CHANGE_KIND_WRITTEN,
        "appended": knowledge_pb2.CHANGE_KIND_APPENDED,
        "deleted": knowledge_pb2.CHANGE_KIND_DELETED,
    }
)
"""Knowledge store change kinds."""

_PRIORITY_TO_WIRE = PRIORITY.by_name
_PRIORITY_FROM_WIRE = PRIORITY.by_value


class JsonTooDeep(ValueError):
    """JSON nested deeper than the reader's limit."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"nested deeper than {limit} levels")
        self.limit = limit


def _scan(value: Any, max_depth: int | None) -> bool:
    """Whether ``value`` holds a float; raises :class:`JsonTooDeep` past ``max_depth`` levels of nesting.

    One breadth-first walk, level by level, so the depth costs nothing extra."""
    has_float = False
    level = [value]
    depth = 0
    while level:
        below: list[Any] = []
        nested = False
        for item in level:
            kind = type(item)
            if kind is float:
                has_float = True
            elif kind is dict:
                nested = True
                below.extend(item.values())
            elif kind is list:
                nested = True
                below.extend(item)
        if nested:
            depth += 1
            if max_depth is not None and depth > max_depth:
                raise JsonTooDeep(max_depth)
        level = below
    return has_float


def loads_json(text: str | bytes, max_depth: int | None = None) -> Any:
    """Parse JSON exactly, fast; ``max_depth`` bounds the nesting of arrays and objects.

    orjson is several times faster than the stdlib parser but turns integers beyond
    64 bits into floats; so a result holding any float is parsed again by the exact
    stdlib parser. Ints always stay ints. Raises ValueError (``JsonTooDeep`` past
    ``max_depth``) for anything that is not acceptable JSON.
    """
    value = orjson.loads(text)
    if _scan(value, max_depth):
        try:
            return json.loads(text)
        except RecursionError:  # deep enough for orjson, too deep for the stdlib parser
            raise JsonTooDeep(max_depth or 0) from None
    return value


_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
"""The encoder of :func:`dumps_json` for what orjson would write differently (made once: ``json.dumps``
with these options builds one per call)."""
_PLAIN_DEPTH = 32
"""Deepest nesting :func:`_plain` walks (deeper values go to the stdlib encoder)."""


def _plain(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` holds only what orjson writes exactly as the stdlib encoder of
    :func:`dumps_json` does: ``str``, ``int`` (``bool``), None, and ``list`` / ``dict`` with ``str``
    keys of them, nested at most :data:`_PLAIN_DEPTH` levels; exact types only. Floats (orjson
    spells some differently and writes NaN as null), subclasses, enums, UUIDs, dataclasses and
    the like are left to the stdlib encoder, which also raises what it raises for them."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if depth >= _PLAIN_DEPTH:
        return False
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or (type(item) is not str and not _plain(item, depth + 1)):
                return False
        return True
    if kind is list:
        for item in value:
            if type(item) is not str and not _plain(item, depth + 1):
                return False
        return True
    return False


def dumps_json(value: Any) -> str:
    """Compact, exact JSON (ints stay ints, non-ASCII kept as is).

    orjson writes what :func:`_plain` accepts several times faster, and the same text; ints beyond
    64 bits and lone surrogates (which it refuses) and everything else go to the stdlib encoder."""
    if _plain(value):
        try:
            return orjson.dumps(value).decode()
        except orjson.JSONEncodeError:
            pass
    return _COMPACT.encode(value)


def parse_json_object(text: str, what: str, max_depth: int | None = None) -> dict[str, Any]:
    """Parse ``text`` as a JSON object ("" = {}); refuse anything else with InvalidArgument.

    ``max_depth`` bounds the nesting (a client's JSON: the service passes its limit)."""
    if not text:
        return {}
    value = parse_json(text, what, max_depth)
    if not isinstance(value, dict):
        raise InvalidArgument(f"{what} must be a JSON object, got {type(value).__name__}; wrap the value in an object.")
    return value


def parse_json(text: str, what: str, max_depth: int | None = None) -> Any:
    """Parse ``text`` as any JSON value; refuse invalid or too deeply nested JSON with InvalidArgument."""
    try:
        return loads_json(text, max_depth)
    except JsonTooDeep as exc:
        raise InvalidArgument(
            f"{what} nests arrays/objects deeper than {exc.limit} levels; flatten it.",
            metadata={"field": what, "limit": str(exc.limit)},
        ) from None
    except json.JSONDecodeError as exc:  # orjson's error is a subclass
        raise InvalidArgument(
            f"{what} is not valid JSON ({exc.msg} at position {exc.pos}); send a JSON object."
        ) from None


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
        priority=_PRIORITY_TO_WIRE.get(env.priority, envelope_pb2.PRIORITY_NORMAL),
    )
    # The hub-stamped fields are empty on a post: set them only when not (each keyword costs as much).
    if env.envelope_id:
        msg.envelope_id = env.envelope_id
    if env.depth:
        msg.depth = env.depth
    if env.created_at:
        msg.created_at = env.created_at
    if env.seq:
        msg.seq = env.seq
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


def _event_data(raw: str, max_json_depth: int | None) -> dict[str, Any]:
    """Parse an envelope's event_data_json ("" = {}); InvalidArgument unless it is a JSON object."""
    if not raw:
        return {}
    try:
        data = loads_json(raw, max_json_depth)
    except ValueError:  # orjson.JSONDecodeError, json.JSONDecodeError and JsonTooDeep are ValueErrors
        data = None
    if type(data) is not dict:  # exact check on the hot path; parse again for the error message
        return parse_json_object(raw, "event_data_json", max_json_depth)
    parsed: dict[str, Any] = data
    return parsed


def envelope_from_wire(
    msg: envelope_pb2.Envelope, *, max_json_depth: int | None = None, event_data: dict[str, Any] | None = None
) -> Envelope:
    """Build an :class:`Envelope` from the wire message (event_data must be a JSON object).

    ``max_json_depth`` bounds event_data's nesting (set it for envelopes from a client).
    ``event_data``: ``msg.event_data_json`` parsed already (the caller vouches for it; the
    text is then not parsed again, and the envelope holds that dict)."""
    if event_data is None:
        event_data = _event_data(msg.event_data_json, max_json_depth)
    return _from_wire(Envelope, msg, event_data)


def _from_wire(cls: type[E], msg: envelope_pb2.Envelope, data: dict[str, Any]) -> E:
    """``cls`` built from the wire message's fields and ``data`` as its event_data."""
    # Positional, in field order: a call with 15 keywords costs as much as the rest of the conversion.
    return cls(*_wire_fields(msg, data))


def _wire_fields(msg: envelope_pb2.Envelope, data: dict[str, Any]) -> tuple[Any, ...]:
    """The :class:`Envelope` fields, in order, of the wire message with ``data`` as its event_data."""
    priority = _PRIORITY_FROM_WIRE.get(msg.priority)
    if priority is None:
        raise InvalidArgument(f"unknown priority {msg.priority}; use BACKGROUND, NORMAL or URGENT.")
    has = msg.HasField
    return (
        msg.channel_id,
        msg.sender_id,
        list(msg.audience.agent_ids) if has("audience") else None,
        msg.event_type,
        data,
        msg.envelope_id,
        msg.task_id if has("task_id") else None,
        msg.causation_id if has("causation_id") else None,
        msg.trace_id if has("trace_id") else None,
        priority,
        msg.depth,
        msg.idempotency_key if has("idempotency_key") else None,
        msg.created_at,
        msg.ttl_seconds if has("ttl_seconds") else None,
        msg.seq,
    )


_FIELD_SLOTS: dict[str, Any] = {f.name: Envelope.__dict__[f.name] for f in dataclasses.fields(Envelope)}
"""Each field's slot (a member descriptor) of :class:`Envelope`, which a :class:`StoredEnvelope` fills late."""
_ENVELOPE_FIELDS = tuple(_FIELD_SLOTS)


class StoredEnvelope(Envelope):
    """An envelope read back from the hub's WAL (:func:`envelope_from_wal`), read from its wire message.

    Rebuilding a channel folds every envelope of its WAL, but a fold reads few fields (a
    conversation reads the event type and seq; only workflow packets, context sets and a few
    lifecycle envelopes read event_data). So a stored envelope starts as a view of its wire
    message: each field comes from the message as it is read, and event_data is parsed on its
    first read (by the same code as :func:`envelope_from_wire`), then kept. The first read of
    ``audience`` (a list, kept once handed out) or any write to another field copies every
    field into the envelope once. Every reader sees exactly what :func:`envelope_from_wire`
    would have given; it equals the plain :class:`Envelope` with the same fields.
    """

    __slots__ = ("_wire",)
    _wire: envelope_pb2.Envelope

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Envelope):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in _ENVELOPE_FIELDS)

    __hash__ = None  # type: ignore[assignment]  # like the dataclass: mutable, so unhashable


_EVENT_DATA_SLOT = _FIELD_SLOTS["event_data"]


def _copied(env: StoredEnvelope) -> None:
    """Copy every field of a view's wire message into its slots: a plain :class:`StoredEnvelope` from then on.

    Raises (changing nothing) where :func:`envelope_from_wire` would."""
    msg = env._wire
    data = _event_data(msg.event_data_json, None) if type(env) is _WireView else _EVENT_DATA_SLOT.__get__(env)
    fields = _wire_fields(msg, data)
    _become(env, StoredEnvelope)
    Envelope.__init__(env, *fields)


def _become(env: StoredEnvelope, cls: type[StoredEnvelope]) -> None:
    """Switch ``env`` to ``cls`` (the same layout; only which fields are read from the wire differs)."""
    env.__class__ = cls


def _field(name: str, read: Callable[[Any], Any] | None = None, *, copy: bool = False) -> Any:
    """The view's property of the field ``name``: the wire's field, ``read(view)``, or with ``copy`` the
    field once every field was copied; a write copies every field first."""
    slot = _FIELD_SLOTS[name]

    def write(env: StoredEnvelope, value: Any) -> None:
        _copied(env)
        slot.__set__(env, value)

    def copy_then_read(env: StoredEnvelope) -> Any:
        _copied(env)
        return slot.__get__(env)

    if copy:
        return property(copy_then_read, write)
    if read is None:
        # A C getter: no Python frame per read (the fields a fold reads most).
        return property(operator.attrgetter(f"_wire.{name}"), write)
    return property(read, write)


_Optional = Literal["task_id", "causation_id", "trace_id", "idempotency_key", "ttl_seconds"]


def _optional(name: _Optional) -> Callable[[Any], Any]:
    def read(env: StoredEnvelope) -> Any:
        msg = env._wire
        return getattr(msg, name) if msg.HasField(name) else None

    return read


def _priority(env: StoredEnvelope) -> Priority:
    value = env._wire.priority
    priority = _PRIORITY_FROM_WIRE.get(value)
    if priority is None:
        raise InvalidArgument(f"unknown priority {value}; use BACKGROUND, NORMAL or URGENT.")
    return priority


class _ParsedView(StoredEnvelope):
    """A stored envelope whose event_data was read (it keeps it); every other field still comes from the wire."""

    __slots__ = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # dataclasses.replace builds a new one of the same class from every field: a plain one.
        _become(self, StoredEnvelope)
        Envelope.__init__(self, *args, **kwargs)

    channel_id = _field("channel_id")
    sender_id = _field("sender_id")
    audience = _field("audience", copy=True)
    event_type = _field("event_type")
    envelope_id = _field("envelope_id")
    task_id = _field("task_id", _optional("task_id"))
    causation_id = _field("causation_id", _optional("causation_id"))
    trace_id = _field("trace_id", _optional("trace_id"))
    priority = _field("priority", _priority)
    depth = _field("depth")
    idempotency_key = _field("idempotency_key", _optional("idempotency_key"))
    created_at = _field("created_at")
    ttl_seconds = _field("ttl_seconds", _optional("ttl_seconds"))
    seq = _field("seq")


class _WireView(_ParsedView):
    """A stored envelope as built: every field, event_data too, comes from the wire."""

    __slots__ = ()

    @property
    def event_data(self) -> dict[str, Any]:
        """Event-specific JSON payload (parsed from the stored JSON on first read, then kept)."""
        data = _event_data(self._wire.event_data_json, None)
        self.event_data = data
        return data

    @event_data.setter
    def event_data(self, value: dict[str, Any]) -> None:
        _EVENT_DATA_SLOT.__set__(self, value)
        _become(self, _ParsedView)


_new = object.__new__


def envelope_from_wal(msg: envelope_pb2.Envelope) -> Envelope:
    """An :class:`Envelope` of a committed WAL record that reads its fields from ``msg`` as they are read.

    For rebuilding channels from the hub's own WAL (checked when it was admitted; ``msg`` must not
    change afterwards); anything read from a client goes through :func:`envelope_from_wire`."""
    env: StoredEnvelope = _new(_WireView)
    env._wire = msg
    return env


# The visibility rule, on the wire form (the hub delivers and filters wire messages; the same
# rule on the model is netkernel.envelope.visible_to / readable_by).


def wire_visible_to(wire: envelope_pb2.Envelope, agent_id: str) -> bool:
    """Broadcast (no audience), or ``agent_id`` is in the explicit audience."""
    return not wire.HasField("audience") or agent_id in wire.audience.agent_ids


def wire_recipients(wire: envelope_pb2.Envelope, participants: Iterable[str]) -> list[str]:
    """Those of ``participants`` the envelope goes to: every one that may see it, except its sender.

    The fields are read once, not once per participant (the hub counts every envelope this way)."""
    sender = wire.sender_id
    if not wire.HasField("audience"):
        return [p for p in participants if p != sender]
    audience = set(wire.audience.agent_ids)
    return [p for p in participants if p != sender and p in audience]


def wire_readable_by(wire: envelope_pb2.Envelope, agent_id: str) -> bool:
    """What a participant may read back from the WAL: what it may see, and what it sent."""
    return wire.sender_id == agent_id or wire_visible_to(wire, agent_id)
