"""How the Redis store packs rows into values and reads them back.

A packed value is a length-prefixed concatenation (:func:`pack`); the decoders here turn the
packed hash fields the commit script wrote back into the :mod:`hubsvc.storage.base` rows.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, cast

from hubsvc.storage.base import AgentRow, AuditRow, ExecutionRow


def pack(*parts: str | bytes) -> bytes:
    """Length-prefixed concatenation (4-byte big-endian length before each part)."""
    out = bytearray()
    for part in parts:
        raw = part.encode() if isinstance(part, str) else part
        out += struct.pack(">I", len(raw)) + raw
    return bytes(out)


def unpack(packed: bytes) -> list[bytes]:
    """The parts :func:`pack` joined."""
    parts: list[bytes] = []
    at = 0
    while at < len(packed):
        (size,) = struct.unpack_from(">I", packed, at)
        parts.append(packed[at + 4 : at + 4 + size])
        at += 4 + size
    return parts


def pack_call(keys: Sequence[str], args: Sequence[Any]) -> bytes:
    """One script call (KEYS, ARGV after the deadline) as bytes, for a channel's outbox."""
    return pack(str(len(keys)), *keys, *(a if isinstance(a, (str, bytes)) else str(a) for a in args))


def unpack_call(packed: bytes) -> tuple[list[str], list[bytes]]:
    """The (KEYS, ARGV) :func:`pack_call` packed."""
    parts = unpack(packed)
    n = int(parts[0])
    return [p.decode() for p in parts[1 : 1 + n]], parts[1 + n :]


def idem_field(sender_id: str, key: str) -> str:
    """The hash field of a sender's idempotency key (or of the envelope it answers: replies hash)."""
    return f"{sender_id}\0{key}"


def agent_row(agent_id: str, packed: bytes) -> AgentRow:
    """An identity from its packed row (name, credential hash, removed, record)."""
    name, cred_hash, removed, record = unpack(packed)
    return AgentRow(agent_id, name.decode(), cred_hash.decode(), record, removed == b"1")


def execution_row(execution_id: str, running: bool, record: bytes, meta: bytes) -> ExecutionRow:
    """An execution row from its record and packed meta (root, caller, target, started, owner —
    rows written before owners were recorded have no owner)."""
    root, caller, target, started, *owner = (v.decode() for v in unpack(meta))
    return ExecutionRow(execution_id, root, caller, target, running, float(started), record, owner[0] if owner else "")


def audit_row(audit_id: int, packed: bytes) -> AuditRow:
    """An audit record from its packed value (kind, actor, subject, detail, created at)."""
    kind, actor_id, subject_id, detail_json, created_at = (v.decode() for v in unpack(packed))
    return AuditRow(audit_id, kind, actor_id, subject_id, detail_json, float(created_at))


def text(value: bytes | str) -> str:
    """A reply value as text."""
    return value.decode("utf-8") if isinstance(value, bytes) else value


def as_bytes(value: object) -> bytes:
    """A reply value as bytes (the client is built without decode_responses)."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    raise TypeError(f"unexpected Redis reply {type(value).__name__}")


def datas(entries: object) -> list[bytes]:
    """The ``d`` (envelope) field of each entry of an XRANGE reply."""
    return [as_bytes(fields[b"d"]) for _, fields in cast("list[tuple[bytes, dict[bytes, bytes]]]", entries or [])]
