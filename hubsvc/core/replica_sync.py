"""Following the other replicas: the change feed of a shared store applied to this replica's memory.

When several hub processes share one store (Redis, docs/scale-out.md), each one holds the
live channels, the registry and the tasks in memory and admits against that. Every commit
appends a :class:`~hubsvc.storage.base.Change` to the store's feed; :class:`ReplicaSync`
reads it from a position taken before this replica loaded its state, and applies the changes
other replicas made: records are re-read from the store (identities, tasks, executions), each
channel folds and publishes the envelopes it lacks (:meth:`LiveChannels.catch_up`), and acked
the inbox counts follow the folded WAL. If the feed was trimmed past this replica's position, every
live channel is caught up from the store instead.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from hubsvc.core.live_channels import LiveChannels
from hubsvc.recorder import NO_RECORDER, Recorder
from hubsvc.storage.base import Change, ChangeFeed, FeedGap

log = logging.getLogger("agentnet.hub.replicas")

ApplyRecords = Callable[[Change], Awaitable[None]]
"""Re-reads the identities, tasks, executions and stream holders a change names."""
RefreshAll = Callable[[], Awaitable[None]]
"""Re-reads every record and catches every channel up (after the feed was trimmed past us)."""

_BLOCK = 1.0
"""Seconds one feed read waits for a change."""
_RETRY_MAX = 2.0
"""Most seconds between attempts while the store does not answer."""


class ReplicaSync:
    """Applies other replicas' commits, read from the store's change feed, to this replica."""

    def __init__(
        self,
        feed: ChangeFeed,
        position: str,
        channels: LiveChannels,
        *,
        records: ApplyRecords,
        refresh_all: RefreshAll,
        recorder: Recorder = NO_RECORDER,
    ) -> None:
        self._feed = feed
        self.position = position
        """The last feed entry applied."""
        self._channels = channels
        self._records = records
        self._refresh_all = refresh_all
        self._recorder = recorder
        self._stopped = False

    async def run(self) -> None:
        """Follow the feed until cancelled. Applying a change is idempotent, so after any failure
        (the store did not answer) the same changes are read and applied again, with backoff."""
        delay = 0.05
        failing = False
        while not self._stopped:
            try:
                await self.step()
                if failing:
                    # The store answers again: channels whose rebuild found it unreachable are
                    # rebuilt now (their timers re-armed), not on their next use.
                    await self._channels.catch_up_all()
                    failing = False
                delay = 0.05
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if self._stopped:  # a client library may turn the cancellation into an error
                    return
                failing = True
                log.warning("could not apply the change feed (%r); retrying in %.2fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, _RETRY_MAX)

    def stop(self) -> None:
        """Make :meth:`run` end (call before cancelling it)."""
        self._stopped = True

    async def step(self) -> None:
        """Read the next changes (waiting up to a second) and apply those of other replicas."""
        try:
            position, changes = await self._feed.read(self.position, _BLOCK)
        except FeedGap as gap:
            log.warning("%s; refreshing everything from the store", gap)
            position = await self._feed.position()
            await self._refresh_all()
            self.position = position
            return
        theirs = [c for c in changes if c.origin != self._feed.replica_id]
        if theirs:
            await self.apply(theirs)
            now = time.time()
            self._recorder.feed_applied(len(theirs), [now - c.committed_at for c in theirs if c.committed_at])
        self.position = position

    async def apply(self, changes: Sequence[Change]) -> None:
        """Apply other replicas' changes: records first (a new channel's members may be new),
        then each channel up to its highest seq named (channels in parallel; the inbox counts follow
        the folded envelopes)."""
        merged = Change(
            origin="",
            channels={},
            agents=tuple(a for c in changes for a in c.agents),
            tasks=tuple(t for c in changes for t in c.tasks),
            executions=tuple(x for c in changes for x in c.executions),
            sessions=tuple(a for c in changes for a in c.sessions),
        )
        for change in changes:
            for channel_id, seq in change.channels.items():
                merged.channels[channel_id] = max(seq, merged.channels.get(channel_id, 0))
        if merged.agents or merged.tasks or merged.executions or merged.sessions:
            await self._records(merged)
        await asyncio.gather(*(self._channels.catch_up(c, s) for c, s in merged.channels.items()))
