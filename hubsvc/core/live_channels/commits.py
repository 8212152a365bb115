"""Committing a channel's staged batches, and handing what committed to its members and watchers."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from agentnet.v1 import envelope_pb2

from hubsvc.core.admission import Admission, Batch
from hubsvc.core.channel import ChannelRuntime, Members
from hubsvc.core.live_channels.table import ChannelTable
from hubsvc.core.live_channels.timers import ChannelTimers
from hubsvc.core.tasks import TaskMirror
from hubsvc.core.util import committed_already
from hubsvc.storage import HubStore

Deliver = Callable[[Members, list[envelope_pb2.Envelope]], None]
"""Hands a channel's committed envelopes to its connected members."""
Fence = Callable[[str], dict[int, int]]
"""The fence a write of a channel commits with (:meth:`Placement.fence <hubsvc.core.placement.Placement.fence>`)."""
Settled = Callable[[ChannelRuntime], None]
"""Told that a channel's committed state changed: a batch committed (the channel may have
ended), or the channel was rebuilt from the WAL (hydrate, recover)."""


class Commits:
    """Submits staged batches to the store and publishes them once committed (in WAL order: the
    store fires commit callbacks in submission order)."""

    def __init__(
        self,
        table: ChannelTable,
        store: HubStore,
        tasks: TaskMirror,
        admission: Admission,
        timers: ChannelTimers,
        *,
        deliver: Deliver,
        spawn: Callable[[Any, str], asyncio.Task[Any]],
        recover: Callable[[ChannelRuntime], Awaitable[None]],
        settled: Settled,
        fence: Fence | None = None,
    ) -> None:
        self._table = table
        self._store = store
        self._tasks = tasks
        self._admission = admission
        self._timers = timers
        self._deliver = deliver
        self._spawn = spawn
        self._recover = recover
        self._settled = settled
        self._fence = fence
        """With the channels divided among replicas: the fence of each write (None: every replica holds all)."""

    def commit(self, ch: ChannelRuntime, batch: Batch) -> asyncio.Future[None]:
        """Submit a batch staged under ``ch.lock`` (still held); returns the commit future.

        An ended channel's tasks end in the same bundle; an opened one gets its TTL timer.
        Once committed, the envelopes go to the members' sessions and the watchers, and an
        ended channel leaves the table; if the commit fails, the runtime is marked stale
        at once (nothing more is admitted into it) and rebuilt from what the store holds, and
        the rate tokens the batch's envelopes took are given back if nothing was stored
        (:meth:`Admission.refund <hubsvc.core.admission.Admission.refund>`).
        """
        ended_tasks = []
        if batch.ended is not None:
            ended_tasks = self._tasks.end_for_channel(ch.channel_id, batch.ended)
            batch.writes.tasks.extend(self._tasks.rows(ended_tasks))
        elif batch.opened:
            self._timers.arm_ttl(ch)
        if self._fence is not None:
            batch.writes.fence = self._fence(ch.channel_id)
            batch.writes.notify[ch.channel_id] = ch.participants  # told only where its members are
        fut = ch.last_commit = self._store.submit(batch.writes)
        ch.unpublished += 1
        wires = batch.wires
        charged = batch.charged
        ended = batch.ended is not None
        keyed = [w for w in wires if w.HasField("idempotency_key")]
        for wire in keyed:
            ch.in_flight[wire.envelope_id] = (wire, fut)

        def committed(f: asyncio.Future[None]) -> None:
            ch.unpublished -= 1
            for wire in keyed:
                ch.in_flight.pop(wire.envelope_id, None)
            if f.cancelled() or f.exception() is not None:
                self._admission.refund(charged, None if f.cancelled() else f.exception())
                if not ch.stale:
                    ch.stale = True
                    self._spawn(self._recover(ch), f"recover-{ch.channel_id}")
                return
            for wire in keyed:
                ch.keyed_wires[wire.envelope_id] = wire
            if ended_tasks:
                self._tasks.apply(ended_tasks)
            self.publish(ch, wires, ended)

        if committed_already(fut) and ch.unpublished == 1:
            committed(fut)  # written at once (inline): deliver now rather than a loop turn later
        else:
            # Also when written inline while an earlier batch's commit is still to be handled: the
            # store resolved that one first, so its callback is already scheduled and runs before
            # this one. Handled now, this batch's envelopes would reach the sessions ahead of that
            # one's, and a session drops an envelope whose seq is below one it was given.
            fut.add_done_callback(committed)
        return fut

    def publish(self, ch: ChannelRuntime, wires: list[envelope_pb2.Envelope], ended: bool) -> None:
        """``wires`` of ``ch`` are committed: hand them to the members' sessions and the watchers;
        an ``ended`` channel leaves the table."""
        ch.committed_seq = max(ch.committed_seq, wires[-1].seq if wires else 0)
        table = self._table
        if wires:
            self._deliver(ch, wires)
            table.notify(ch.channel_id, wires)
        if ended:
            table.ended[ch.channel_id] = ch.committed_seq
            table.final[ch.channel_id] = (ch.adapter, ch.state)
            if table.channels.get(ch.channel_id) is ch:
                table.drop(ch.channel_id)
        self._settled(ch)
