"""The live channels: lookup, lifecycle and timers, waits, commits and WAL reads, one module per job.

A channel is live from OpenChannel until its closed or expired envelope commits.
:class:`LiveChannels` is what the rest of the hub uses; behind it

* :mod:`.table` holds the table of live channels and reads it (metadata, final states, watchers,
  WAL reads);
* :mod:`.lifecycle` opens, closes and expires channels (the envelopes themselves are staged by
  :class:`~hubsvc.core.admission.Admission` under the channel's lock) and waits for a state;
* :mod:`.timers` arms the invite-timeout and TTL timers;
* :mod:`.commits` submits every staged :class:`~hubsvc.core.admission.Batch` and, once it commits,
  hands its envelopes to the connected members and to watchers (the store fires commit callbacks
  in submission order, so delivery order is WAL order);
* :mod:`.rebuild` rebuilds channels from the WAL at start (hydrate) or after a failed commit
  (recover), and holds a channel's lock while waiting such a rebuild out;
* :mod:`.catch_up` folds and publishes what other replicas sharing the store committed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AbstractAsyncContextManager
from typing import Any

from agentnet.v1 import channel_pb2, envelope_pb2

from hubsvc.core.admission import Admission, Batch
from hubsvc.core.channel import ChannelRuntime
from hubsvc.core.intake import Intake
from hubsvc.core.live_channels.catch_up import CatchUp
from hubsvc.core.live_channels.commits import Commits, Deliver, Settled
from hubsvc.core.live_channels.lifecycle import GovernOpen, Lifecycle
from hubsvc.core.live_channels.rebuild import Rebuilder
from hubsvc.core.live_channels.table import FOLD_RUN, ChannelTable, Watcher
from hubsvc.core.live_channels.timers import ChannelTimers
from hubsvc.core.options import HubOptions
from hubsvc.core.registry import Registry
from hubsvc.core.tasks import TaskMirror
from hubsvc.core.util import Clock
from hubsvc.governance.arbiter import Action
from hubsvc.governance.policy import Policy
from hubsvc.storage import HubStore
from netkernel.envelope import Envelope

__all__ = ["FOLD_RUN", "Deliver", "GovernOpen", "LiveChannels", "Settled", "Watcher"]


class LiveChannels:
    """Every live channel of the hub and what happens to it over its life."""

    def __init__(
        self,
        store: HubStore,
        registry: Registry,
        tasks: TaskMirror,
        admission: Admission,
        intake: Intake,
        options: HubOptions,
        clock: Clock,
        *,
        deliver: Deliver,
        spawn: Callable[[Any, str], asyncio.Task[Any]],
        govern: GovernOpen | None = None,
        policy: Callable[[], Policy] = Policy,
    ) -> None:
        self.settled: Settled = lambda ch: None
        """Called after each commit and rebuild of a channel (the expectation timers re-arm from it)."""
        settled: Settled = lambda ch: self.settled(ch)  # noqa: E731 - late-bound: the hub sets it after
        self._table = table = ChannelTable(store, intake.inboxes, clock)
        timers = self._timers = ChannelTimers(
            clock, spawn, lambda channel_id, reason, expired: self._lifecycle.expire(channel_id, reason, expired)
        )
        self._commits = commits = Commits(
            table,
            store,
            tasks,
            intake,
            timers,
            deliver=deliver,
            spawn=spawn,
            recover=lambda ch: self._rebuilder.recover(ch),
            settled=settled,
        )
        self._rebuilder = rebuilder = Rebuilder(
            table, store, intake.inboxes, clock, timers, publish=commits.publish, spawn=spawn, settled=settled
        )
        self._catch_up = CatchUp(table, store, rebuilder, timers, commits.publish)
        self._lifecycle = Lifecycle(
            table,
            registry,
            admission,
            intake,
            options,
            clock,
            commits,
            timers,
            rebuilder.locked,
            govern=govern,
            policy=policy,
        )

    # -- lookup (table.py) --------------------------------------------------------------

    def get(self, channel_id: str) -> ChannelRuntime | None:
        """A live channel, if any."""
        return self._table.get(channel_id)

    def live(self) -> Iterable[ChannelRuntime]:
        """Every live channel (a view: copy it before awaiting)."""
        return self._table.live()

    async def meta(self, channel_id: str) -> channel_pb2.ChannelMetadata:
        """Metadata of a live or ended channel (NotFound otherwise)."""
        return await self._table.meta(channel_id)

    async def final_state(self, channel_id: str) -> dict[str, Any] | None:
        """A channel's adapter state as JSON data as its WAL leaves it (None: no such channel)."""
        return await self._table.final_state(channel_id)

    async def require_member(self, agent_id: str, channel_id: str) -> channel_pb2.ChannelMetadata:
        """Metadata of a channel ``agent_id`` participates in (NotParticipant otherwise)."""
        return await self._table.require_member(agent_id, channel_id)

    def watch(self, channel_id: str, watcher: Watcher) -> Callable[[], None]:
        """Call ``watcher`` with every envelope of the channel once committed; returns an unsubscribe."""
        return self._table.watch(channel_id, watcher)

    def watched(self, channel_id: str) -> bool:
        """Whether anything watches the channel (tests check that a dropped follower let go)."""
        return self._table.watched(channel_id)

    async def read_wal(
        self, caller: str | None, channel_id: str, from_seq: int = 0, until_seq: int = 0, limit: int = 0
    ) -> list[envelope_pb2.Envelope]:
        """The caller-visible part of a committed seq range of the channel's WAL (all of it for the
        operator: ``caller`` None)."""
        return await self._table.read_wal(caller, channel_id, from_seq, until_seq, limit)

    def iter_wal(
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
        return self._table.iter_wal(caller, channel_id, from_seq, until_seq, limit, page=page)

    # -- lifecycle (lifecycle.py, timers.py) --------------------------------------------

    async def open(
        self,
        initiator: str,
        *,
        type: str,
        targets: list[str],
        knobs_json: str = "",
        intent: str = "",
        ttl_seconds: float | None = None,
        invite_ack_timeout: float | None = None,
        seed: Envelope | None = None,
        dispatch: dict[str, Any] | None = None,
        action: Action = "open_channel",
        on_checked: Callable[[], object] | None = None,
    ) -> ChannelRuntime:
        """Create a PENDING channel and invite the targets (returns once the invites are committed);
        see :meth:`Lifecycle.open <hubsvc.core.live_channels.lifecycle.Lifecycle.open>`."""
        return await self._lifecycle.open(
            initiator,
            type=type,
            targets=targets,
            knobs_json=knobs_json,
            intent=intent,
            ttl_seconds=ttl_seconds,
            invite_ack_timeout=invite_ack_timeout,
            seed=seed,
            dispatch=dispatch,
            action=action,
            on_checked=on_checked,
        )

    async def wait(
        self, channel_id: str, until: Callable[[channel_pb2.ChannelMetadata], bool], timeout: float
    ) -> channel_pb2.ChannelMetadata:
        """Wait until ``until(metadata)`` holds after a committed envelope (or the timeout passes)."""
        return await self._lifecycle.wait(channel_id, until, timeout)

    async def close(self, caller: str, channel_id: str, reason: str = "") -> channel_pb2.ChannelMetadata:
        """Close a channel the caller participates in."""
        return await self._lifecycle.close(caller, channel_id, reason)

    async def close_all_of(self, agent_id: str) -> list[str]:
        """Close every live channel of ``agent_id`` with reason "participant_left"; returns their ids."""
        return await self._lifecycle.close_all_of(agent_id)

    def cancel_timers(self) -> None:
        """Disarm every live channel's timers (the hub is stopping)."""
        self._timers.cancel(self._table.live())

    # -- commit (commits.py) ------------------------------------------------------------

    def commit(self, ch: ChannelRuntime, batch: Batch) -> asyncio.Future[None]:
        """Submit a batch staged under ``ch.lock`` (still held); returns the commit future
        (:meth:`Commits.commit <hubsvc.core.live_channels.commits.Commits.commit>`)."""
        return self._commits.commit(ch, batch)

    # -- rebuilding from the WAL (rebuild.py) -------------------------------------------

    async def hydrate(self) -> int:
        """Rebuild every live channel by folding its WAL and re-arm its timers; returns the envelopes folded."""
        return await self._rebuilder.hydrate()

    def locked(self, channel_id: str) -> AbstractAsyncContextManager[ChannelRuntime | None]:
        """Hold the lock of the live channel ``channel_id`` (None if it is not live), waiting out a rebuild."""
        return self._rebuilder.locked(channel_id)

    # -- other replicas' commits (catch_up.py) ------------------------------------------

    def known_seq(self, channel_id: str) -> int:
        """The last seq of the channel this replica has folded (0: it holds none of it)."""
        return self._catch_up.known_seq(channel_id)

    async def refresh_if_behind(self, channel_id: str) -> bool:
        """Whether the store held more of the channel than this replica had published (then caught up)."""
        return await self._catch_up.refresh_if_behind(channel_id)

    async def refresh_turns_of(self, agent_id: str) -> None:
        """Catch up the channels awaiting a turn of ``agent_id`` that the store holds more of."""
        await self._catch_up.refresh_turns_of(agent_id)

    async def catch_up_all(self) -> None:
        """Catch up every channel live here or live in the store."""
        await self._catch_up.catch_up_all()

    async def catch_up(self, channel_id: str, seq: int) -> None:
        """Another replica committed the channel up to ``seq`` (0: its row changed): fold and publish
        what this replica lacks."""
        await self._catch_up.catch_up(channel_id, seq)
