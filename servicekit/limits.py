"""Request field limits: one generic check of every request message, run at each service's seam.

:class:`RequestLimits` walks a protobuf request by its descriptor and refuses it when

* a string field is longer (in UTF-8 bytes) than its limit: identifiers and short names
  (fields ending in ``_id``, ``_ids``, ``_key``, ``_token``, ``_type`` and the names in
  :data:`ID_FIELD_NAMES`, and every map key) get ``FieldLimits.max_id_bytes``, other text
  ``FieldLimits.max_text_bytes``; a field with a :class:`Bound` override gets that bound
  (payloads: event data, skill markdown, knowledge file content, with PAYLOAD_TOO_LARGE);
* a repeated or map field has more items than ``FieldLimits.max_items`` (or its override);
* a field listed as a set (an audience, channel targets) names the same id twice;
* a 64-bit unsigned integer does not fit a signed 64-bit integer (OUT_OF_RANGE): every
  position, seq and id is stored as SQLite's INTEGER.

The refusal names the field path (``envelope.audience.agent_ids``), its size and the limit,
and changes nothing. A request is first given a quick pass that builds no paths (most requests are
within their limits); only one it cannot clear is walked for the refusal.
The hub runs it for every unary RPC and every Connect frame
(``hubsvc/rpc.py``, ``hubsvc/servicer.py``), the knowledge service for every request
(``knowledgesvc/servicer.py``). The whole request is also bounded by the server's message
limit (``servicekit/runtime.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from netkernel.errors import AgentNetError, InvalidArgument, OutOfRange

#: Largest value of a signed 64-bit integer (SQLite's INTEGER).
INT64_MAX = 2**63 - 1

#: Field names that hold identifiers or short names (besides the ``_id``-like suffixes).
ID_FIELD_NAMES = frozenset(
    {
        "agent_ids",
        "allowed_callers",
        "audience",
        "capabilities",
        "capability",
        "claimed_capabilities",
        "client_name",
        "created_at",
        "credential",
        "domains",
        "input_modes",
        "kind",
        "languages",
        "model",
        "name",
        "namespace",
        "owner",
        "project",
        "provider",
        "skill",
        "skills",
        "sort_by",
        "speaker",
        "target",
        "targets",
        "tools",
        "type",
    }
)
_ID_SUFFIXES = ("_id", "_ids", "_key", "_token", "_type")

_UNSIGNED_64 = (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64)


@dataclass(frozen=True)
class FieldLimits:
    """The generic bounds of request fields (each service sets them from its flags)."""

    max_id_bytes: int = 256
    """Longest identifier, key, token or short name, in UTF-8 bytes."""
    max_text_bytes: int = 64 * 1024
    """Longest other text field (intent, reason, description, query, title, …), in UTF-8 bytes."""
    max_items: int = 1024
    """Most items of a repeated field or entries of a map."""


@dataclass(frozen=True)
class Bound:
    """A per-field override of the generic bounds (``limit`` in UTF-8 bytes for a string, items for a
    repeated field or map, the largest value for an integer)."""

    limit: int
    error: type[AgentNetError] = InvalidArgument
    """The refusal's class: PayloadTooLarge for payloads, InvalidArgument otherwise."""
    hint: str = ""
    """What to do instead, appended to the refusal's message."""


@dataclass(frozen=True)
class _Rule:
    kind: str  # "string" | "int" | "message" | "other"
    limit: int
    error: type[AgentNetError]
    hint: str
    items: int | None  # item limit of a repeated field / map, None for singular
    unique: bool
    map_key: _Rule | None = None
    map_value: _Rule | None = None


