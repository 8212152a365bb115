"""Hypothesis strategies that build any protobuf request message from its descriptor.

Every field gets hostile values for its type: edge and huge strings (unicode, NUL,
newlines), ints at their type's bounds (negative, >= 2**63 for 64-bit unsigned), NaN /
infinite / huge floats, unknown enum numbers, repeated fields with many duplicates,
and for ``*_json`` fields JSON that is valid, invalid, or nested deeply. A pool of real
values (ids and names that exist on the server) is mixed in so that calls also get past
the "unknown id" checks into the code behind them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor, OneofDescriptor
from google.protobuf.message import Message
from hypothesis import strategies as st

HUGE = 300_000
"""Characters of a "huge" string: far above every documented field limit, well under the 16 MiB message limit."""

Pool = Mapping[str, Sequence[str]]
"""Real values by field name (e.g. ``channel_id`` -> ids of live channels); key ``""`` is for any string field."""

Exclude = Callable[[str, str, Any], bool]
"""(message full name, field name, value) -> True to keep that value out of the generated requests."""

_BUILT: dict[tuple[object, ...], tuple[tuple[object, ...], st.SearchStrategy[Any]]] = {}


def _once(parts: tuple[object, ...], build: Callable[[], st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """The strategy ``build()`` makes for ``parts`` (descriptors, the pool, ``exclude``, a depth), built once.

    Hypothesis works out a new strategy object's properties the first time it draws from it; building a
    field's strategies again for every value drawn was most of the fuzz modules' time. The entry keeps
    ``parts`` alive, so their ids (the key) are not reused by other objects.
    """
    key = tuple(p if isinstance(p, int | str) else id(p) for p in parts)
    entry = _BUILT.get(key)
    if entry is None:
        entry = _BUILT[key] = (parts, build())
    return entry[1]


_EDGE_STRINGS = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "name\n",
    "\n",
    "../../etc/passwd",
    "/",
    "//",
    "*",
    "%s%n",
    "\u202e\u0000\ufeff",
    "😀" * 3,
    "é",
    "\ud7ff\ue000",
    "a" * 256,
    "a" * 4097,
]

_INT_BOUNDS = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
}


def edge_strings(pool: Sequence[str] = ()) -> st.SearchStrategy[str]:
    """Hostile strings, the pool's real values, and some of each glued together."""
    options: list[st.SearchStrategy[str]] = [
        st.sampled_from(_EDGE_STRINGS),
        st.text(max_size=40),
        st.text(alphabet=st.characters(codec="utf-8"), max_size=12),
        st.builds(lambda c, n: c * n, st.sampled_from(["a", "é", "\x00", "\n", "😀"]), st.integers(HUGE // 2, HUGE)),
    ]
    if pool:
        real = st.sampled_from(list(pool))
        options = [
            real,
            real,
            real,
            *options,
            st.builds(lambda p, s: p + s, real, st.sampled_from(["\n", "\x00", " "])),
        ]
    return st.one_of(options)


def _json_values(depth: int) -> st.SearchStrategy[Any]:
    leaves = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=20),
    )
    return st.recursive(
        leaves,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
        max_leaves=8,
    )


def json_texts(pool: Pool) -> st.SearchStrategy[str]:
    """Text for ``*_json`` fields: objects (also of real values), other JSON, invalid JSON, deep nesting."""
    keys = sorted(k for k in pool if k)
    real_values = st.sampled_from(keys).flatmap(lambda k: st.sampled_from(list(pool[k]))) if keys else st.nothing()
    objects = st.dictionaries(
        st.sampled_from([*keys, "text", "action", "a", ""]) | st.text(max_size=8),
        real_values | real_values.map(lambda v: [v]) | _json_values(3),
        max_size=5,
    )
    deep = st.builds(
        lambda n, kind: ('{"a":' * n + "1" + "}" * n) if kind else ("[" * n + "]" * n),
        st.sampled_from([50, 999, 1_001, 3_000, 5_000]),
        st.booleans(),
    )
    invalid = st.sampled_from(
        ["", "{", "nul", "[1,2]", '"s"', "1e999999", "NaN", '{"a": NaN}', '{"a": Infinity}', "{}" * 2, "\x00"]
    )
    return st.one_of(objects.map(json.dumps), objects.map(json.dumps), deep, invalid, _json_values(3).map(json.dumps))


def _scalar(field: FieldDescriptor, pool: Pool) -> st.SearchStrategy[Any]:
    return _once((field, pool), lambda: _build_scalar(field, pool))


def _build_scalar(field: FieldDescriptor, pool: Pool) -> st.SearchStrategy[Any]:
    t = field.type
    if t == FieldDescriptor.TYPE_STRING:
        if field.name.endswith("_json"):
            return json_texts(pool)
        own = pool.get(field.name) or pool.get(field.name.removesuffix("s"))
        general = edge_strings(pool.get("", ()))
        return st.one_of(st.sampled_from(list(own)), st.sampled_from(list(own)), general) if own else general
    if t == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=64) | st.just(b"\x00" * HUGE)
    if t == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if t in (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE):
        width = 32 if t == FieldDescriptor.TYPE_FLOAT else 64
        edges = st.sampled_from([0.0, -0.0, float("nan"), float("inf"), float("-inf"), -1.0, 1e-300, 1e300, 0.001, 3.0])
        return st.one_of(edges, edges, st.floats(width=width))
    if t == FieldDescriptor.TYPE_ENUM:
        known = [v.number for v in field.enum_type.values]
        return st.sampled_from(known) | st.integers(-(2**31), 2**31 - 1)
    lo, hi = _INT_BOUNDS[t]
    edges = sorted({lo, hi, 0, 1, 2, 3, 10, 1000, 2**31 - 1, 2**32 - 1, 2**63 - 1, 2**63, 2**64 - 1, -1, -(2**63)})
    at_bounds = st.sampled_from([e for e in edges if lo <= e <= hi])
    return st.one_of(at_bounds, at_bounds, st.integers(lo, hi))


