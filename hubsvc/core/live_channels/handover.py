"""A partition's channels moving into or out of this replica's hold (docs/scale-out.md "Channels
divided among the replicas").

:meth:`Handover.gain` runs once this replica holds a partition's lease: every live channel of the
partition is rebuilt from the WAL (everything the previous holder committed is there: its lease
is gone, so nothing more of it can commit) and held; its members here get what they had not been
given. :meth:`Handover.lose` runs when the replica gives the partition up (or lost its lease):
each of its channels takes its lock (no admission in between), waits for its last commit to
settle, disarms its timers and leaves the table, and is followed from the seq it had published.
"""

from __future__ import annotations

import asyncio
import contextlib

from agentnet.v1 import channel_pb2

from hubsvc.core.live_channels.commits import Settled
from hubsvc.core.live_channels.followers import Followers
from hubsvc.core.live_channels.rebuild import Rebuilder
from hubsvc.core.live_channels.table import ChannelTable
from hubsvc.core.placement import Placement
from hubsvc.storage import ChannelRow, HubStore


class Handover:
    """Moves a partition's channels between the held table and the followed one."""

    def __init__(
        self,
        table: ChannelTable,
        store: HubStore,
        rebuilder: Rebuilder,
        followers: Followers,
        placement: Placement,
        settled: Settled,
    ) -> None:
        self._table = table
        self._store = store
        self._rebuilder = rebuilder
        self._followers = followers
        self._placement = placement
        self._settled = settled
        self._rows: asyncio.Future[list[ChannelRow]] | None = None
        """The live rows being read for the partitions gained in one round (they share one read)."""

    async def _live_rows(self) -> list[ChannelRow]:
        """The store's live channel rows (concurrent gains of one round share one read)."""
        if self._rows is None:
            self._rows = asyncio.ensure_future(self._store.load_live_channels())
            self._rows.add_done_callback(lambda _: setattr(self, "_rows", None))
        return await asyncio.shield(self._rows)

    async def gain(self, partition: int) -> int:
        """Hold every live channel of ``partition`` (its lease is this replica's; the partition counts
        as held once this returns); returns how many were taken over."""
        rows = [
            row
            for row in await self._live_rows()
            if self._placement.partition(row.channel_id) == partition and row.channel_id not in self._table.channels
        ]
        for row in rows:
            followed = self._followers.channels.get(row.channel_id)
            async with followed.lock if followed is not None else contextlib.nullcontext():
                if row.channel_id in self._table.channels:
                    continue
                published = self._followers.release(row.channel_id)
                if published is None:  # never followed here: no member here was given any of it
                    published = channel_pb2.ChannelMetadata.FromString(row.record).last_seq
                fresh, unseen = await self._rebuilder.rebuild(row, published)
                self._rebuilder.adopt(fresh, unseen)
                self._settled(fresh)
        return len(rows)

    async def lose(self, partition: int) -> int:
        """Stop holding the channels of ``partition`` (their commits settle first); returns how many."""
        moving = [ch for ch in self._table.live() if self._placement.partition(ch.channel_id) == partition]
        for ch in moving:
            async with ch.lock:
                if ch.last_commit is not None and not ch.last_commit.done():
                    await asyncio.wait([ch.last_commit])
                ch.cancel_timers()
                if self._table.channels.get(ch.channel_id) is ch:
                    self._table.drop(ch.channel_id)
                    self._settled(ch)  # no longer held: what it hid and armed here is the new holder's
                    if not ch.is_terminal:
                        self._followers.follow(ch.channel_id, ch.participants, ch.committed_seq)
        return len(moving)