@dataclass
class RequestLimits:
    """Checks requests against :class:`FieldLimits` plus per-field overrides.

    ``overrides`` maps a field's full name (``agentnet.v1.Envelope.event_data_json``) to its
    :class:`Bound`; ``unique`` names repeated string fields that must not repeat an item.
    """

    limits: FieldLimits = field(default_factory=FieldLimits)
    overrides: Mapping[str, Bound] = field(default_factory=dict)
    unique: frozenset[str] = frozenset()
    _plans: dict[str, dict[str, _Rule]] = field(default_factory=dict, repr=False)

    def check(self, message: Message, prefix: str = "") -> None:
        """Raise the refusal for the first field of ``message`` over its limit; ``prefix`` starts
        the field paths in messages (e.g. ``"post."``)."""
        if not self._fits(message):
            self._walk(message, prefix)

    def refusal(self, message: Message, prefix: str = "") -> AgentNetError | None:
        """The refusal :meth:`check` would raise, or None."""
        if self._fits(message):
            return None
        try:
            self._walk(message, prefix)
        except AgentNetError as err:
            # Without the walk's frames: they hold the message (megabytes when a field is over its
            # limit), and a caller keeping the error in a local would keep them alive in a cycle.
            return err.with_traceback(None)
        return None

    # -- the quick pass: True when no field can be over its limit ---------------------

    def _fits(self, message: Message) -> bool:
        """A pass over ``message`` without field paths or refusals, for the common request within
        its limits. False is not a refusal: a string may be up to 4 bytes per character, so one
        whose length times 4 is over its limit is measured by :meth:`_walk`, which decides."""
        descriptor = message.DESCRIPTOR
        plan = self._plans.get(descriptor.full_name)
        if plan is None:
            plan = self._plan(descriptor)
        for fd, value in message.ListFields():
            rule = plan.get(fd.name)
            if rule is None:
                continue
            if rule.items is None:
                if not self._value_fits(value, rule):
                    return False
            elif len(value) > rule.items:
                return False
            elif rule.map_key is not None:
                key_rule, value_rule = rule.map_key, rule.map_value
                assert value_rule is not None
                for key in value:
                    if not (self._value_fits(key, key_rule) and self._value_fits(value[key], value_rule)):
                        return False
            else:
                if rule.unique and len(set(value)) != len(value):
                    return False
                for item in value:
                    if not self._value_fits(item, rule):
                        return False
        return True

    def _value_fits(self, value: Any, rule: _Rule) -> bool:
        kind = rule.kind
        if kind == "string":
            return len(value) * 4 <= rule.limit
        if kind == "int":
            return bool(value <= rule.limit)
        if kind == "message":
            return self._fits(value)
        return True

    # -- the walk ---------------------------------------------------------------------

    def _walk(self, message: Message, prefix: str) -> None:
        plan = self._plan(message.DESCRIPTOR)
        for fd, value in message.ListFields():
            rule = plan.get(fd.name)
            if rule is None:
                continue
            path = prefix + fd.name
            if rule.items is not None:
                count = len(value)
                if count > rule.items:
                    raise InvalidArgument(
                        f"{path} has {count} items, over the limit of {rule.items}",
                        metadata={"field": path, "items": str(count), "limit": str(rule.items)},
                    )
                if rule.map_key is not None:
                    self._walk_map(value, path, rule)
                    continue
                if rule.unique:
                    _refuse_repeats(value, path)
                for index, item in enumerate(value):
                    self._check_value(item, f"{path}[{index}]", rule)
            else:
                self._check_value(value, path, rule)

    def _walk_map(self, value: Any, path: str, rule: _Rule) -> None:
        assert rule.map_key is not None and rule.map_value is not None
        for key in value:
            self._check_value(key, f"{path} (a key)", rule.map_key)
            self._check_value(value[key], f"{path}[{key!r}]", rule.map_value)

    def _check_value(self, value: Any, path: str, rule: _Rule) -> None:
        if rule.kind == "string":
            if len(value) * 4 > rule.limit:
                size = len(value.encode("utf-8", "surrogatepass"))
                if size > rule.limit:
                    hint = f"; {rule.hint}" if rule.hint else ""
                    raise rule.error(
                        f"{path} is {size} bytes long, over the limit of {rule.limit} bytes{hint}",
                        metadata={"field": path, "size": str(size), "limit": str(rule.limit)},
                    )
        elif rule.kind == "int":
            if value > rule.limit:
                raise OutOfRange(
                    f"{path} is {value}; the largest accepted value is {rule.limit}",
                    metadata={"field": path, "value": str(value), "limit": str(rule.limit)},
                )
        elif rule.kind == "message":
            self._walk(value, path + ".")

    # -- plans: what to check of each message type, computed once -------------------

    def _plan(self, descriptor: Descriptor | Any) -> dict[str, _Rule]:
        plan = self._plans.get(descriptor.full_name)
        if plan is None:
            plan = {}
            self._plans[descriptor.full_name] = plan  # before recursing: messages may nest themselves
            for fd in descriptor.fields:
                rule = self._rule(fd)
                if rule is not None:
                    plan[fd.name] = rule
        return plan

    def _rule(self, fd: FieldDescriptor) -> _Rule | None:
        override = self.overrides.get(fd.full_name)
        repeated = fd.is_repeated
        items = (override.limit if override else self.limits.max_items) if repeated else None
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            key_fd, value_fd = fd.message_type.fields_by_name["key"], fd.message_type.fields_by_name["value"]
            key = self._scalar_rule(key_fd, None, id_like=True)
            value = self._scalar_rule(value_fd, None, id_like=_is_id(fd.name))
            return _Rule("map", 0, InvalidArgument, "", items, False, key, value)
        element_override = None if repeated else override
        rule = self._scalar_rule(fd, element_override, id_like=_is_id(fd.name))
        if rule.kind == "other" and not repeated:
            return None
        return _Rule(rule.kind, rule.limit, rule.error, rule.hint, items, fd.full_name in self.unique)

    def _scalar_rule(self, fd: FieldDescriptor, override: Bound | None, *, id_like: bool) -> _Rule:
        if fd.type == FieldDescriptor.TYPE_STRING:
            if override is not None:
                return _Rule("string", override.limit, override.error, override.hint, None, False)
            limit = self.limits.max_id_bytes if id_like else self.limits.max_text_bytes
            return _Rule("string", limit, InvalidArgument, "", None, False)
        if fd.type in _UNSIGNED_64:
            return _Rule("int", override.limit if override else INT64_MAX, OutOfRange, "", None, False)
        if fd.type == FieldDescriptor.TYPE_MESSAGE:
            return _Rule("message", 0, InvalidArgument, "", None, False)
        return _Rule("other", 0, InvalidArgument, "", None, False)


def _is_id(name: str) -> bool:
    return name in ID_FIELD_NAMES or name.endswith(_ID_SUFFIXES)


def _refuse_repeats(values: Iterable[str], path: str) -> None:
    seen: set[str] = set()
    for value in values:
        if value in seen:
            raise InvalidArgument(
                f"{path} lists {value!r} more than once; name each id once", metadata={"field": path, "item": value}
            )
        seen.add(value)
