"""Small helpers shared by the hub core: ids, clocks and time formats."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import math
import secrets
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from google.protobuf import timestamp_pb2

from netkernel.clip import MAX_AUDIT_VALUE_BYTES, clip_detail, clip_text
from netkernel.errors import InvalidArgument

Clock = Callable[[], float]
"""Returns the current time in seconds since the epoch (injectable for tests)."""

K = TypeVar("K")
V = TypeVar("V")


def committed_already(fut: asyncio.Future[None]) -> bool:
    """Whether a commit future is already resolved with success (the store wrote it at once, inline):
    its callbacks may then run now instead of one event-loop turn later."""
    return fut.done() and not fut.cancelled() and fut.exception() is None


def new_id() -> str:
    """A fresh random id (32 hex characters)."""
    return uuid.uuid4().hex


_ID_PREFIX = secrets.token_hex(8)
_id_counter = itertools.count(1)


def next_envelope_id() -> str:
    """A unique envelope id without a syscall: a random per-process prefix plus a counter.

    32 hex characters like :func:`new_id`; unique across restarts (64 random bits per
    process), cheap enough for the admission hot path. Not a secret.
    """
    return f"{_ID_PREFIX}{next(_id_counter):016x}"


def hash_secret(secret: str) -> str:
    """The SHA-256 hex digest a secret is stored as (secrets themselves are never kept)."""
    return hashlib.sha256(secret.encode()).hexdigest()


def new_secret() -> str:
    """A fresh credential secret (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


_second_cache: list[tuple[int, str]] = [(-1, "")]


def _second_micros(ts: float) -> tuple[int, int]:
    """``ts`` as (whole seconds, microseconds): the one rounding both envelope times share."""
    second = int(ts // 1)
    return second, min(round((ts - second) * 1_000_000), 999_999)


def iso_z(ts: float) -> str:
    """RFC 3339 UTC with microseconds and a trailing "Z" (the date part is cached per second)."""
    second, micros = _second_micros(ts)
    cached_second, prefix = _second_cache[0]
    if second != cached_second:
        prefix = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        _second_cache[0] = (second, prefix)
    return f"{prefix}.{micros:06d}Z"


def stamp_time(out: timestamp_pb2.Timestamp, ts: float) -> None:
    """Set ``out`` to the instant :func:`iso_z` writes for ``ts`` (Envelope.created_time beside created_at)."""
    out.seconds, micros = _second_micros(ts)
    out.nanos = micros * 1000


def parse_iso_z(text: str) -> float:
    """Inverse of :func:`iso_z` (accepts any ISO-8601 with offset or "Z")."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def to_timestamp(ts: float) -> timestamp_pb2.Timestamp:
    """A protobuf Timestamp."""
    out = timestamp_pb2.Timestamp()
    out.FromNanoseconds(int(ts * 1e9))
    return out


def from_timestamp(ts: timestamp_pb2.Timestamp) -> float:
    """Seconds since the epoch of a protobuf Timestamp."""
    return float(ts.ToNanoseconds()) / 1e9


def check_seconds(value: float, field: str, maximum: float, *, absent: str) -> float:
    """A client's duration: a finite number of seconds in (0, ``maximum``]; InvalidArgument otherwise.

    ``absent`` names what omitting the field means (for the error message).
    """
    if not math.isfinite(value) or value <= 0 or value > maximum:
        raise InvalidArgument(
            f"{field} must be a positive, finite number of seconds up to {maximum:g}, not {value!r}; "
            f"omit it for {absent}.",
            metadata={"field": field, "limit": f"{maximum:g}"},
        )
    return value


def system_clock() -> float:
    """The default clock."""
    return time.time()


class BoundedDict(OrderedDict[K, V], Generic[K, V]):
    """A dict that forgets its oldest entries beyond ``limit`` (an LRU on insertion)."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        self.evicted = False
        """Some entry was forgotten (so a miss does not prove the key was never set)."""

    def __setitem__(self, key: K, value: V) -> None:
        super().__setitem__(key, value)
        if len(self) > self.limit:
            self.popitem(last=False)
            self.evicted = True


AuditRow = tuple[str, str, str, str, float]
"""(kind, actor_id, subject_id, detail_json, created_at): one audit append."""


def audit_row(kind: str, actor: str, subject: str, detail: dict[str, Any], at: float) -> AuditRow:
    """One audit append with what it records of a client's input bounded: the actor, the subject
    and every string of ``detail`` are clipped (:mod:`netkernel.clip`), so a refusal of a huge
    input leaves a small row."""
    return (
        kind,
        clip_text(actor, MAX_AUDIT_VALUE_BYTES),
        clip_text(subject, MAX_AUDIT_VALUE_BYTES),
        json.dumps(clip_detail(detail)),
        at,
    )
