"""What a participant has already read of its channels' WALs, so a turn asks the hub only for what is new.

A channel's WAL never changes below a delivered envelope: every lower seq is committed,
and what an identity may see of it (its audience) is fixed when it is written. So the
envelopes before a delivered envelope, once read, are the same on every later read, and
the default handler's history read (:func:`~agentsdk.network.agent_client.read_wal_until`)
only needs the envelopes admitted since the previous turn: each turn costs one short
``ReadWal`` instead of re-reading the whole channel.

The cache is bounded: at most ``max_bytes`` of envelopes (their wire size) across all
channels, least recently read channels forgotten first (a forgotten channel is read from
the hub again, in full, the next time). The envelopes it returns are shared between
reads: treat them as read-only.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from dataclasses import dataclass, field

from netkernel.envelope import Envelope

DEFAULT_MAX_BYTES = 16 * 1024 * 1024
"""Default bound of one client's transcript cache."""


@dataclass
class _Transcript:
    covered: int = 0
    """Every envelope with seq <= covered that the identity may see is in ``envelopes``."""
    envelopes: list[Envelope] = field(default_factory=list)
    seqs: list[int] = field(default_factory=list)
    size: int = 0


class TranscriptCache:
    """The visible envelopes of each channel up to a known seq, bounded in bytes (LRU by channel)."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if max_bytes < 0:
            raise ValueError(f"max_bytes must not be negative (got {max_bytes}); 0 turns the cache off")
        self.max_bytes = max_bytes
        self.size = 0
        """Bytes held now (wire size of the cached envelopes)."""
        self._channels: OrderedDict[str, _Transcript] = OrderedDict()

    def prefix(self, channel_id: str, upto: int) -> tuple[list[Envelope], int]:
        """(cached envelopes with seq <= ``upto``, the seq they are complete up to, at most ``upto``)."""
        transcript = self._channels.get(channel_id)
        if transcript is None:
            return [], 0
        self._channels.move_to_end(channel_id)
        end = bisect.bisect_right(transcript.seqs, upto)
        return transcript.envelopes[:end], min(transcript.covered, upto)

    def extend(self, channel_id: str, after: int, upto: int, envelopes: list[tuple[Envelope, int]]) -> None:
        """Record what a read of seqs ``after + 1 .. upto`` returned (``(envelope, wire size)`` in seq order).

        Ignored unless it continues the channel's cached prefix exactly (``after`` is its
        ``covered``): a cache with a gap would be wrong, not just stale."""
        if self.max_bytes == 0:
            return
        transcript = self._channels.setdefault(channel_id, _Transcript())
        self._channels.move_to_end(channel_id)
        if after != transcript.covered or upto <= after:
            return
        for envelope, size in envelopes:
            transcript.envelopes.append(envelope)
            transcript.seqs.append(envelope.seq)
            transcript.size += size
            self.size += size
        transcript.covered = upto
        while self.size > self.max_bytes and self._channels:
            _, oldest = self._channels.popitem(last=False)
            self.size -= oldest.size

    def forget(self, channel_id: str) -> None:
        """Drop a channel's transcript (it ended, or the caller wants a fresh read)."""
        transcript = self._channels.pop(channel_id, None)
        if transcript is not None:
            self.size -= transcript.size
