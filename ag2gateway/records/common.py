"""Time formats shared by the record mappings."""

from __future__ import annotations

from datetime import UTC, datetime

from google.protobuf import timestamp_pb2


def iso(ts: timestamp_pb2.Timestamp) -> str:
    """AG2's ISO time of a protobuf timestamp ("" when unset)."""
    if ts.seconds == 0 and ts.nanos == 0:
        return ""
    return datetime.fromtimestamp(ts.seconds + ts.nanos / 1e9, UTC).isoformat()


def iso_or_none(ts: timestamp_pb2.Timestamp) -> str | None:
    return iso(ts) or None
