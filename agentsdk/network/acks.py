"""Acks of one Connect stream, coalesced: every ack made in the same event-loop turn
goes out in one ``Ack`` frame (a batch of deliveries processed together is acked in
one frame; an ack is never held back past the turn it was made in)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from agentnet.v1 import connect_pb2

MAX_ENTRIES_PER_FRAME = 10_000
"""Most entries per Ack frame (the hub refuses more than its --max-stream-entries, 100 000 by default)."""


class AckCoalescer:
    """Collects ``(channel_id, seq)`` acks and hands them to ``send`` as Ack frames at the end of the turn."""

    def __init__(self, send: Callable[[connect_pb2.Ack], None]) -> None:
        self._send = send
        self._pending: list[connect_pb2.AckEntry] = []
        self._scheduled = False

    def add(self, channel_id: str, seq: int) -> None:
        """Ack one envelope; sent with every other ack of this event-loop turn."""
        self._pending.append(connect_pb2.AckEntry(channel_id=channel_id, seq=seq))
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        """Send what is pending now, in frames of at most :data:`MAX_ENTRIES_PER_FRAME` entries."""
        self._scheduled = False
        pending, self._pending = self._pending, []
        for start in range(0, len(pending), MAX_ENTRIES_PER_FRAME):
            self._send(connect_pb2.Ack(entries=pending[start : start + MAX_ENTRIES_PER_FRAME]))