def messages(
    descriptor: Descriptor, pool: Pool, exclude: Exclude | None = None, depth: int = 3
) -> st.SearchStrategy[Message]:
    """A strategy of instances of the message type ``descriptor`` (see the module docstring)."""
    return _once((descriptor, pool, exclude, depth), lambda: _build_messages(descriptor, pool, exclude, depth))


def _build_messages(
    descriptor: Descriptor, pool: Pool, exclude: Exclude | None, depth: int
) -> st.SearchStrategy[Message]:
    from google.protobuf import message_factory

    cls = message_factory.GetMessageClass(descriptor)

    @st.composite
    def build(draw: st.DrawFn) -> Message:
        msg = cls()
        chosen_oneofs = {o.name: draw(_oneof_choice(o)) for o in descriptor.oneofs}
        for field in descriptor.fields:
            oneof = field.containing_oneof
            if oneof is not None and chosen_oneofs[oneof.name] != field.name:
                continue
            if not draw(st.booleans()):  # half the fields stay unset: one bad field at a time gets deep
                continue
            _fill(draw, msg, field, pool, exclude, depth)
        return msg

    return build()


_REPEATS = st.sampled_from([0, 1, 2, 3, 5, 1_000])
"""How many values a repeated field gets."""


def _oneof_choice(oneof: OneofDescriptor) -> st.SearchStrategy[str | None]:
    """Which field of ``oneof`` is set (None: none)."""
    return _once((oneof,), lambda: st.sampled_from([None, *[f.name for f in oneof.fields]]))


def _field_choice(descriptor: Descriptor) -> st.SearchStrategy[FieldDescriptor]:
    """Any field of the message type ``descriptor``."""
    return _once((descriptor, "field"), lambda: st.sampled_from(list(descriptor.fields)))


def _value(draw: st.DrawFn, field: FieldDescriptor, pool: Pool, exclude: Exclude | None, depth: int) -> Any:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return draw(messages(field.message_type, pool, exclude, depth - 1))
    if exclude is None:
        return draw(_scalar(field, pool))
    name = field.containing_type.full_name
    return draw(
        _once((field, pool, exclude), lambda: _scalar(field, pool).filter(lambda v: not exclude(name, field.name, v)))
    )


def _fill(
    draw: st.DrawFn, msg: Message, field: FieldDescriptor, pool: Pool, exclude: Exclude | None, depth: int
) -> None:
    if field.type == FieldDescriptor.TYPE_MESSAGE and depth <= 0:
        return
    target = getattr(msg, field.name)
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        key_field = field.message_type.fields_by_name["key"]
        value_field = field.message_type.fields_by_name["value"]
        for _ in range(draw(st.integers(0, 4))):
            key = _value(draw, key_field, pool, exclude, depth)
            if value_field.type == FieldDescriptor.TYPE_MESSAGE:
                target[key].CopyFrom(_value(draw, value_field, pool, exclude, depth))
            else:
                target[key] = _value(draw, value_field, pool, exclude, depth)
        return
    if field.is_repeated:
        many = draw(_REPEATS)
        if many == 1_000:  # one value many times over (a short one: the message must stay under the size limit)
            one = _value(draw, field, pool, exclude, depth)
            if isinstance(one, str | bytes):
                one = one[:64]
            elif isinstance(one, Message) and one.ByteSize() > 1_000:
                one = type(one)()
            items = [one] * many
        else:
            items = [_value(draw, field, pool, exclude, depth) for _ in range(many)]
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            for item in items:
                target.add().CopyFrom(item)
        else:
            target.extend(items)
        return
    value = _value(draw, field, pool, exclude, depth)
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        getattr(msg, field.name).CopyFrom(value)
    else:
        setattr(msg, field.name, value)


def mutations(base: Message, pool: Pool, exclude: Exclude | None = None) -> st.SearchStrategy[Message]:
    """``base`` (a valid request) with one or two of its fields, or of its sub-messages' fields, made hostile.

    Random requests rarely get past the first check; a valid request with one bad field
    reaches the code behind every other check.
    """

    @st.composite
    def build(draw: st.DrawFn) -> Message:
        msg = type(base)()
        msg.CopyFrom(base)
        for _ in range(draw(st.integers(1, 2))):
            target = msg
            field = draw(_field_choice(target.DESCRIPTOR))
            if field.type == FieldDescriptor.TYPE_MESSAGE and not field.is_repeated and draw(st.booleans()):
                target = getattr(target, field.name)
                field = draw(_field_choice(target.DESCRIPTOR))
            target.ClearField(field.name)
            _fill(draw, target, field, pool, exclude, 2)
        return msg

    return build()
