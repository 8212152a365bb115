"""AG2 envelope ids for hub envelopes, and back.

AG2 compares envelope ids as strings (its cursor and ``since_envelope_id`` replay), so an id must
sort in admission order. The hub's own ids do not (a random per-process prefix and a counter), so
the gateway writes each envelope's AG2 id from what the hub stamped, and reads the hub's parts back
out of it without any lookup (the gateway keeps no state):

    <14 hex: created time, µs since the epoch><12 hex: channel seq><the hub's envelope id>

Ids of one channel sort by admission time, then by seq; ids of different channels by admission
time (as AG2's own ids, which are time-ordered). Agent and channel ids pass through unchanged:
the hub's are 32 hex characters, the shape AG2's are.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentnet.v1 import envelope_pb2

_TIME = 14
_SEQ = 12
_HEAD = _TIME + _SEQ
"""Hex digits of the time and seq parts (:func:`ag2_id` spells them out in its format)."""


@dataclass(frozen=True)
class HubRef:
    """What an AG2 envelope id says about the hub envelope it names."""

    created_us: int
    seq: int
    envelope_id: str


def ag2_id(env: envelope_pb2.Envelope) -> str:
    """The AG2 id of an admitted hub envelope."""
    created = env.created_time  # read once: each access of a sub-message makes a new wrapper
    return f"{created.seconds * 1_000_000 + created.nanos // 1000:014x}{env.seq:012x}{env.envelope_id}"


def parse(ag2: str) -> HubRef | None:
    """The hub parts of an AG2 id the gateway wrote (None: not one of ours, e.g. a client-made id)."""
    if len(ag2) <= _HEAD:
        return None
    try:
        micros = int(ag2[:_TIME], 16)
        seq = int(ag2[_TIME:_HEAD], 16)
    except ValueError:
        return None
    return HubRef(micros, seq, ag2[_HEAD:])


def seq_of(ag2: str) -> int | None:
    """The channel seq inside an AG2 id the gateway wrote (None: not one of ours); :func:`parse` without
    the rest, for a receipt."""
    if len(ag2) <= _HEAD:
        return None
    try:
        return int(ag2[_TIME:_HEAD], 16)
    except ValueError:
        return None


def hub_envelope_id(ag2: str) -> str:
    """The hub's envelope id inside an AG2 id (an id that is not ours passes through)."""
    ref = parse(ag2)
    return ref.envelope_id if ref is not None else ag2
