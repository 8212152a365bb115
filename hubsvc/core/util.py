"""Small helpers shared by the hub core: ids, clocks and time formats."""

from __future__ import annotations

import secrets
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Generic, TypeVar

from google.protobuf import timestamp_pb2

Clock = Callable[[], float]
"""Returns the current time in seconds since the epoch (injectable for tests)."""

K = TypeVar("K")
V = TypeVar("V")


def new_id() -> str:
    """A fresh random id (32 hex characters)."""
    return uuid.uuid4().hex


def new_secret() -> str:
    """A fresh credential secret (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def iso_z(ts: float) -> str:
    """RFC 3339 UTC with microseconds and a trailing "Z"."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


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


def system_clock() -> float:
    """The default clock."""
    return time.time()


class BoundedDict(OrderedDict[K, V], Generic[K, V]):
    """A dict that forgets its oldest entries beyond ``limit`` (an LRU on insertion)."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def __setitem__(self, key: K, value: V) -> None:
        super().__setitem__(key, value)
        if len(self) > self.limit:
            self.popitem(last=False)
