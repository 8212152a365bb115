"""The lifecycle of a live channel: open (invites), waits for a state, close, and the end its timers bring.

The envelopes themselves are staged by :class:`~hubsvc.core.admission.Admission` under the
channel's lock; this module decides when, and hands the staged batch to :mod:`.commits`. A
channel's seed is admitted by the same call as any post
(:meth:`Admission.admit <hubsvc.core.admission.Admission.admit>`), under the new channel's lock.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from agentnet.v1 import channel_pb2

from hubsvc.adapters import get_adapter
from hubsvc.adapters.base import ChannelSpec
from hubsvc.core.admission import Admission, Batch
from hubsvc.core.channel import PENDING, ChannelRuntime
from hubsvc.core.enforcement import NO_SLOT_LIMIT, Slot
from hubsvc.core.live_channels.commits import Commits
from hubsvc.core.live_channels.table import ChannelTable
from hubsvc.core.live_channels.timers import ChannelTimers
from hubsvc.core.options import HubOptions
from hubsvc.core.placement import Placement
from hubsvc.core.registry import Registry
from hubsvc.core.util import Clock, check_seconds
from hubsvc.governance.arbiter import Action
from hubsvc.governance.expectations import KNOB, resolve_expectations, to_knob
from hubsvc.governance.policy import Policy
from hubsvc.storage import AtLimit
from netkernel.envelope import EV_CHANNEL_INVITE, Envelope
from netkernel.errors import InvalidArgument, Timeout
from netkernel.wire import parse_json_object

GovernOpen = Callable[[str, Action, str, list[str], float | None, int], Awaitable[tuple[float | None, Slot]]]
"""The governance check of a new channel: (initiator, action, type, invited ids, asked TTL, seed depth) →
the TTL to use (None = the hub's default) and the open-channel slot it takes; raises the refusal
(``Enforcement.open_channel``)."""
Locked = Callable[[str], AbstractAsyncContextManager[ChannelRuntime | None]]
"""Holds a live channel's lock, waiting out a rebuild (:meth:`Rebuilder.locked`)."""


class Lifecycle:
    """Opens, waits on, closes and expires live channels."""

    def __init__(
        self,
        table: ChannelTable,
        registry: Registry,
        admission: Admission,
        options: HubOptions,
        clock: Clock,
        commits: Commits,
        timers: ChannelTimers,
        locked: Locked,
        *,
        govern: GovernOpen | None = None,
        policy: Callable[[], Policy] = Policy,
        placement: Placement | None = None,
    ) -> None:
        self._placement = placement or Placement(None, None, None)
        self._table = table
        self._registry = registry
        self._admission = admission
        self._options = options
        self._clock = clock
        self._commits = commits
        self._timers = timers
        self._locked = locked
        self._govern = govern
        self._policy = policy

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

        The whole request is checked first, the seed admitted by the same call as any post
        (:meth:`Admission.admit <hubsvc.core.admission.Admission.admit>`: screen, the targets' inbox
        caps, then its rate token; the channel's rules answer it once the channel opens); nothing is
        registered before that, and a channel whose creation fails to commit leaves memory again.
        ``dispatch`` is the A2A dispatch InvokeAgent attaches to its (screened) seed: only
        the hub writes ``event_data.a2a`` dispatches, never a client. ``action`` (open_channel,
        delegate or invoke) is what the governance check and its audit record call it.
        ``on_checked`` runs once every check passed, just before the channel's writes are
        submitted (InvokeAgent records its call there, so a refused call records nothing and
        a recorded one commits before its channel).
        """
        adapter = get_adapter(type)
        channel_id = self._placement.new_channel_id()  # in a partition held here (else PartitionMoved: forwarded)
        if not targets:
            raise InvalidArgument(f"a {type} channel needs at least one target; name who to invite.")
        members: list[str] = []
        for ref in targets:
            agent_id = (await self._registry.find(ref)).agent_id
            if agent_id == initiator:
                raise InvalidArgument("you cannot invite yourself; name other agents as targets.")
            if agent_id not in members:
                members.append(agent_id)
        limit = self._options.max_ttl_seconds
        if ttl_seconds is not None:
            check_seconds(ttl_seconds, "ttl_seconds", limit, absent="the hub's default")
        if invite_ack_timeout is not None:
            check_seconds(invite_ack_timeout, "invite_ack_timeout_seconds", limit, absent="the hub's default")
        if seed is not None:
            await self._admission.prepare(initiator, recipients=members)  # its rate token, inbox counts
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
        ch = ChannelRuntime.pending(spec, adapter, intent=intent, invite_ack_timeout=timeout, ttl=ttl, now=now)
        async with ch.lock:  # new and unseen: acquired without waiting
            if seed is not None:
                seed = dataclasses.replace(seed, channel_id=channel_id, event_data=dict(seed.event_data))
                self._admission.admit(ch, initiator, seed, batch, seed=True)  # held as ch.seed until opened
                if dispatch is not None:
                    seed.event_data["a2a"] = dispatch
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
            batch.writes.audit.append(
                ("channel_created", initiator, channel_id, json.dumps({"type": adapter.type}), now)
            )
            if on_checked is not None:
                on_checked()
            self._table.channels[channel_id] = ch
            fut = self._commits.commit(ch, batch)
            self._timers.arm(ch)
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
            ch = self._table.channels.get(channel_id)
            return ch is None or ch.committed_seq >= ch.last_seq

        meta = await self._table.meta(channel_id)
        if until(meta) and settled():
            return meta
        changed = asyncio.Event()
        unsubscribe = self._table.watch(channel_id, lambda _wire: changed.set())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            while True:
                meta = await self._table.meta(channel_id)
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
        """Close a channel the caller participates in (PartitionMoved when another replica holds it)."""
        await self._table.require_member(caller, channel_id)
        self._placement.require(channel_id)
        async with self._locked(channel_id) as ch:
            if ch is None:
                return await self._table.meta(channel_id)  # already ended: closing is idempotent
            batch = Batch()
            self._admission.end(ch, reason or "closed_by_agent", batch, detail={"closed_by": caller})
            fut = self._commits.commit(ch, batch)
        await fut
        return ch.meta

    async def close_all_of(self, agent_id: str) -> list[str]:
        """Close every live channel of ``agent_id`` with reason "participant_left"; returns their ids."""
        closed = []
        for channel_id in [c.channel_id for c in self._table.channels.values() if agent_id in c.participants]:
            async with self._locked(channel_id) as ch:
                if ch is None or ch.is_terminal:
                    continue
                batch = Batch()
                self._admission.end(ch, "participant_left", batch, detail={"agent_id": agent_id})
                fut = self._commits.commit(ch, batch)
            await fut
            closed.append(channel_id)
        return closed

    async def expire(self, channel_id: str, reason: str, expired: bool) -> None:
        """A timer of the channel fired: end it with ``reason`` (unless it ended, or was opened, meanwhile)."""
        async with self._locked(channel_id) as ch:
            if ch is None or ch.is_terminal or (reason == "invite_timeout" and ch.meta.state != PENDING):
                return
            batch = Batch()
            self._admission.end(ch, reason, batch, expired=expired)
            fut = self._commits.commit(ch, batch)
        await fut
