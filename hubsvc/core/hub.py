"""HubCore: the transport-agnostic hub.

Admission is serialised per channel: ``validate → stamp (seq, id, time) → fold →
stage the WAL write`` (:mod:`hubsvc.core.admission`) happens under the channel's lock,
so admission order is WAL order; the lock is released before the commit so many
envelopes share one transaction (group commit). A post is answered, and delivered
to anyone, only once its write is committed: deliveries run from the commit
callback, which the store fires in submission order.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Callable
from typing import Any

from agentnet.v1 import a2a_pb2, channel_pb2, envelope_pb2, identity_pb2

from hubsvc.adapters import get_adapter
from hubsvc.adapters.base import ChannelSpec
from hubsvc.core.admission import Admission, Batch, check_shape, refuse_forged_dispatch
from hubsvc.core.channel import OPENED, PENDING, ChannelRuntime
from hubsvc.core.executions import ExecutionLog
from hubsvc.core.options import HubOptions
from hubsvc.core.registry import Registry
from hubsvc.core.sessions import Sessions
from hubsvc.core.tasks import TaskMirror
from hubsvc.core.util import Clock, from_timestamp, new_id, system_clock
from hubsvc.storage import HubStore, Writes
from netkernel.envelope import EV_CHANNEL_INVITE, EV_TEXT, Envelope
from netkernel.errors import (
    AgentNetError,
    ChannelClosed,
    InvalidArgument,
    NotFound,
    NotParticipant,
    Timeout,
    Unavailable,
)
from netkernel.wire import envelope_from_wire, parse_json_object, wire_readable_by

log = logging.getLogger("agentnet.hub")

Watcher = Callable[[envelope_pb2.Envelope], None]


class HubCore:
    """The hub: registry, channels, admission, delivery sessions, tasks."""

    def __init__(self, store: HubStore, *, options: HubOptions | None = None, clock: Clock = system_clock) -> None:
        self.store = store
        self.options = options or HubOptions()
        self.clock = clock
        self.registry = Registry(store, clock)
        self.tasks = TaskMirror(store, clock, self.audit)
        self.executions = ExecutionLog(store, clock)
        self.admission = Admission(self.options, clock)
        self._channels: dict[str, ChannelRuntime] = {}
        self._watchers: dict[str, set[Watcher]] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self._loops: list[asyncio.Task[None]] = []
        self.sessions = Sessions(
            store, self.registry, self.options, clock, live_channels=self._channels.values, spawn=self.spawn
        )
        self.connect = self.sessions.connect
        self.disconnect = self.sessions.disconnect

    # -- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Open storage, load identities and tasks, hydrate live channels, start the sweepers."""
        await self.store.open()
        await self.registry.load()
        await self.tasks.load()
        await self.executions.load()
        await self.hydrate()
        self._loops = [
            asyncio.create_task(self.sessions.flush_loop(), name="hub-cursor-flush"),
            asyncio.create_task(self._sweep_loop(), name="hub-sweeper"),
        ]

    def close_sessions(self) -> None:
        """End every Connect stream (clients reconnect elsewhere / later and resume)."""
        self.sessions.close_all(
            Unavailable(
                "the hub is shutting down; reconnect to resume from your cursors.", metadata={"cause": "shutdown"}
            )
        )

    async def stop(self) -> None:
        """Close every session, flush cursors and close storage."""
        self.close_sessions()
        for loop_task in self._loops:
            loop_task.cancel()
        for loop_task in self._loops:
            try:
                await loop_task
            except asyncio.CancelledError:
                pass
        self.sessions.flush_cursors()
        for ch in self._channels.values():
            ch.cancel_timers()
        if self._background:
            for task in list(self._background):
                task.cancel()
            await asyncio.wait(list(self._background), timeout=5.0)
        await self.store.close()

    async def hydrate(self) -> int:
        """Rebuild every live channel by folding its WAL; returns the envelopes folded."""
        rows = await self.store.load_live_channels()
        for row in rows:
            self._channels[row.channel_id] = ChannelRuntime.from_row(row)
        folded = 0
        now = self.clock()
        channels = self._channels
        parse = envelope_pb2.Envelope.FromString
        # Read the next batch (in the store's thread) while folding this one.
        scan = aiter(self.store.scan_wal(list(channels)))
        upcoming = asyncio.ensure_future(anext(scan, None))
        while (batch := await upcoming) is not None:
            upcoming = asyncio.ensure_future(anext(scan, None))
            for channel_id, data in batch:
                channels[channel_id].fold(envelope_from_wire(parse(data)), now)
            folded += len(batch)
        for ch in list(self._channels.values()):
            ch.committed_seq = ch.meta.last_seq = ch.last_seq
            if ch.is_terminal:  # the close was committed; only the row update was lost
                del self._channels[ch.channel_id]
                continue
            self._arm_timers(ch)
        log.info("hydrated %d live channels from %d envelopes", len(self._channels), folded)
        return folded

    # -- helpers ----------------------------------------------------------------------

    def spawn(self, coro: Any, name: str) -> asyncio.Task[Any]:
        """Run a background coroutine, keeping a reference and logging its failure."""
        task = asyncio.create_task(coro, name=name)
        self._background.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._background.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.error("background task %s failed", name, exc_info=t.exception())

        task.add_done_callback(done)
        return task

    def audit(self, kind: str, actor: str, subject: str, detail: dict[str, Any]) -> None:
        """Append an audit record (committed with the next group)."""
        self.store.submit(Writes(audit=[(kind, actor, subject, json.dumps(detail), self.clock())]))

    def name_for(self, agent_id: str) -> str:
        """Passport name of an agent id."""
        return self.registry.name_for(agent_id)

    def live_channel(self, channel_id: str) -> ChannelRuntime | None:
        """A live channel, if any."""
        return self._channels.get(channel_id)

    async def channel_meta(self, channel_id: str) -> channel_pb2.ChannelMetadata:
        """Metadata of a live or ended channel (NotFound otherwise)."""
        ch = self._channels.get(channel_id)
        if ch is not None:
            return ch.meta
        row = await self.store.get_channel(channel_id)
        if row is None:
            raise NotFound(f"no channel with id {channel_id!r}; list yours with ListChannels.")
        return channel_pb2.ChannelMetadata.FromString(row.record)

    async def require_member(self, agent_id: str, channel_id: str) -> channel_pb2.ChannelMetadata:
        """Metadata of a channel ``agent_id`` participates in (NotParticipant otherwise)."""
        meta = await self.channel_meta(channel_id)
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

    # -- admission --------------------------------------------------------------------

    async def post(
        self, sender_id: str, env: Envelope, *, event_data_json: str | None = None
    ) -> tuple[envelope_pb2.Envelope, bool]:
        """Admit ``env`` from ``sender_id`` and wait for its commit; returns (as written, duplicate)."""
        fut, wire, duplicate = await self.admit(sender_id, env, event_data_json=event_data_json)
        await fut
        return wire, duplicate

    async def admit(
        self, sender_id: str, env: Envelope, *, event_data_json: str | None = None
    ) -> tuple[asyncio.Future[None], envelope_pb2.Envelope, bool]:
        """Validate and append ``env``; returns (commit future, envelope as written, duplicate).

        ``event_data_json`` is the JSON text ``env.event_data`` was parsed from, if the
        caller has it (saves serialising it twice). Raises the domain error when refused
        (nothing is written then). Every refusal is audited as ``post_refused``.
        """
        try:
            return await self._admit(sender_id, env, event_data_json)
        except AgentNetError as err:
            self.audit(
                "post_refused",
                sender_id,
                env.channel_id,
                {"reason": err.reason, "event_type": env.event_type, "message": err.message},
            )
            raise

    async def _admit(
        self, sender_id: str, env: Envelope, event_data_json: str | None
    ) -> tuple[asyncio.Future[None], envelope_pb2.Envelope, bool]:
        check_shape(env)
        refuse_forged_dispatch(env)
        ch = await self._channel_for_post(sender_id, env.channel_id)
        async with ch.lock:
            if env.idempotency_key is not None:
                original = await self._idempotent(ch, sender_id, env.idempotency_key)
                if original is not None:
                    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                    done.set_result(None)
                    return done, original, True
            batch = Batch()
            wire = self.admission.admit(ch, sender_id, env, batch, event_data_json)
            fut = self._submit(ch, batch)
        return fut, wire, False

    async def _channel_for_post(self, sender_id: str, channel_id: str) -> ChannelRuntime:
        ch = self._channels.get(channel_id)
        if ch is None:
            meta = await self.channel_meta(channel_id)  # NotFound for unknown ids
            if all(p.agent_id != sender_id for p in meta.participants):
                raise NotParticipant(
                    f"you are not a participant of channel '{channel_id}'.", metadata={"channel_id": channel_id}
                )
            raise ChannelClosed(
                f"channel '{channel_id}' is closed (reason: {meta.close_reason or 'unknown'}); open a new channel.",
                metadata={"channel_id": channel_id, "reason": meta.close_reason},
            )
        if sender_id not in ch.participants:
            raise NotParticipant(
                f"you are not a participant of channel '{channel_id}'; only its participants may post.",
                metadata={"channel_id": channel_id},
            )
        return ch

    async def _idempotent(self, ch: ChannelRuntime, sender_id: str, key: str) -> envelope_pb2.Envelope | None:
        """The envelope admitted earlier under this key, among the channel's last 4096 keyed posts."""
        envelope_id = ch.idempotent.get((sender_id, key))
        if envelope_id is None:
            return None
        wire = ch.keyed_wires.get(envelope_id)
        if wire is not None:
            return wire
        data = await self.store.find_envelope(envelope_id)
        return envelope_pb2.Envelope.FromString(data) if data is not None else None

    def _submit(self, ch: ChannelRuntime, batch: Batch) -> asyncio.Future[None]:
        if batch.ended is not None:  # the channel's tasks end in the same bundle
            batch.writes.tasks.extend(self.tasks.end_for_channel(ch.channel_id, batch.ended))
        elif batch.opened:
            self._arm_ttl(ch)
        fut = self.store.submit(batch.writes)
        wires = batch.wires
        ended = batch.ended is not None

        def committed(f: asyncio.Future[None]) -> None:
            if f.cancelled() or f.exception() is not None:
                self.spawn(self._recover(ch), f"recover-{ch.channel_id}")
                return
            ch.committed_seq = max(ch.committed_seq, wires[-1].seq if wires else 0)
            self._deliver(ch, wires)
            if ended and self._channels.get(ch.channel_id) is ch:
                del self._channels[ch.channel_id]

        fut.add_done_callback(committed)
        return fut

    async def _recover(self, ch: ChannelRuntime) -> None:
        """A commit failed: rebuild the channel from what the store really holds."""
        async with ch.lock:
            row = await self.store.get_channel(ch.channel_id)
            if row is None:
                self._channels.pop(ch.channel_id, None)
                return
            fresh = ChannelRuntime.from_row(row)
            async for batch in self.store.scan_wal([ch.channel_id]):
                for _, data in batch:
                    fresh.fold(envelope_from_wire(envelope_pb2.Envelope.FromString(data)), self.clock())
            fresh.committed_seq = fresh.meta.last_seq = fresh.last_seq
            ch.cancel_timers()
            if fresh.is_terminal:
                self._channels.pop(ch.channel_id, None)
            else:
                self._channels[ch.channel_id] = fresh
                self._arm_timers(fresh)

    def _deliver(self, ch: ChannelRuntime, wires: list[envelope_pb2.Envelope]) -> None:
        self.sessions.deliver(ch, wires)
        watchers = list(self._watchers.get(ch.channel_id, ()))
        for wire in wires:
            for watcher in watchers:
                try:
                    watcher(wire)
                except Exception:
                    log.exception("channel watcher failed")

    # -- channels ---------------------------------------------------------------------

    async def open_channel(
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
    ) -> ChannelRuntime:
        """Create a PENDING channel and invite the targets (returns once the invites are committed)."""
        adapter = get_adapter(type)
        if not targets:
            raise InvalidArgument(f"a {type} channel needs at least one target; name who to invite.")
        members: list[str] = []
        for ref in targets:
            agent_id = self.registry.resolve(ref).agent_id
            if agent_id == initiator:
                raise InvalidArgument("you cannot invite yourself; name other agents as targets.")
            if agent_id not in members:
                members.append(agent_id)
        if ttl_seconds is not None and ttl_seconds <= 0:
            raise InvalidArgument("ttl_seconds must be positive; omit it for the hub's default.")
        timeout = self.options.invite_ack_timeout if invite_ack_timeout is None else invite_ack_timeout
        if timeout <= 0:
            raise InvalidArgument("invite_ack_timeout_seconds must be positive.")
        participants = (initiator, *members)
        names = {a: self.registry.name_for(a) for a in participants}
        channel_id = new_id()
        spec = ChannelSpec(
            channel_id=channel_id,
            type=adapter.type,
            initiator=initiator,
            participants=participants,
            names=names,
            knobs=parse_json_object(knobs_json, "knobs_json"),
        )
        spec = dataclasses.replace(spec, knobs=adapter.validate_create(spec))
        now = self.clock()
        ttl = ttl_seconds if ttl_seconds is not None else self.options.default_channel_ttl
        if seed is not None:
            seed = dataclasses.replace(seed, channel_id=channel_id)
            check_shape(seed)
        ch = ChannelRuntime.pending(
            spec, adapter, intent=intent, invite_ack_timeout=timeout, ttl=ttl, now=now, seed=seed
        )
        self._channels[channel_id] = ch
        async with ch.lock:
            batch = Batch()
            batch.writes.channels.append(ch.to_row())
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
                self.admission.post_as_hub(ch, EV_CHANNEL_INVITE, invite, [target], batch)
            batch.writes.audit.append(
                ("channel_created", initiator, channel_id, json.dumps({"type": adapter.type}), now)
            )
            fut = self._submit(ch, batch)
            self._arm_timers(ch)
        await fut
        return ch

    async def wait_channel(
        self, channel_id: str, until: Callable[[channel_pb2.ChannelMetadata], bool], timeout: float
    ) -> channel_pb2.ChannelMetadata:
        """Wait until ``until(metadata)`` holds after a committed envelope (or the timeout passes)."""

        def settled() -> bool:
            # The awaited state may be folded but not committed yet; wait for the commit too.
            ch = self._channels.get(channel_id)
            return ch is None or ch.committed_seq >= ch.last_seq

        meta = await self.channel_meta(channel_id)
        if until(meta) and settled():
            return meta
        changed = asyncio.Event()
        unsubscribe = self.watch(channel_id, lambda _wire: changed.set())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            while True:
                meta = await self.channel_meta(channel_id)
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

    async def close_channel(self, caller: str, channel_id: str, reason: str = "") -> channel_pb2.ChannelMetadata:
        """Close a channel the caller participates in."""
        await self.require_member(caller, channel_id)
        ch = self._channels.get(channel_id)
        if ch is None:
            return await self.channel_meta(channel_id)  # already ended: closing is idempotent
        async with ch.lock:
            batch = Batch()
            self.admission.end(ch, reason or "closed_by_agent", batch, detail={"closed_by": caller})
            fut = self._submit(ch, batch)
        await fut
        return ch.meta

    def _arm_timers(self, ch: ChannelRuntime) -> None:
        loop = asyncio.get_running_loop()
        now = self.clock()
        if ch.meta.state == PENDING:
            deadline = from_timestamp(ch.meta.created_at) + ch.meta.invite_ack_timeout_seconds
            ch.timers.append(
                loop.call_later(
                    max(0.0, deadline - now),
                    lambda: self.spawn(self._expire(ch.channel_id, "invite_timeout", False), "invite-timeout"),
                )
            )
        self._arm_ttl(ch)

    def _arm_ttl(self, ch: ChannelRuntime) -> None:
        if not ch.meta.HasField("expires_at"):
            return
        delay = max(0.0, from_timestamp(ch.meta.expires_at) - self.clock())
        ch.timers.append(
            asyncio.get_running_loop().call_later(
                delay, lambda: self.spawn(self._expire(ch.channel_id, "ttl", True), "channel-ttl")
            )
        )

    async def _expire(self, channel_id: str, reason: str, expired: bool) -> None:
        ch = self._channels.get(channel_id)
        if ch is None:
            return
        async with ch.lock:
            if ch.is_terminal or (reason == "invite_timeout" and ch.meta.state != PENDING):
                return
            batch = Batch()
            self.admission.end(ch, reason, batch, expired=expired)
            fut = self._submit(ch, batch)
        await fut

    def can_send(self, caller: str, channel_id: str, event_type: str) -> tuple[bool, AgentNetError | None, list[str]]:
        """Would a post of ``event_type`` by ``caller`` pass now? (allowed, refusal, expected_next)."""
        ch = self._channels.get(channel_id)
        probe = Envelope(
            channel_id=channel_id, sender_id=caller, audience=None, event_type=event_type or EV_TEXT, event_data={}
        )
        if ch is None:
            return False, ChannelClosed(f"channel '{channel_id}' is not live (closed, expired or unknown)."), []
        expected = ch.adapter.expected_next(ch.spec, ch.state) if ch.meta.state == OPENED else []
        if caller not in ch.participants:
            return False, NotParticipant(f"you are not a participant of channel '{channel_id}'."), expected
        try:
            self.admission.validate(ch, caller, probe)
        except AgentNetError as err:
            return False, err, expected
        return True, None, expected

    async def _sweep_loop(self) -> None:
        while True:
            await asyncio.sleep(self.options.sweep_interval)
            rows = self.tasks.expire_due()
            if rows:
                await self.store.commit(Writes(tasks=rows))

    # -- reads ------------------------------------------------------------------------

    async def read_wal(
        self, caller: str, channel_id: str, from_seq: int = 0, until_seq: int = 0, limit: int = 0
    ) -> list[envelope_pb2.Envelope]:
        """The caller-visible part of a seq range of the channel's WAL."""
        await self.require_member(caller, channel_id)
        ch = self._channels.get(channel_id)
        ceiling = ch.committed_seq if ch is not None else 0
        if ch is not None:
            until_seq = min(until_seq, ceiling) if until_seq else ceiling
            if until_seq == 0:
                return []
        out: list[envelope_pb2.Envelope] = []
        next_seq = max(from_seq, 1)
        while True:
            page = await self.store.read_wal(channel_id, next_seq, until_seq, 1000)
            for data in page:
                wire = envelope_pb2.Envelope.FromString(data)
                next_seq = wire.seq + 1
                if wire_readable_by(wire, caller):
                    out.append(wire)
                    if limit and len(out) >= limit:
                        return out
            if len(page) < 1000:
                return out

    # -- identity convenience ---------------------------------------------------------

    async def register(
        self,
        passport: identity_pb2.Passport,
        resume: identity_pb2.Resume,
        skill_md: str | None,
        a2a: a2a_pb2.A2ASettings | None,
        *,
        human: bool,
    ) -> tuple[identity_pb2.AgentRecord, str]:
        """Register an agent / remote agent (``human=False``) or a human (``human=True``)."""
        if human:
            if passport.kind not in (identity_pb2.PASSPORT_KIND_UNSPECIFIED, identity_pb2.PASSPORT_KIND_HUMAN):
                raise InvalidArgument("RegisterHuman registers kind human only; use Register for agents.")
            passport.kind = identity_pb2.PASSPORT_KIND_HUMAN
        elif passport.kind == identity_pb2.PASSPORT_KIND_HUMAN:
            raise InvalidArgument(
                "Register refuses kind human: register non-LLM participants with RegisterHuman "
                "(hc.register_human(Passport(name=..., kind='human')) in the Python SDK)."
            )
        return await self.registry.register(passport, resume, skill_md, a2a)

    async def unregister(self, agent_id: str) -> list[str]:
        """Remove an identity; its live channels close with reason "participant_left"."""
        closed = []
        for ch in [c for c in self._channels.values() if agent_id in c.participants]:
            async with ch.lock:
                if ch.is_terminal:
                    continue
                batch = Batch()
                self.admission.end(ch, "participant_left", batch, detail={"agent_id": agent_id})
                fut = self._submit(ch, batch)
            await fut
            closed.append(ch.channel_id)
        self.sessions.close(agent_id, Unavailable("this identity was unregistered."))
        await self.registry.unregister(agent_id)
        return closed
