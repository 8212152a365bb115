"""A ReadWal(follow) subscription: the envelopes committed while the client reads, bounded in bytes.

:class:`WalFollower` watches one channel and queues each committed envelope until the
stream sends it. The queue is bounded by ``max_bytes`` (serialized envelope sizes): a
client that stops reading makes it overflow, and then the follower unsubscribes and drops
what it queued at once, so the hub holds nothing more for it; the stream ends with
:class:`~netkernel.errors.InboxFull` naming the seq to resume from (``from_seq``).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from agentnet.v1 import envelope_pb2

from netkernel.errors import InboxFull

Watch = Callable[[str, Callable[[envelope_pb2.Envelope], None]], Callable[[], None]]
"""Subscribes a callback to a channel's committed envelopes; returns the unsubscribe."""


class WalFollower:
    """The committed envelopes of one channel, queued for a following stream up to ``max_bytes``."""

    def __init__(self, watch: Watch, channel_id: str, *, max_bytes: int) -> None:
        self.channel_id = channel_id
        self.max_bytes = max_bytes
        self.buffered_bytes = 0
        """Bytes queued and not yet taken by the stream."""
        self._queue: deque[tuple[envelope_pb2.Envelope, int]] = deque()
        self._ready = asyncio.Event()
        self._overflowed = False
        self._unsubscribe: Callable[[], None] | None = watch(channel_id, self._offer)

    def _offer(self, wire: envelope_pb2.Envelope) -> None:
        if self._overflowed:
            return
        size = wire.ByteSize()
        if self.buffered_bytes and self.buffered_bytes + size > self.max_bytes:
            self._overflowed = True
            self._queue.clear()
            self.buffered_bytes = 0
            self.close()
        else:
            self._queue.append((wire, size))
            self.buffered_bytes += size
        self._ready.set()

    async def next(self, resume_from: int) -> envelope_pb2.Envelope:
        """The next committed envelope; raises InboxFull once the queue overflowed.

        ``resume_from`` is the seq the client should ask for next (said in the error)."""
        while not self._queue:
            if self._overflowed:
                raise InboxFull(
                    f"the hub ended this ReadWal follow because the client is not reading it: more than "
                    f"{self.max_bytes} bytes of new envelopes were waiting (--max-stream-buffer-bytes). "
                    f"Nothing is lost: call ReadWal again with from_seq={resume_from} and read as you go.",
                    metadata={
                        "cause": "slow_consumer",
                        "channel_id": self.channel_id,
                        "resume_from_seq": str(resume_from),
                        "limit_bytes": str(self.max_bytes),
                    },
                )
            self._ready.clear()
            await self._ready.wait()
        wire, size = self._queue.popleft()
        self.buffered_bytes -= size
        return wire

    def close(self) -> None:
        """Stop watching the channel (idempotent)."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
