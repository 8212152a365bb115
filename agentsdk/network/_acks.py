"""Acks of one Connect stream, coalesced.

Every ack waits for the end of the event-loop turn it was made in, so the deliveries processed
together are acked in one ``Ack`` frame. With a hub that reads acks riding in a ``PostBatch``
(``Welcome.post_batch_ack``) an ack may wait a little longer, :data:`ACK_DELAY` at most, for a
post to carry it (:meth:`AckCoalescer.take`, called by :class:`~agentsdk.network._outbox.Outbox`
when it writes posts): a reply and the ack of the envelope it answers then cost one frame. An ack
never waits longer than that, nor once :attr:`AckCoalescer.flush_at` acks are pending, so the
hub's flow control (``Hello.max_in_flight``) and its stored cursors stay close behind.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from agentnet.v1 import connect_pb2

MAX_ENTRIES_PER_FRAME = 10_000
"""Most entries per Ack (the hub refuses more than its --max-stream-entries, 100 000 by default)."""
ACK_DELAY = 0.005
"""Seconds an ack may wait for a post to ride on, when the hub reads acks in a PostBatch."""


class AckCoalescer:
    """Collects ``(channel_id, seq)`` acks and hands them to ``send`` as Ack frames, or to a post
    written before then (:meth:`take`)."""

    def __init__(self, send: Callable[[connect_pb2.Ack], None], *, flush_at: int = MAX_ENTRIES_PER_FRAME) -> None:
        self._send = send
        self._pending: list[tuple[str, int]] = []
        """``(channel_id, seq)`` of the acks not handed out yet (made entries only when they go)."""
        self._timer: asyncio.Handle | None = None
        self._soon = False
        """The armed timer sends at the end of this turn (not after the delay)."""
        self.delay = 0.0
        """Seconds an ack may wait for a post (0: until the end of its turn); :data:`ACK_DELAY`
        while the stream's hub reads acks riding in a PostBatch."""
        self.flush_at = flush_at
        """Pending acks that go at the end of the turn, without waiting for a post (1: every ack)."""

    @property
    def pending(self) -> int:
        """Acks not handed out yet (waiting for the end of the turn, the delay or a post to ride on)."""
        return len(self._pending)

    def add(self, channel_id: str, seq: int) -> None:
        """Ack one envelope: sent with the acks made around it, in a frame or with a post."""
        self._pending.append((channel_id, seq))
        now = not self.delay or len(self._pending) >= self.flush_at
        if self._timer is not None:
            if self._soon or not now:
                return
            self._timer.cancel()
        loop = asyncio.get_running_loop()
        self._timer = loop.call_soon(self.flush) if now else loop.call_later(self.delay, self.flush)
        self._soon = now

    def take(self) -> connect_pb2.Ack | None:
        """The pending acks (at most :data:`MAX_ENTRIES_PER_FRAME`), for a post to carry; None if none."""
        if not self._pending:
            return None
        taken, self._pending = self._pending[:MAX_ENTRIES_PER_FRAME], self._pending[MAX_ENTRIES_PER_FRAME:]
        if not self._pending and self._timer is not None:
            self._timer.cancel()
            self._timer = None
        ack = connect_pb2.Ack()
        add = ack.entries.add
        for channel_id, seq in taken:
            entry = add()  # fields set one by one: add(channel_id=..., seq=...) costs half as much again
            entry.channel_id = channel_id
            entry.seq = seq
        return ack

    def flush(self) -> None:
        """Send what is pending now, in frames of at most :data:`MAX_ENTRIES_PER_FRAME` entries."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while (ack := self.take()) is not None:
            self._send(ack)
