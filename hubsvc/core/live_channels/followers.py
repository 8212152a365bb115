"""Channels another replica holds: what this replica delivers of them, without folding them.

With the channels divided among replicas (docs/scale-out.md "Channels divided among the
replicas") a replica holds — admits into, folds, times — only the channels of its partitions. A
member of another channel may still be connected here: the change feed names each commit's
channel and last seq, and :class:`Followers` reads what its members here have not been given
from the WAL and hands it to their sessions and to watchers, as a commit of a held channel is
published. Nothing is folded: a followed channel is its id, its members and the last seq handed
on (:class:`FollowedChannel`), read from the channel's stored row. Deliveries of a followed
channel carry no ``can_send`` (a client asks CanSend, which the holding replica answers).

A channel moves between the two tables when its partition does: :meth:`Followers.release` gives
the seq handed on to the replica's new hold of it, :meth:`Followers.follow` takes a channel the
replica stopped holding from the seq it had published.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

from agentnet.v1 import channel_pb2, envelope_pb2

from hubsvc.core.live_channels.commits import Deliver
from hubsvc.core.live_channels.table import ChannelTable
from hubsvc.storage import ChannelRow, HubStore, Writes
from netkernel.envelope import EV_CHANNEL_CLOSED

log = logging.getLogger("agentnet.hub.replicas")

_PAGE = 1000
"""WAL records one store read returns at most."""


class FollowedChannel:
    """A live channel another replica holds, as this replica delivers it."""

    __slots__ = ("channel_id", "committed_seq", "lock", "participants")

    def __init__(self, channel_id: str, participants: tuple[str, ...], committed_seq: int) -> None:
        self.channel_id = channel_id
        self.participants = participants
        """Member agent ids (fixed when the channel was opened)."""
        self.committed_seq = committed_seq
        """The last seq handed to the members here and to watchers."""
        self.lock = asyncio.Lock()
        """Serialises the catch-ups of the channel (deliveries stay in seq order)."""

    def pending_turn(self, agent_id: str) -> tuple[int, str] | None:
        """Unknown here (the holding replica folds the channel): None."""
        return None

    @classmethod
    def from_row(cls, row: ChannelRow, *, from_start: bool = False) -> FollowedChannel:
        """A followed channel from its stored row, handed on up to its stored last seq (``from_start``:
        nothing handed on yet)."""
        meta = channel_pb2.ChannelMetadata.FromString(row.record)
        return cls(row.channel_id, tuple(p.agent_id for p in meta.participants), 0 if from_start else meta.last_seq)


class Followers:
    """The live channels this replica follows (held elsewhere), and their catch-up from the WAL."""

    def __init__(
        self,
        table: ChannelTable,
        store: HubStore,
        deliver: Deliver,
        connected: Callable[[str], bool],
        spawn: Callable[[Any, str], asyncio.Task[Any]],
        holds: Callable[[str], bool],
    ) -> None:
        self._table = table
        self._store = store
        self._deliver = deliver
        self._connected = connected
        self._spawn = spawn
        self._holds = holds
        """Whether this replica holds a channel (a watch of one held here is not recorded)."""
        self._watch_recorded: set[str] = set()
        """Channels recorded in the store as watched here (their last watcher unrecords them)."""
        self.channels: dict[str, FollowedChannel] = {}

    def watching(self, channel_id: str, watching: bool) -> None:
        """A channel got its first watcher here (or lost its last). One another replica holds is
        recorded as watched here, so its holder tells this replica of its appends although no member
        is connected here (one held here needs nothing: its commits are published here; if it moves
        away while watched, :meth:`follow` records it then)."""
        if watching and not self._holds(channel_id):
            self._record_watch(channel_id, True)
        elif not watching and channel_id in self._watch_recorded:
            self._record_watch(channel_id, False)

    def _record_watch(self, channel_id: str, watching: bool) -> None:
        """Write that this replica watches ``channel_id`` (or no longer does); once a watch is written,
        catch the followed channel up (what was appended before it is read from the WAL)."""
        if watching:
            self._watch_recorded.add(channel_id)
        else:
            self._watch_recorded.discard(channel_id)
        written = self._store.submit(Writes(watches=[(channel_id, watching)]))

        def recorded(done: asyncio.Future[None]) -> None:
            if done.cancelled() or done.exception() is not None:
                log.warning("could not record that channel %s is watched here; its watchers may wait", channel_id)
            elif watching and channel_id in self.channels:
                self._spawn(self.catch_up(channel_id, 0), f"watch-{channel_id}")

        written.add_done_callback(recorded)

    def live(self) -> Iterable[FollowedChannel]:
        """Every followed channel (a view: copy it before awaiting)."""
        return self.channels.values()

    def follow(self, channel_id: str, participants: tuple[str, ...], published: int) -> None:
        """Follow a channel this replica stopped holding, handed on up to ``published`` (recording that it
        is watched here, if it is, so its new holder tells this replica of its appends)."""
        self.channels[channel_id] = FollowedChannel(channel_id, participants, published)
        if self._table.watched(channel_id) and channel_id not in self._watch_recorded:
            self._record_watch(channel_id, True)

    def release(self, channel_id: str) -> int | None:
        """Stop following a channel (this replica holds it now); the seq handed on, None if not followed."""
        followed = self.channels.pop(channel_id, None)
        return followed.committed_seq if followed is not None else None

    def load(self, rows: Iterable[ChannelRow]) -> None:
        """Follow these stored live channels from their stored last seq (at start)."""
        for row in rows:
            self.channels[row.channel_id] = FollowedChannel.from_row(row)

    async def catch_up(self, channel_id: str, seq: int, *, beginning: str = "") -> None:
        """Another replica committed the followed channel up to ``seq`` (0: its row changed): hand its
        members here and the watchers what they lack, reading the WAL; an ended channel is let go.
        ``beginning`` is a member whose stream is beginning: it is not handed anything (its replay
        reads the WAL up to the mark moved here)."""
        followed = self.channels.get(channel_id)
        if followed is None:
            row = await self._store.get_channel(channel_id)
            if row is None or channel_id in self.channels or self._table.get(channel_id) is not None:
                return
            followed = self.channels[channel_id] = FollowedChannel.from_row(row, from_start=True)
        async with followed.lock:
            if self.channels.get(channel_id) is not followed:  # taken over (held here now) or let go meanwhile
                return
            if seq and followed.committed_seq >= seq:
                return
            handed = [p for p in followed.participants if p != beginning and self._connected(p)]
            if not (handed or self._table.watched(channel_id)):
                # Nobody here to hand it to: only the mark moves, with no await between the check and
                # the move (a member connecting later replays up to the mark from the WAL).
                followed.committed_seq = max(followed.committed_seq, seq)
                return
            ended = False
            while True:
                rows = await self._store.read_wal(channel_id, followed.committed_seq + 1, 0, _PAGE)
                wires = [envelope_pb2.Envelope.FromString(data) for data in rows]
                if wires:
                    followed.committed_seq = wires[-1].seq
                    ended = ended or any(w.event_type == EV_CHANNEL_CLOSED for w in wires)
                    self._deliver(followed, wires)
                    self._table.notify(channel_id, wires)
                if len(rows) < _PAGE:
                    break
            if ended:
                self._let_go(followed)

    def prune(self, live: set[str]) -> None:
        """Let go of the followed channels not in ``live`` (the store's live channel ids): ended
        channels none of whose members was connected here when they ended."""
        for followed in [f for f in self.channels.values() if f.channel_id not in live]:
            self._let_go(followed)

    def _let_go(self, followed: FollowedChannel) -> None:
        """An ended channel leaves the table; its last seq is remembered like a held one's."""
        if self.channels.get(followed.channel_id) is followed:
            del self.channels[followed.channel_id]
            self._table.ended[followed.channel_id] = followed.committed_seq
