"""Rebuilding live channels from the WAL: every one at start (hydrate), one after a failed commit
(recover), and the lock that waits such a rebuild out."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from agentnet.v1 import envelope_pb2

from hubsvc.core.channel import ChannelRuntime
from hubsvc.core.live_channels.commits import Settled
from hubsvc.core.live_channels.followers import Followers
from hubsvc.core.live_channels.table import FOLD_RUN, ChannelTable
from hubsvc.core.live_channels.timers import ChannelTimers
from hubsvc.core.placement import Placement
from hubsvc.core.stored_run import StoredRun
from hubsvc.core.util import Clock
from hubsvc.governance.inbox import Inboxes
from hubsvc.storage import ChannelRow, HubStore
from netkernel.errors import Unavailable

log = logging.getLogger("agentnet.hub")

Publish = Callable[[ChannelRuntime, list[envelope_pb2.Envelope], bool], None]
"""Hands a channel's committed envelopes on (:meth:`Commits.publish`): (channel, envelopes, ended)."""


class Rebuilder:
    """Folds channels again from what the store holds, and fences their use while it does."""

    def __init__(
        self,
        table: ChannelTable,
        store: HubStore,
        inboxes: Inboxes,
        clock: Clock,
        timers: ChannelTimers,
        *,
        publish: Publish,
        spawn: Callable[[Any, str], asyncio.Task[Any]],
        settled: Settled,
        placement: Placement,
        followers: Followers,
    ) -> None:
        self._table = table
        self._store = store
        self._inboxes = inboxes
        self._clock = clock
        self._timers = timers
        self._publish = publish
        self._spawn = spawn
        self._settled = settled
        self._placement = placement
        self._followers = followers

    async def hydrate(self) -> int:
        """Rebuild every live channel this replica holds by folding its WAL and re-arm its timers (the
        others are followed, :mod:`.followers`); returns the envelopes folded."""
        rows = await self._store.load_live_channels()
        channels = self._table.channels
        holds = self._placement.holds
        self._followers.load(row for row in rows if not holds(row.channel_id))
        for row in rows:
            if holds(row.channel_id):
                channels[row.channel_id] = ChannelRuntime.from_row(row)
        count = self._inboxes.staged_columns
        folded = 0
        now = self._clock()
        scan = aiter(self._store.scan_wal(list(channels)))
        upcoming = asyncio.ensure_future(anext(scan, None))
        while (page := await upcoming) is not None:
            upcoming = asyncio.ensure_future(anext(scan, None))
            # One turn of the loop lets the read of the next page start (in the store's
            # thread) before this one is folded; the fold below never yields.
            await asyncio.sleep(0)
            channel_id, records = page
            ch = channels[channel_id]
            fold, members = ch.fold_stored, ch.participants
            for low in range(0, len(records), FOLD_RUN):
                run = StoredRun(records[low : low + FOLD_RUN])
                fold(run, now)
                count(channel_id, members, run.seqs, run.senders, run.event_types, run.audiences())
            folded += len(records)
        for ch in list(channels.values()):
            ch.committed_seq = ch.meta.last_seq = ch.last_seq
            if ch.is_terminal:  # the close was committed; only the row update was lost
                self._table.drop(ch.channel_id)
                continue
            self._timers.arm(ch)
            self._settled(ch)
        log.info("hydrated %d live channels from %d envelopes", len(channels), folded)
        return folded

    async def recover(self, ch: ChannelRuntime) -> None:
        """A commit of ``ch`` failed: rebuild the channel from what the store really holds.

        Admissions already holding the lock stage into the stale runtime; the store fails
        their bundles (the channel is fenced). Once the fence is lifted, every earlier
        bundle of the channel has been written or failed, so the store's state is final.
        """
        channel_id = ch.channel_id
        unreachable = False
        try:
            async with ch.lock:
                ch.cancel_timers()
                await self._store.lift_fence(channel_id)
                if not self._placement.holds(channel_id):
                    # Its partition moved (the write was fenced): the new holder rebuilds it; this
                    # replica follows it from what it had published.
                    self._table.drop(channel_id)
                    if not ch.is_terminal:
                        self._followers.follow(channel_id, ch.participants, ch.committed_seq)
                    return
                row = await self._store.get_channel(channel_id)
                if row is None:  # its creation was never written
                    self._table.drop(channel_id)
                    return
                self._inboxes.reset(channel_id)  # recounted from the whole WAL the store holds
                fresh, unseen = await self.rebuild(row, ch.committed_seq)
                # What the store holds beyond what this replica published: another replica's
                # posts (it won the race) or a write whose reply was lost after it was stored.
                self.adopt(fresh, unseen)
                log.info("channel %s rebuilt from storage after a failed write (seq %d)", channel_id, fresh.last_seq)
        except Unavailable:
            # The store did not answer (Redis down or restarting): the channel stays, stale, and
            # the next use of it (see locked) tries the rebuild again.
            unreachable = True
            log.warning("channel %s could not be rebuilt yet: its store did not answer", channel_id)
        finally:
            if self._table.channels.get(channel_id) is ch and not unreachable:  # the rebuild itself failed
                self._table.drop(channel_id)
            ch.rebuilt.set()

    async def rebuild(self, row: ChannelRow, published: int) -> tuple[ChannelRuntime, list[envelope_pb2.Envelope]]:
        """A runtime folded from the channel's whole WAL (its envelopes counted in the inboxes),
        and the envelopes above seq ``published``."""
        fresh = ChannelRuntime.from_row(row)
        unseen: list[envelope_pb2.Envelope] = []
        async for _, records in self._store.scan_wal([row.channel_id]):
            unseen += [wire for wire in self.fold(fresh, records) if wire.seq > published]
        fresh.committed_seq = fresh.meta.last_seq = fresh.last_seq
        return fresh, unseen

    def fold(self, ch: ChannelRuntime, records: list[bytes]) -> list[envelope_pb2.Envelope]:
        """Fold stored envelopes into ``ch`` a run at a time (as hydrate does), counting them in the
        inboxes; returns them as wire messages."""
        folded: list[envelope_pb2.Envelope] = []
        now = self._clock()
        for low in range(0, len(records), FOLD_RUN):
            run = StoredRun(records[low : low + FOLD_RUN])
            ch.fold_stored(run, now)
            self._inboxes.staged_columns(
                ch.channel_id, ch.participants, run.seqs, run.senders, run.event_types, run.audiences()
            )
            folded += run.wires
        return folded

    def adopt(self, fresh: ChannelRuntime, unseen: list[envelope_pb2.Envelope]) -> None:
        """Put a rebuilt runtime in the table (an ended one leaves it) and publish ``unseen``."""
        self._table.channels[fresh.channel_id] = fresh
        if not fresh.is_terminal:
            self._timers.arm(fresh)
        self._publish(fresh, unseen, fresh.is_terminal)

    def locked(self, channel_id: str) -> ChannelHold:
        """Hold the lock of the live channel ``channel_id`` (None if it is not live), waiting out a rebuild."""
        return ChannelHold(self, channel_id)

    async def acquire(self, channel_id: str) -> ChannelRuntime | None:
        """Take the lock of the live channel ``channel_id`` and return the channel (None, taking
        nothing, if it is not live), waiting out a rebuild; the caller releases ``ch.lock``."""
        channels = self._table.channels
        while True:
            ch = channels.get(channel_id)
            if ch is None:
                return None
            if ch.stale:
                if ch.rebuilt.is_set():  # its last rebuild found the store unreachable: try again
                    ch.rebuilt = asyncio.Event()
                    self._spawn(self.recover(ch), f"recover-{channel_id}")
                await ch.rebuilt.wait()
                if channels.get(channel_id) is ch:
                    raise Unavailable(
                        f"channel '{channel_id}' is being rebuilt from the hub's store after a failed write, and "
                        "the store does not answer; nothing was changed — retry.",
                        metadata={"channel_id": channel_id, "cause": "store_unreachable"},
                    )
                continue
            await ch.lock.acquire()
            if not ch.stale:
                return ch
            ch.lock.release()


class ChannelHold:
    """``async with`` :meth:`Rebuilder.locked`: holds a live channel's lock for the block (a class
    rather than a generator-based context manager, as admission enters one for every post)."""

    __slots__ = ("_channel_id", "_lock", "_rebuilder")

    def __init__(self, rebuilder: Rebuilder, channel_id: str) -> None:
        self._rebuilder = rebuilder
        self._channel_id = channel_id
        self._lock: asyncio.Lock | None = None

    async def __aenter__(self) -> ChannelRuntime | None:
        ch = await self._rebuilder.acquire(self._channel_id)
        if ch is not None:
            self._lock = ch.lock
        return ch

    async def __aexit__(self, *exc_info: object) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None
