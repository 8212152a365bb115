"""The table of live channels and what reads it: lookups, metadata, final states, watchers, WAL reads."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from agentnet.v1 import channel_pb2, envelope_pb2

from hubsvc.adapters.base import Adapter
from hubsvc.adapters.common import require_participant
from hubsvc.core.channel import ChannelRuntime
from hubsvc.core.retention import purged_refusal
from hubsvc.core.stored_run import StoredRun
from hubsvc.core.util import BoundedDict, Clock
from hubsvc.governance.inbox import Inboxes
from hubsvc.storage import HubStore
from netkernel.wire import wire_readable_by

log = logging.getLogger("agentnet.hub")

_ENDED_MEMORY = 10_000
"""Ended channels whose last seq is remembered (see :meth:`LiveChannels.catch_up`)."""
_FINAL_STATES = 256
"""Ended channels whose final adapter state is kept in memory (others are folded again from the WAL)."""
FOLD_RUN = 128
"""Envelopes hydrate folds at once. A run's wire messages and envelopes die before the cyclic GC's
first generation fills (700 allocations), so it never promotes them and rescans them; folding a
1000-envelope page at once spent a third of hydrate in the GC."""

Watcher = Callable[[envelope_pb2.Envelope], None]
"""Called with each committed envelope of a watched channel."""


class ChannelTable:
    """Every live channel of the hub by id, the recently ended ones, and the watchers of each."""

    def __init__(self, store: HubStore, inboxes: Inboxes, clock: Clock) -> None:
        self._store = store
        self._inboxes = inboxes
        self._clock = clock
        self.channels: dict[str, ChannelRuntime] = {}
        """The live channels by id (a channel is live from OpenChannel until its end commits)."""
        self._watchers: dict[str, set[Watcher]] = {}
        self.on_watch: Callable[[str, bool], None] = lambda channel_id, watching: None
        """Told when a channel gets its first watcher (True) or loses its last (False)."""
        self.ended: BoundedDict[str, int] = BoundedDict(_ENDED_MEMORY)
        """Channels that ended here → their last seq (a late change of one is not published again)."""
        self.final: BoundedDict[str, tuple[Adapter[Any], Any]] = BoundedDict(_FINAL_STATES)
        """Recently ended channels → (adapter, final adapter state): DescribeChannel of an ended channel."""

    def drop(self, channel_id: str) -> None:
        """The channel leaves the table (ended, or never written); its inbox counts go with it."""
        self.channels.pop(channel_id, None)
        self._inboxes.release(channel_id)

    def forget(self, channel_id: str) -> None:
        """Retention purged the ended channel: drop its remembered final state."""
        self.final.pop(channel_id, None)

    def get(self, channel_id: str) -> ChannelRuntime | None:
        """A live channel, if any."""
        return self.channels.get(channel_id)

    def live(self) -> Iterable[ChannelRuntime]:
        """Every live channel (a view: copy it before awaiting)."""
        return self.channels.values()

    async def meta(self, channel_id: str) -> channel_pb2.ChannelMetadata:
        """Metadata of a live or ended channel (NotFound otherwise)."""
        ch = self.channels.get(channel_id)
        if ch is not None:
            return ch.meta
        row = await self._store.get_channel(channel_id)
        if row is None:
            raise await purged_refusal(self._store, channel_id)  # saying so when retention purged it
        return channel_pb2.ChannelMetadata.FromString(row.record)

    async def final_state(self, channel_id: str) -> dict[str, Any] | None:
        """A channel's adapter state as JSON data as its WAL leaves it — an ended channel's final state,
        kept for analysis — or None when the store has no such channel.

        The state of a channel that ended here is remembered; any other (ended before a restart, or
        on another replica) is folded again from its stored WAL, as hydrate would."""
        known = self.final.get(channel_id)
        if known is None:
            row = await self._store.get_channel(channel_id)
            if row is None:
                return None
            ch = ChannelRuntime.from_row(row)
            now = self._clock()
            async for _, records in self._store.scan_wal([channel_id]):
                for low in range(0, len(records), FOLD_RUN):
                    ch.fold_stored(StoredRun(records[low : low + FOLD_RUN]), now)
            known = (ch.adapter, ch.state)
            if ch.is_terminal:  # an ended channel's WAL never changes again
                self.final[channel_id] = known
        adapter, state = known
        return adapter.state_json(state)

    async def require_member(self, agent_id: str, channel_id: str) -> channel_pb2.ChannelMetadata:
        """Metadata of a channel ``agent_id`` participates in (NotParticipant otherwise)."""
        meta = await self.meta(channel_id)
        require_participant(agent_id, [p.agent_id for p in meta.participants], channel_id)
        return meta

    def watch(self, channel_id: str, watcher: Watcher) -> Callable[[], None]:
        """Call ``watcher`` with every envelope of the channel once committed; returns an unsubscribe."""
        watchers = self._watchers.get(channel_id)
        if watchers is None:
            watchers = self._watchers[channel_id] = set()
            self.on_watch(channel_id, True)
        watchers.add(watcher)

        def unsubscribe() -> None:
            watchers = self._watchers.get(channel_id)
            if watchers is not None:
                watchers.discard(watcher)
                if not watchers:
                    self._watchers.pop(channel_id, None)
                    self.on_watch(channel_id, False)

        return unsubscribe

    def watched(self, channel_id: str) -> bool:
        """Whether anything watches the channel (tests check that a dropped follower let go)."""
        return bool(self._watchers.get(channel_id))

    def notify(self, channel_id: str, wires: list[envelope_pb2.Envelope]) -> None:
        """Hand committed ``wires`` of the channel to its watchers (a failing watcher is logged)."""
        watchers = self._watchers.get(channel_id)
        if not watchers:
            return
        watching = list(watchers)
        for wire in wires:
            for watcher in watching:
                try:
                    watcher(wire)
                except Exception:
                    log.exception("channel watcher failed")

    async def read_wal(
        self, caller: str | None, channel_id: str, from_seq: int = 0, until_seq: int = 0, limit: int = 0
    ) -> list[envelope_pb2.Envelope]:
        """The caller-visible part of a committed seq range of the channel's WAL (all of it for the
        operator: ``caller`` None)."""
        return [wire async for wire in self.iter_wal(caller, channel_id, from_seq, until_seq, limit)]

    async def iter_wal(
        self,
        caller: str | None,
        channel_id: str,
        from_seq: int = 0,
        until_seq: int = 0,
        limit: int = 0,
        *,
        page: int = 1000,
    ) -> AsyncIterator[envelope_pb2.Envelope]:
        """Like :meth:`read_wal`, one store page of ``page`` records at a time (a stream holds one page)."""
        if caller is None:
            await self.meta(channel_id)  # NotFound for an unknown channel
        else:
            await self.require_member(caller, channel_id)
        ch = self.channels.get(channel_id)
        ceiling = ch.committed_seq if ch is not None else 0
        if ch is not None:
            until_seq = min(until_seq, ceiling) if until_seq else ceiling
            if until_seq == 0:
                return
        sent = 0
        next_seq = max(from_seq, 1)
        while True:
            rows = await self._store.read_wal(channel_id, next_seq, until_seq, page)
            for data in rows:
                wire = envelope_pb2.Envelope.FromString(data)
                next_seq = wire.seq + 1
                if caller is None or wire_readable_by(wire, caller):
                    yield wire
                    sent += 1
                    if limit and sent >= limit:
                        return
            if len(rows) < page:
                return
