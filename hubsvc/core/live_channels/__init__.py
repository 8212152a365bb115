"""The live channels: lookup, lifecycle and timers, waits, commits and WAL reads, one module per job.

A channel is live from OpenChannel until its closed or expired envelope commits.
:class:`LiveChannels` builds the parts and exposes them, with the calls the rest of the hub
makes bound straight to the part that serves them (no forwarding frame: ``channels.locked``
and ``channels.commit`` are on every post's path):

* :mod:`.table` (``table``: ``get``, ``live``, ``meta``, ``final_state``, ``require_member``,
  ``watch``, ``watched``, ``read_wal``, ``iter_wal``) holds the table of live channels and reads it;
* :mod:`.lifecycle` (``lifecycle``: ``open``, ``wait``, ``close``, ``close_all_of``) opens, closes
  and expires channels (the envelopes themselves, a channel's seed among them, are admitted and
  staged by :class:`~hubsvc.core.admission.Admission` under the channel's lock) and waits for a state;
* :mod:`.timers` (``timers``) arms the invite-timeout and TTL timers;
* :mod:`.commits` (``commits``: ``commit``) submits every staged :class:`~hubsvc.core.admission.Batch`
  and, once it commits, hands its envelopes to the connected members and to watchers (the store
  fires commit callbacks in submission order, so delivery order is WAL order);
* :mod:`.rebuild` (``rebuilder``: ``hydrate``, ``locked``) rebuilds channels from the WAL at start
  (hydrate) or after a failed commit (recover), and holds a channel's lock while waiting such a
  rebuild out;
* :mod:`.catch_up` (``replica_commits``: ``refresh_if_behind``, ``catch_up``, ``catch_up_all``) folds and
  publishes what other replicas sharing the store committed;
* :mod:`.followers` (``followers``) delivers, without folding, the channels another replica holds
  when the channels are divided among replicas (:mod:`hubsvc.core.placement`), and
  :mod:`.handover` (``handover``: ``gain``, ``lose``) moves a partition's channels between the
  two tables when this replica gains or loses the partition.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterable
from typing import Any

from agentnet.v1 import connect_pb2

from hubsvc.core.admission import Admission
from hubsvc.core.channel import ChannelRuntime
from hubsvc.core.live_channels.catch_up import CatchUp
from hubsvc.core.live_channels.commits import Commits, Deliver, Settled
from hubsvc.core.live_channels.followers import FollowedChannel, Followers
from hubsvc.core.live_channels.handover import Handover
from hubsvc.core.live_channels.lifecycle import GovernOpen, Lifecycle
from hubsvc.core.live_channels.rebuild import Rebuilder
from hubsvc.core.live_channels.table import FOLD_RUN, ChannelTable, Watcher
from hubsvc.core.live_channels.timers import ChannelTimers
from hubsvc.core.options import HubOptions
from hubsvc.core.placement import Placement
from hubsvc.core.registry import Registry
from hubsvc.core.sessions import pending_turn
from hubsvc.core.tasks import TaskMirror
from hubsvc.core.util import Clock
from hubsvc.governance.inbox import Inboxes
from hubsvc.governance.policy import Policy
from hubsvc.storage import HubStore

__all__ = ["FOLD_RUN", "Deliver", "GovernOpen", "LiveChannels", "Settled", "Watcher"]


class LiveChannels:
    """Every live channel of the hub and what happens to it over its life: the parts, and their calls."""

    def __init__(
        self,
        store: HubStore,
        registry: Registry,
        tasks: TaskMirror,
        admission: Admission,
        inboxes: Inboxes,
        options: HubOptions,
        clock: Clock,
        *,
        deliver: Deliver,
        deliver_followed: Deliver | None = None,
        spawn: Callable[[Any, str], asyncio.Task[Any]],
        govern: GovernOpen | None = None,
        policy: Callable[[], Policy] = Policy,
        placement: Placement | None = None,
        connected: Callable[[str], bool] = lambda agent_id: False,
    ) -> None:
        self.settled: Settled = lambda ch: None
        """Called after each commit and rebuild of a channel (the expectation timers re-arm from it)."""
        settled: Settled = lambda ch: self.settled(ch)  # noqa: E731 - late-bound: the hub sets it after
        self.placement = placement = placement or Placement(None, None, None)
        """Which channels this replica holds (all of them unless the channels are divided among replicas)."""
        self.table = table = ChannelTable(store, inboxes, clock)
        """The table of live channels, and its reads."""
        self.followers = followers = Followers(
            table, store, deliver_followed or deliver, connected, spawn, placement.holds
        )
        """The live channels another replica holds, delivered here without a fold."""
        if placement.divided:
            table.on_watch = followers.watching
        self.timers = timers = ChannelTimers(
            clock, spawn, lambda channel_id, reason, expired: self.lifecycle.expire(channel_id, reason, expired)
        )
        """The invite-timeout and TTL timers."""
        self.commits = commits = Commits(
            table,
            store,
            tasks,
            admission,
            timers,
            deliver=deliver,
            spawn=spawn,
            recover=lambda ch: self.rebuilder.recover(ch),
            settled=settled,
            fence=placement.fence if placement.divided else None,
        )
        """Submits staged batches, and publishes them once committed."""
        self.rebuilder = rebuilder = Rebuilder(
            table,
            store,
            inboxes,
            clock,
            timers,
            publish=commits.publish,
            spawn=spawn,
            settled=settled,
            placement=placement,
            followers=followers,
        )
        """Rebuilds channels from the WAL (hydrate, recover) and holds their locks."""
        self.replica_commits = replica_commits = CatchUp(
            table, store, rebuilder, timers, commits.publish, placement, followers
        )
        """Folds and publishes what other replicas committed."""
        self.lifecycle = lifecycle = Lifecycle(
            table,
            registry,
            admission,
            options,
            clock,
            commits,
            timers,
            rebuilder.locked,
            govern=govern,
            policy=policy,
            placement=placement,
        )
        """Opens, waits on, closes and expires channels."""
        self.handover = Handover(table, store, rebuilder, followers, placement, settled)
        """Moves a partition's channels in (``gain``) and out (``lose``) of this replica's hold."""
        # The calls the hub makes, bound to their part (see the module doc for which serves which).
        self.get = table.get
        self.live = table.live
        self.meta = table.meta
        self.forget = table.forget
        self.final_state = table.final_state
        self.require_member = table.require_member
        self.watch = table.watch
        self.watched = table.watched
        self.read_wal = table.read_wal
        self.iter_wal = table.iter_wal
        self.open = lifecycle.open
        self.wait = lifecycle.wait
        self.close = lifecycle.close
        self.close_all_of = lifecycle.close_all_of
        self.commit = commits.commit
        self.hydrate = rebuilder.hydrate
        self.locked = rebuilder.locked
        self.refresh_if_behind = replica_commits.refresh_if_behind
        self.known_seq = replica_commits.known_seq
        self.refresh_turns_of = replica_commits.refresh_turns_of
        self.catch_up_all = replica_commits.catch_up_all
        self.catch_up = replica_commits.catch_up

    def member_channels(self) -> Iterable[ChannelRuntime | FollowedChannel]:
        """Every live channel whose members may be connected here: held and followed (a view)."""
        return itertools.chain(self.table.live(), self.followers.live())

    def followed_of(self, agent_id: str) -> list[str]:
        """The ids of the live channels another replica holds that ``agent_id`` is a member of."""
        return [f.channel_id for f in self.followers.live() if agent_id in f.participants]

    def held_turns(self, agent_id: str, channel_ids: Iterable[str]) -> list[connect_pb2.PendingTurn]:
        """The turns the channels among ``channel_ids`` this replica holds await from ``agent_id``
        (what another replica asks for with ReplicaService.PendingTurns), by channel id."""
        turns = []
        for channel_id in channel_ids:
            ch = self.table.channels.get(channel_id)
            if ch is not None and agent_id in ch.participants and (turn := pending_turn(ch, agent_id)) is not None:
                turns.append(turn)
        return sorted(turns, key=lambda t: t.channel_id)

    def cancel_timers(self) -> None:
        """Disarm every live channel's timers (the hub is stopping)."""
        self.timers.cancel(self.table.live())
