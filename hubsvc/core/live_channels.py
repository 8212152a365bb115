"""The live channels: lookup, lifecycle and timers, waits, commits and WAL reads.

A channel is live from OpenChannel until its closed or expired envelope commits.
This module holds the table of live channels; opens, closes and expires them (the
envelopes themselves are staged by :class:`~hubsvc.core.admission.Admission` under
the channel's lock); arms the invite-timeout and TTL timers; submits every staged
:class:`~hubsvc.core.admission.Batch` and, once it commits, hands its envelopes to
the connected members and to watchers (the store fires commit callbacks in
submission order, so delivery order is WAL order); and rebuilds channels from the
WAL at start (hydrate) or after a failed commit (recover).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

from agentnet.v1 import channel_pb2, envelope_pb2

from hubsvc.adapters import get_adapter
from hubsvc.adapters.base import Adapter, ChannelSpec
from hubsvc.core.admission import Admission, Batch
from hubsvc.core.channel import PENDING, ChannelRuntime
from hubsvc.core.enforcement import NO_SLOT_LIMIT, Slot
from hubsvc.core.intake import Intake
from hubsvc.core.options import HubOptions
from hubsvc.core.registry import Registry
from hubsvc.core.tasks import TaskMirror
from hubsvc.core.util import BoundedDict, Clock, check_seconds, committed_already, from_timestamp, new_id
from hubsvc.governance.arbiter import Action
from hubsvc.governance.expectations import KNOB, resolve_expectations, to_knob
from hubsvc.governance.policy import Policy
from hubsvc.storage import AtLimit, ChannelRow, HubStore
from netkernel.envelope import EV_CHANNEL_INVITE, Envelope
from netkernel.errors import InvalidArgument, NotFound, NotParticipant, Timeout, Unavailable
from netkernel.wire import envelope_from_wal, parse_json_object, wire_readable_by

log = logging.getLogger("agentnet.hub")

_CATCH_UP_PAGE = 1000
"""WAL records one store read of a catch-up returns at most."""
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
Deliver = Callable[[ChannelRuntime, list[envelope_pb2.Envelope]], None]
"""Hands a channel's committed envelopes to its connected members."""
GovernOpen = Callable[[str, Action, str, list[str], float | None, int], Awaitable[tuple[float | None, Slot]]]
"""The governance check of a new channel: (initiator, action, type, invited ids, asked TTL, seed depth) →
the TTL to use (None = the hub's default) and the open-channel slot it takes; raises the refusal
(``Enforcement.open_channel``)."""
Settled = Callable[[ChannelRuntime], None]
"""Told that a channel's committed state changed: a batch committed (the channel may have
ended), or the channel was rebuilt from the WAL (hydrate, recover)."""


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
        self._store = store
        self._govern = govern
        self._registry = registry
        self._tasks = tasks
        self._admission = admission
        self._intake = intake
        self._inboxes = intake.inboxes
        self._options = options
        self._clock = clock
        self._deliver = deliver
        self._spawn = spawn
        self._policy = policy
        self._channels: dict[str, ChannelRuntime] = {}
        self._watchers: dict[str, set[Watcher]] = {}
        self._ended: BoundedDict[str, int] = BoundedDict(_ENDED_MEMORY)
        """Channels that ended here → their last seq (a late change of one is not published again)."""
        self._final: BoundedDict[str, tuple[Adapter[Any], Any]] = BoundedDict(_FINAL_STATES)
        """Recently ended channels → (adapter, final adapter state): DescribeChannel of an ended channel."""
        self.settled: Settled = lambda ch: None
        """Called after each commit and rebuild of a channel (the expectation timers re-arm from it)."""

    # -- lookup -----------------------------------------------------------------------

    def get(self, channel_id: str) -> ChannelRuntime | None:
        """A live channel, if any."""
        return self._channels.get(channel_id)

    def live(self) -> Iterable[ChannelRuntime]:
        """Every live channel (a view: copy it before awaiting)."""
        return self._channels.values()

    async def meta(self, channel_id: str) -> channel_pb2.ChannelMetadata:
        """Metadata of a live or ended channel (NotFound otherwise)."""
        ch = self._channels.get(channel_id)
        if ch is not None:
            return ch.meta
        row = await self._store.get_channel(channel_id)
        if row is None:
            raise NotFound(f"no channel with id {channel_id!r}; list yours with ListChannels.")
        return channel_pb2.ChannelMetadata.FromString(row.record)

    async def final_state(self, channel_id: str) -> dict[str, Any] | None:
        """A channel's adapter state as JSON data as its WAL leaves it — an ended channel's final state,
        kept for analysis — or None when the store has no such channel.

        The state of a channel that ended here is remembered; any other (ended before a restart, or
        on another replica) is folded again from its stored WAL, as hydrate would."""
        known = self._final.get(channel_id)
        if known is None:
            row = await self._store.get_channel(channel_id)
            if row is None:
                return None
            ch = ChannelRuntime.from_row(row)
            now = self._clock()
            async for _, records in self._store.scan_wal([channel_id]):
                for low in range(0, len(records), FOLD_RUN):
                    wires = map(envelope_pb2.Envelope.FromString, records[low : low + FOLD_RUN])
                    ch.fold_run(list(map(envelope_from_wal, wires)), now)
            known = (ch.adapter, ch.state)
            if ch.is_terminal:  # an ended channel's WAL never changes again
                self._final[channel_id] = known
        adapter, state = known
        return adapter.state_json(state)

    async def require_member(self, agent_id: str, channel_id: str) -> channel_pb2.ChannelMetadata:
        """Metadata of a channel ``agent_id`` participates in (NotParticipant otherwise)."""
        meta = await self.meta(channel_id)
        if all(p.agent_id != agent_id for p in meta.participants):
            raise NotParticipant(
                f"you are not a participant of channel '{channel_id}'; only its participants may use it.",
                metadata={"channel_id": channel_id},
            )
        return meta

    def watch(self, channel_id: str, watcher: Watcher) -> Callable[[], None]:
        """Call ``watcher`` with every envelope of the channel once committed; returns an unsubscribe."""
        self._watchers.setdefault(channel_id, set()).add(watcher)

        def unsubscribe() -> None:
            watchers = self._watchers.get(channel_id)
            if watchers is not None:
                watchers.discard(watcher)
                if not watchers:
                    self._watchers.pop(channel_id, None)

        return unsubscribe

    def watched(self, channel_id: str) -> bool:
        """Whether anything watches the channel (tests check that a dropped follower let go)."""
        return bool(self._watchers.get(channel_id))

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
        ch = self._channels.get(channel_id)
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

    # -- lifecycle --------------------------------------------------------------------

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
        """Create a PENDING channel and invite the targets (returns once the invites are committed).

        The whole request is checked first, the seed through the same
        :class:`~hubsvc.core.intake.Intake` checks as any post (screen, the targets' inbox
        caps, then its rate token); nothing is registered
        before that, and a channel whose creation fails to commit leaves memory again.
        ``dispatch`` is the A2A dispatch InvokeAgent attaches to its (screened) seed: only
        the hub writes ``event_data.a2a`` dispatches, never a client. ``action`` (open_channel,
        delegate or invoke) is what the governance check and its audit record call it.
        ``on_checked`` runs once every check passed, just before the channel's writes are
        submitted (InvokeAgent records its call there, so a refused call records nothing and
        a recorded one commits before its channel).
        """
        adapter = get_adapter(type)
        if not targets:
            raise InvalidArgument(f"a {type} channel needs at least one target; name who to invite.")
        members: list[str] = []
        for ref in targets:
            agent_id = self._registry.resolve(ref).agent_id
            if agent_id == initiator:
                raise InvalidArgument("you cannot invite yourself; name other agents as targets.")
            if agent_id not in members:
                members.append(agent_id)
        limit = self._options.max_ttl_seconds
        if ttl_seconds is not None:
            check_seconds(ttl_seconds, "ttl_seconds", limit, absent="the hub's default")
        if invite_ack_timeout is not None:
            check_seconds(invite_ack_timeout, "invite_ack_timeout_seconds", limit, absent="the hub's default")
        slot = NO_SLOT_LIMIT
        if self._govern is not None:
            # The rules and the arbiter; nothing below awaits until the channel is registered,
            # so the count of open channels the check saw is still true when it is (on this
            # replica; the store checks the slot's limit against all of them).
            ttl_seconds, slot = await self._govern(
                initiator, action, adapter.type, members, ttl_seconds, seed.depth if seed is not None else 0
            )
        timeout = self._options.invite_ack_timeout if invite_ack_timeout is None else invite_ack_timeout
        participants = (initiator, *members)
        names = {a: self._registry.name_for(a) for a in participants}
        channel_id = new_id()
        spec = ChannelSpec(
            channel_id=channel_id,
            type=adapter.type,
            initiator=initiator,
            participants=participants,
            names=names,
            knobs=parse_json_object(knobs_json, "knobs_json", self._options.max_json_depth),
        )
        knobs = adapter.validate_create(spec)
        expectations = resolve_expectations(self._policy(), adapter.type, knobs.pop(KNOB, None))
        if expectations:
            knobs[KNOB] = to_knob(expectations)
        spec = dataclasses.replace(spec, knobs=knobs)
        now = self._clock()
        ttl = ttl_seconds if ttl_seconds is not None else self._options.default_channel_ttl
        batch = Batch()
        if seed is not None:
            seed = dataclasses.replace(seed, channel_id=channel_id, event_data=dict(seed.event_data))
            self._intake.screen(seed)
            self._intake.check_inbox(initiator, members, seed)
            self._intake.count(initiator, seed, batch.charged)  # last: a refused seed takes no rate token
            if dispatch is not None:
                seed.event_data["a2a"] = dispatch
        ch = ChannelRuntime.pending(
            spec, adapter, intent=intent, invite_ack_timeout=timeout, ttl=ttl, now=now, seed=seed
        )
        # Stage everything before the channel becomes visible: a failure here changes nothing.
        batch.writes.channels.append(dataclasses.replace(ch.to_row(), hold_limit=slot.limit))
        invite = {
            "channel_id": channel_id,
            "type": adapter.type,
            "initiator": initiator,
            "initiator_name": names[initiator],
            "intent": intent,
            "participants": list(participants),
            "knobs": dict(spec.knobs),
        }
        for target in members:
            self._admission.post_as_hub(ch, EV_CHANNEL_INVITE, invite, [target], batch)
        batch.writes.audit.append(("channel_created", initiator, channel_id, json.dumps({"type": adapter.type}), now))
        if on_checked is not None:
            on_checked()
        async with ch.lock:  # new and unseen: acquired without waiting
            self._channels[channel_id] = ch
            fut = self.commit(ch, batch)
            self._arm_timers(ch)
        try:
            await fut
        except AtLimit as full:  # another replica took the initiator's last slot: nothing was written
            raise slot.refuse(full.held) from None
        return ch

    async def wait(
        self, channel_id: str, until: Callable[[channel_pb2.ChannelMetadata], bool], timeout: float
    ) -> channel_pb2.ChannelMetadata:
        """Wait until ``until(metadata)`` holds after a committed envelope (or the timeout passes)."""

        def settled() -> bool:
            # The awaited state may be folded but not committed yet; wait for the commit too.
            ch = self._channels.get(channel_id)
            return ch is None or ch.committed_seq >= ch.last_seq

        meta = await self.meta(channel_id)
        if until(meta) and settled():
            return meta
        changed = asyncio.Event()
        unsubscribe = self.watch(channel_id, lambda _wire: changed.set())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            while True:
                meta = await self.meta(channel_id)
                if until(meta) and settled():
                    return meta
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise Timeout(
                        f"channel '{channel_id}' did not reach the awaited state within {timeout:g}s.",
                        metadata={"channel_id": channel_id},
                    )
                changed.clear()
                try:
                    await asyncio.wait_for(changed.wait(), remaining)
                except TimeoutError:
                    pass
        finally:
            unsubscribe()

    async def close(self, caller: str, channel_id: str, reason: str = "") -> channel_pb2.ChannelMetadata:
        """Close a channel the caller participates in."""
        await self.require_member(caller, channel_id)
        async with self.locked(channel_id) as ch:
            if ch is None:
                return await self.meta(channel_id)  # already ended: closing is idempotent
            batch = Batch()
            self._admission.end(ch, reason or "closed_by_agent", batch, detail={"closed_by": caller})
            fut = self.commit(ch, batch)
        await fut
        return ch.meta

    async def close_all_of(self, agent_id: str) -> list[str]:
        """Close every live channel of ``agent_id`` with reason "participant_left"; returns their ids."""
        closed = []
        for channel_id in [c.channel_id for c in self._channels.values() if agent_id in c.participants]:
            async with self.locked(channel_id) as ch:
                if ch is None or ch.is_terminal:
                    continue
                batch = Batch()
                self._admission.end(ch, "participant_left", batch, detail={"agent_id": agent_id})
                fut = self.commit(ch, batch)
            await fut
            closed.append(channel_id)
        return closed

    def cancel_timers(self) -> None:
        """Disarm every live channel's timers (the hub is stopping)."""
        for ch in self._channels.values():
            ch.cancel_timers()

    def _arm_timers(self, ch: ChannelRuntime) -> None:
        """Arm the invite timeout of a PENDING channel and the TTL of any channel."""
        loop = asyncio.get_running_loop()
        now = self._clock()
        if ch.meta.state == PENDING:
            deadline = from_timestamp(ch.meta.created_at) + ch.meta.invite_ack_timeout_seconds
            ch.timers.append(
                loop.call_later(
                    max(0.0, deadline - now),
                    lambda: self._spawn(self._expire(ch.channel_id, "invite_timeout", False), "invite-timeout"),
                )
            )
        self._arm_ttl(ch)

    def _arm_ttl(self, ch: ChannelRuntime) -> None:
        if not ch.meta.HasField("expires_at"):
            return
        delay = max(0.0, from_timestamp(ch.meta.expires_at) - self._clock())
        ch.timers.append(
            asyncio.get_running_loop().call_later(
                delay, lambda: self._spawn(self._expire(ch.channel_id, "ttl", True), "channel-ttl")
            )
        )

    async def _expire(self, channel_id: str, reason: str, expired: bool) -> None:
        async with self.locked(channel_id) as ch:
            if ch is None or ch.is_terminal or (reason == "invite_timeout" and ch.meta.state != PENDING):
                return
            batch = Batch()
            self._admission.end(ch, reason, batch, expired=expired)
            fut = self.commit(ch, batch)
        await fut

    # -- commit -----------------------------------------------------------------------

    def commit(self, ch: ChannelRuntime, batch: Batch) -> asyncio.Future[None]:
        """Submit a batch staged under ``ch.lock`` (still held); returns the commit future.

        An ended channel's tasks end in the same bundle; an opened one gets its TTL timer.
        Once committed, the envelopes go to the members' sessions and the watchers, and an
        ended channel leaves the table; if the commit fails, the runtime is marked stale
        at once (nothing more is admitted into it) and rebuilt from what the store holds, and
        the rate tokens the batch's envelopes took are given back if nothing was stored
        (:meth:`Intake.uncount <hubsvc.core.intake.Intake.uncount>`).
        """
        ended_tasks = []
        if batch.ended is not None:
            ended_tasks = self._tasks.end_for_channel(ch.channel_id, batch.ended)
            batch.writes.tasks.extend(self._tasks.rows(ended_tasks))
        elif batch.opened:
            self._arm_ttl(ch)
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
                self._intake.uncount(charged, None if f.cancelled() else f.exception())
                if not ch.stale:
                    ch.stale = True
                    self._spawn(self._recover(ch), f"recover-{ch.channel_id}")
                return
            for wire in keyed:
                ch.keyed_wires[wire.envelope_id] = wire
            if ended_tasks:
                self._tasks.apply(ended_tasks)
            self._publish(ch, wires, ended)

        if committed_already(fut) and ch.unpublished == 1:
            committed(fut)  # written at once (inline): deliver now rather than a loop turn later
        else:
            # Also when written inline while an earlier batch's commit is still to be handled: the
            # store resolved that one first, so its callback is already scheduled and runs before
            # this one. Handled now, this batch's envelopes would reach the sessions ahead of that
            # one's, and a session drops an envelope whose seq is below one it was given.
            fut.add_done_callback(committed)
        return fut

    def _publish(self, ch: ChannelRuntime, wires: list[envelope_pb2.Envelope], ended: bool) -> None:
        """``wires`` of ``ch`` are committed: hand them to the members' sessions and the watchers;
        an ``ended`` channel leaves the table."""
        ch.committed_seq = max(ch.committed_seq, wires[-1].seq if wires else 0)
        if wires:
            self._deliver(ch, wires)
            watchers = self._watchers.get(ch.channel_id)
            if watchers:
                self._notify(list(watchers), wires)
        if ended:
            self._ended[ch.channel_id] = ch.committed_seq
            self._final[ch.channel_id] = (ch.adapter, ch.state)
            if self._channels.get(ch.channel_id) is ch:
                del self._channels[ch.channel_id]
                self._inboxes.release(ch.channel_id)
        self.settled(ch)

    @staticmethod
    def _notify(watchers: list[Watcher], wires: list[envelope_pb2.Envelope]) -> None:
        for wire in wires:
            for watcher in watchers:
                try:
                    watcher(wire)
                except Exception:
                    log.exception("channel watcher failed")

    # -- rebuilding from the WAL ------------------------------------------------------

    async def hydrate(self) -> int:
        """Rebuild every live channel by folding its WAL and re-arm its timers; returns the envelopes folded."""
        rows = await self._store.load_live_channels()
        for row in rows:
            self._channels[row.channel_id] = ChannelRuntime.from_row(row)
        count = self._inboxes.staged_run
        folded = 0
        now = self._clock()
        channels = self._channels
        parse = envelope_pb2.Envelope.FromString
        stored = envelope_from_wal
        scan = aiter(self._store.scan_wal(list(channels)))
        upcoming = asyncio.ensure_future(anext(scan, None))
        while (page := await upcoming) is not None:
            upcoming = asyncio.ensure_future(anext(scan, None))
            # One turn of the loop lets the read of the next page start (in the store's
            # thread) before this one is folded; the fold below never yields.
            await asyncio.sleep(0)
            channel_id, records = page
            ch = channels[channel_id]
            fold_run, members = ch.fold_run, ch.participants
            for low in range(0, len(records), FOLD_RUN):
                wires = list(map(parse, records[low : low + FOLD_RUN]))
                fold_run(list(map(stored, wires)), now)
                count(channel_id, members, wires)
            folded += len(records)
        for ch in list(self._channels.values()):
            ch.committed_seq = ch.meta.last_seq = ch.last_seq
            if ch.is_terminal:  # the close was committed; only the row update was lost
                del self._channels[ch.channel_id]
                self._inboxes.release(ch.channel_id)
                continue
            self._arm_timers(ch)
            self.settled(ch)
        log.info("hydrated %d live channels from %d envelopes", len(self._channels), folded)
        return folded

    async def _recover(self, ch: ChannelRuntime) -> None:
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
                row = await self._store.get_channel(channel_id)
                if row is None:  # its creation was never written
                    self._channels.pop(channel_id, None)
                    self._inboxes.release(channel_id)
                    return
                self._inboxes.reset(channel_id)  # recounted from the whole WAL the store holds
                fresh, unseen = await self._rebuild(row, ch.committed_seq)
                # What the store holds beyond what this replica published: another replica's
                # posts (it won the race) or a write whose reply was lost after it was stored.
                self._adopt(fresh, unseen)
                log.info("channel %s rebuilt from storage after a failed write (seq %d)", channel_id, fresh.last_seq)
        except Unavailable:
            # The store did not answer (Redis down or restarting): the channel stays, stale, and
            # the next use of it (see locked) tries the rebuild again.
            unreachable = True
            log.warning("channel %s could not be rebuilt yet: its store did not answer", channel_id)
        finally:
            if self._channels.get(channel_id) is ch and not unreachable:  # the rebuild itself failed
                self._channels.pop(channel_id, None)
                self._inboxes.release(channel_id)
            ch.rebuilt.set()

    async def _rebuild(self, row: ChannelRow, published: int) -> tuple[ChannelRuntime, list[envelope_pb2.Envelope]]:
        """A runtime folded from the channel's whole WAL (its envelopes counted in the inboxes),
        and the envelopes above seq ``published``."""
        fresh = ChannelRuntime.from_row(row)
        unseen: list[envelope_pb2.Envelope] = []
        async for _, records in self._store.scan_wal([row.channel_id]):
            unseen += [wire for wire in self._fold(fresh, records) if wire.seq > published]
        fresh.committed_seq = fresh.meta.last_seq = fresh.last_seq
        return fresh, unseen

    def _fold(self, ch: ChannelRuntime, records: list[bytes]) -> list[envelope_pb2.Envelope]:
        """Fold stored envelopes into ``ch`` a run at a time (as hydrate does), counting them in the
        inboxes; returns them as wire messages."""
        folded: list[envelope_pb2.Envelope] = []
        now = self._clock()
        for low in range(0, len(records), FOLD_RUN):
            wires = list(map(envelope_pb2.Envelope.FromString, records[low : low + FOLD_RUN]))
            ch.fold_run(list(map(envelope_from_wal, wires)), now)
            self._inboxes.staged_run(ch.channel_id, ch.participants, wires)
            folded += wires
        return folded

    def _adopt(self, fresh: ChannelRuntime, unseen: list[envelope_pb2.Envelope]) -> None:
        """Put a rebuilt runtime in the table (an ended one leaves it) and publish ``unseen``."""
        self._channels[fresh.channel_id] = fresh
        if not fresh.is_terminal:
            self._arm_timers(fresh)
        self._publish(fresh, unseen, fresh.is_terminal)

    # -- other replicas' commits ------------------------------------------------------

    async def refresh_if_behind(self, channel_id: str) -> bool:
        """Whether the store holds more of the channel than this replica has published (another
        replica committed to it and the change feed has not told this one yet); if so, the
        channel is caught up first. Always False on a store no other replica shares."""
        if self._store.feed is None:
            return False
        stored = await self._store.channel_seq(channel_id)
        ch = self._channels.get(channel_id)
        known = ch.committed_seq if ch is not None else self._ended.get(channel_id, 0)
        if stored <= known:
            return False
        await self.catch_up(channel_id, stored)
        return True

    async def catch_up_all(self) -> None:
        """Catch up every channel live here or live in the store."""
        ids = {row.channel_id for row in await self._store.load_live_channels()} | set(self._channels)
        await asyncio.gather(*(self.catch_up(channel_id, 0) for channel_id in ids))

    async def catch_up(self, channel_id: str, seq: int) -> None:
        """Another replica committed the channel up to ``seq`` (0: its row changed): fold what
        this replica lacks, in seq order, and publish it to the members connected here.

        A channel not live here is read from the store (another replica opened it; an ended
        one is still published once, so members here see its invites and its end).
        """
        async with self.locked(channel_id) as ch:
            if ch is None:
                known = self._ended.get(channel_id)
                if known is not None and known >= seq:
                    return
                row = await self._store.get_channel(channel_id)
                if row is None or channel_id in self._channels:  # never written, or opened meanwhile
                    return
                fresh, unseen = await self._rebuild(row, known or 0)
                self._adopt(fresh, unseen)
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
                wires += self._fold(ch, rows)
                if len(rows) < _CATCH_UP_PAGE:
                    break
            if not wires:
                return
            ch.meta.last_seq = ch.last_seq
            if was_pending and ch.meta.state != PENDING:
                self._arm_ttl(ch)
            self._publish(ch, wires, ch.is_terminal)

    @contextlib.asynccontextmanager
    async def locked(self, channel_id: str) -> AsyncIterator[ChannelRuntime | None]:
        """Hold the lock of the live channel ``channel_id`` (None if it is not live), waiting out a rebuild."""
        while True:
            ch = self._channels.get(channel_id)
            if ch is None:
                yield None
                return
            if ch.stale:
                if ch.rebuilt.is_set():  # its last rebuild found the store unreachable: try again
                    ch.rebuilt = asyncio.Event()
                    self._spawn(self._recover(ch), f"recover-{channel_id}")
                await ch.rebuilt.wait()
                if self._channels.get(channel_id) is ch:
                    raise Unavailable(
                        f"channel '{channel_id}' is being rebuilt from the hub's store after a failed write, and "
                        "the store does not answer; nothing was changed — retry.",
                        metadata={"channel_id": channel_id, "cause": "store_unreachable"},
                    )
                continue
            async with ch.lock:
                if ch.stale:
                    continue
                yield ch
                return
