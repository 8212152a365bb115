"""Other replicas' commits: folding and publishing what a replica sharing the store committed."""

from __future__ import annotations

import asyncio

from agentnet.v1 import envelope_pb2

from hubsvc.core.channel import PENDING, ChannelRuntime
from hubsvc.core.live_channels.followers import FollowedChannel, Followers
from hubsvc.core.live_channels.rebuild import Publish, Rebuilder
from hubsvc.core.live_channels.table import ChannelTable
from hubsvc.core.live_channels.timers import ChannelTimers
from hubsvc.core.placement import Placement
from hubsvc.storage import HubStore

_CATCH_UP_PAGE = 1000
"""WAL records one store read of a catch-up returns at most."""


class CatchUp:
    """Brings this replica's channels up to what the store holds (told by the change feed, or asked)."""

    def __init__(
        self,
        table: ChannelTable,
        store: HubStore,
        rebuilder: Rebuilder,
        timers: ChannelTimers,
        publish: Publish,
        placement: Placement,
        followers: Followers,
    ) -> None:
        self._placement = placement
        self._followers = followers
        self._table = table
        self._store = store
        self._rebuilder = rebuilder
        self._timers = timers
        self._publish = publish

    def known_seq(self, channel_id: str) -> int:
        """The last seq of the channel this replica has folded (0: it holds none of it)."""
        ch = self._table.channels.get(channel_id)
        return ch.committed_seq if ch is not None else self._table.ended.get(channel_id, 0)

    async def refresh_if_behind(self, channel_id: str) -> bool:
        """Whether the store holds more of the channel than this replica has published (another
        replica committed to it and the change feed has not told this one yet); if so, the
        channel is caught up first. Always False on a store no other replica shares."""
        if self._store.feed is None or not self._placement.holds(channel_id):
            return False
        stored = await self._store.channel_seq(channel_id)
        if stored <= self.known_seq(channel_id):
            return False
        await self.catch_up(channel_id, stored)
        return True

    async def refresh_turns_of(self, agent_id: str) -> None:
        """Catch up the channels live here that await a turn of ``agent_id``, where the store holds
        more of them (another replica committed, perhaps the answer, and the change feed has not
        told this one yet): so a turn answered elsewhere is not listed as pending (a client would
        answer it again). With the channels divided, also every channel of the agent another replica
        holds: while none of its members was connected here, this replica was not told of its
        appends (docs/scale-out.md, "Channel notices"). Nothing to do on a store no other replica
        shares."""
        if self._store.feed is None:
            return
        awaiting: list[ChannelRuntime | FollowedChannel] = [
            ch for ch in self._table.live() if agent_id in ch.participants and ch.pending_turn(agent_id) is not None
        ]
        if self._placement.divided:
            awaiting += [f for f in self._followers.live() if agent_id in f.participants]
        for start in range(0, len(awaiting), _CATCH_UP_PAGE):
            chunk = awaiting[start : start + _CATCH_UP_PAGE]
            stored = await self._store.channel_seqs([ch.channel_id for ch in chunk])
            behind = [(ch, seq) for ch, seq in zip(chunk, stored, strict=True) if seq > ch.committed_seq]
            await asyncio.gather(*(self._catch_up_for(agent_id, ch, seq) for ch, seq in behind))

    async def _catch_up_for(self, agent_id: str, ch: ChannelRuntime | FollowedChannel, seq: int) -> None:
        """Catch a channel up as ``agent_id``'s stream begins. A followed channel is not handed to that
        stream: its replay reads the WAL up to the mark this moves, with back-pressure (handing a long
        backlog to the stream at once would pass its byte budget and end it)."""
        if isinstance(ch, FollowedChannel):
            await self._followers.catch_up(ch.channel_id, seq, beginning=agent_id)
        else:
            await self.catch_up(ch.channel_id, seq)

    async def catch_up_all(self) -> None:
        """Catch up every channel live here or live in the store."""
        ids = {row.channel_id for row in await self._store.load_live_channels()} | set(self._table.channels)
        await asyncio.gather(*(self.catch_up(channel_id, 0) for channel_id in ids))

    async def catch_up(self, channel_id: str, seq: int) -> None:
        """Another replica committed the channel up to ``seq`` (0: its row changed): fold what
        this replica lacks, in seq order, and publish it to the members connected here.

        A channel not live here is read from the store (another replica opened it; an ended
        one is still published once, so members here see its invites and its end). A channel
        another replica holds is delivered without a fold (:mod:`.followers`).
        """
        if not self._placement.holds(channel_id):
            await self._followers.catch_up(channel_id, seq)
            return
        rebuilder = self._rebuilder
        async with rebuilder.locked(channel_id) as ch:
            if ch is None:
                known = self._table.ended.get(channel_id)
                if known is not None and known >= seq:
                    return
                row = await self._store.get_channel(channel_id)
                if row is None or channel_id in self._table.channels:  # never written, or opened meanwhile
                    return
                fresh, unseen = await rebuilder.rebuild(row, known or 0)
                rebuilder.adopt(fresh, unseen)
                return
            if ch.last_seq > ch.committed_seq and ch.last_commit is not None:
                # This replica's own write is in flight: once it settles, either it is committed
                # (and the other replica's envelopes follow it) or it lost the race, and the
                # rebuild after it publishes what this replica lacked.
                await asyncio.wait([ch.last_commit])
                if ch.stale:
                    return
            if seq and ch.committed_seq >= seq:
                return
            was_pending = ch.meta.state == PENDING
            wires: list[envelope_pb2.Envelope] = []
            while True:
                rows = await self._store.read_wal(channel_id, ch.last_seq + 1, 0, _CATCH_UP_PAGE)
                wires += rebuilder.fold(ch, rows)
                if len(rows) < _CATCH_UP_PAGE:
                    break
            if not wires:
                return
            ch.meta.last_seq = ch.last_seq
            if was_pending and ch.meta.state != PENDING:
                self._timers.arm_ttl(ch)
            self._publish(ch, wires, ch.is_terminal)
