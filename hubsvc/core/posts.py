"""A participant's post, from the RPC or Connect frame to a committing batch.

The arbiter (if any) is asked first, and a cause the channel's memory lacks is read for the
post's depth (both await, so both come before the lock); then, under the channel's lock,
either the answer to an idempotent retry or the one admission call,
:meth:`Admission.admit <hubsvc.core.admission.Admission.admit>` (screen, membership, the
channel's rules, inbox, rate, stage); then the batch is submitted and the lock released, so
many posts share one transaction (group commit). A post is answered, and delivered to anyone,
only once its write is committed; one whose write lost a race to another replica is admitted
again by :meth:`Posts.post`, the one retry loop (a Connect post's lost race is handed to it
too). Every refusal is audited as ``post_refused``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from agentnet.v1 import envelope_pb2
from opentelemetry import trace

from hubsvc.adapters.common import require_participant
from hubsvc.core.admission import Admission, Batch
from hubsvc.core.channel import ChannelRuntime
from hubsvc.core.live_channels import LiveChannels
from hubsvc.core.placement import not_held
from hubsvc.recorder import NO_RECORDER, Recorder
from hubsvc.storage import HubStore
from netkernel.envelope import EV_TEXT, Envelope
from netkernel.errors import (
    AgentNetError,
    ChannelClosed,
    LostRace,
    NotFound,
    NotYourTurn,
    ProtocolError,
    RateLimited,
)
from netkernel.tracecontext import context_of, traceparent_of

Audit = Callable[[str, str, str, dict[str, Any]], None]
GovernPost = Callable[[str, Envelope, ChannelRuntime | None], Awaitable[None]]
"""The arbiter's say on a post (sender, envelope, live channel); raises the refusal."""
Admitted = tuple[asyncio.Future[None], envelope_pb2.Envelope, bool]
"""An admitted post: its commit future, the envelope as written, and whether it was a retry (duplicate)."""
_MAYBE_STALE = (NotYourTurn, ChannelClosed, NotFound, ProtocolError)
"""Refusals that depend on the channel's state (which a replica's copy may not have caught up with)."""
MAX_READMISSIONS = 8
"""Times :meth:`Posts.post` admits a post whose write keeps losing races to other replicas."""


class Posts:
    """Admits participants' envelopes into live channels."""

    def __init__(
        self,
        store: HubStore,
        channels: LiveChannels,
        admission: Admission,
        audit: Audit,
        *,
        govern: GovernPost | None = None,
        recorder: Recorder = NO_RECORDER,
        tracer: trace.Tracer | None = None,
    ) -> None:
        self._store = store
        self._recorder = recorder
        """Told each admission and refusal (hubsvc/metrics.py)."""
        self._tracer = tracer
        """Records the admission and commit spans of each post (None: tracing off)."""
        self._channels = channels
        self._placement = channels.placement
        self._admission = admission
        self._audit = audit
        self._govern = govern

    async def post(
        self,
        sender_id: str,
        env: Envelope,
        *,
        event_data_json: str | None = None,
        admitted: Admitted | None = None,
    ) -> tuple[envelope_pb2.Envelope, bool]:
        """Admit ``env`` from ``sender_id`` and wait for its commit; returns (as written, duplicate).

        A post whose write lost a race to another replica (:class:`LostRace`: nothing of it was
        stored) is admitted again once the channel is rebuilt from the store, so it is checked
        against the state that won: admitted after it, refused (say NOT_YOUR_TURN), or answered
        as the duplicate of the same idempotency key posted through the other replica — at most
        :data:`MAX_READMISSIONS` admissions in all. This is the hub's one lost-race retry loop:
        ``admitted`` is the post's first admission when the caller made it already (a Connect
        post, admitted by :meth:`admit` or :meth:`admit_many`, whose commit lost a race).
        """
        for attempt in range(1, MAX_READMISSIONS + 1):
            if admitted is None:
                fut, wire, duplicate = await self.admit(sender_id, env, event_data_json=event_data_json)
            else:
                (fut, wire, duplicate), admitted = admitted, None
            try:
                await fut
            except LostRace:
                if attempt == MAX_READMISSIONS:
                    raise
                continue
            return wire, duplicate
        raise AssertionError("unreachable")

    async def admit(
        self, sender_id: str, env: Envelope, *, event_data_json: str | None = None
    ) -> tuple[asyncio.Future[None], envelope_pb2.Envelope, bool]:
        """Admit ``env`` (the arbiter's say, then the idempotent original or
        :meth:`Admission.admit <hubsvc.core.admission.Admission.admit>` under the channel's lock) and
        submit its batch; returns (commit future, envelope as written, duplicate).

        ``event_data_json`` is the JSON text ``env.event_data`` was parsed from, if the
        caller has it (saves serialising it twice). Raises the domain error when refused
        (nothing is written then). Every refusal is audited as ``post_refused``, except
        RATE_LIMITED, which the rate limiter audits itself (throttled, for every path).
        """
        if self._tracer is not None:
            return await self._traced_admit(self._tracer, sender_id, env, event_data_json)
        return await self._admit_once(sender_id, env, event_data_json)

    async def _admit_once(
        self, sender_id: str, env: Envelope, event_data_json: str | None
    ) -> tuple[asyncio.Future[None], envelope_pb2.Envelope, bool]:
        """:meth:`admit` without its spans."""
        self._placement.require(env.channel_id)  # another replica's channel: forwarded there, not refused here
        try:
            if self._govern is not None:
                await self._govern(sender_id, env, self._channels.get(env.channel_id))
            shared = self._store.feed is not None
            seen = self._channels.known_seq(env.channel_id) if shared else 0
            try:
                return await self._admit(sender_id, env, event_data_json)
            except _MAYBE_STALE:
                # On a store shared by replicas this replica's copy of the channel may lag what
                # another one committed (the change feed has not told it yet): a refusal that
                # depends on the channel's state is only given once the copy is current. The
                # copy may also have caught up from the feed since it refused (the store then
                # holds no more than it): the post is admitted again on the newer copy.
                if not shared:
                    raise
                behind = await self._channels.refresh_if_behind(env.channel_id)
                if not behind and self._channels.known_seq(env.channel_id) == seen:
                    raise
            return await self._admit(sender_id, env, event_data_json)
        except Exception as err:
            self._refused(sender_id, env, err)
            raise

    async def admit_many(
        self, sender_id: str, posts: Sequence[tuple[Envelope, str | None]]
    ) -> list[Admitted | Exception]:
        """Admit ``posts`` ((envelope, its event_data JSON or None)) in order, each exactly as
        :meth:`admit` would; returns each one's outcome, a refusal as its exception (audited
        like :meth:`admit`'s). A refusal does not stop the posts after it.

        Cheaper than one :meth:`admit` per post: a run of consecutive posts into the same
        channel is admitted under one hold of the channel's lock and staged into one
        :class:`Batch` (one store bundle, one commit future). With an arbiter configured each
        post is asked and admitted on its own, since the arbiter's answer is awaited.
        """
        outcomes: list[Admitted | Exception] = []
        if self._govern is not None or self._tracer is not None:  # each post asked / traced on its own
            for env, raw in posts:
                try:
                    outcomes.append(await self.admit(sender_id, env, event_data_json=raw))
                except Exception as err:
                    outcomes.append(err)
            return outcomes
        start = 0
        while start < len(posts):
            end = start + 1
            channel_id = posts[start][0].channel_id
            while end < len(posts) and posts[end][0].channel_id == channel_id:
                end += 1
            outcomes.extend(await self._admit_run(sender_id, channel_id, posts[start:end]))
            start = end
        return outcomes

    async def _traced_admit(
        self, tracer: trace.Tracer, sender_id: str, env: Envelope, event_data_json: str | None
    ) -> tuple[asyncio.Future[None], envelope_pb2.Envelope, bool]:
        """:meth:`admit` inside the post's admission span, with a commit span from submit to commit.

        The span is a child of the context the envelope's ``trace_id`` carries (a W3C traceparent),
        or of the current one. An envelope without a ``trace_id``, or with a traceparent, is
        written carrying the admission span's traceparent (as any participant of a trace updates
        the parent id), so its deliveries, read live or later from the WAL, continue the trace;
        any other ``trace_id`` is the client's own and is written unchanged.
        """
        parent = context_of(env.trace_id)
        span = tracer.start_span(
            "agentnet.hub.post",
            context=parent,
            kind=trace.SpanKind.SERVER,
            attributes={
                "agentnet.channel_id": env.channel_id,
                "agentnet.event_type": env.event_type,
                "agentnet.sender_id": sender_id,
            },
        )
        if env.trace_id is None or parent is not None:
            env.trace_id = traceparent_of(span) or env.trace_id
        try:
            fut, wire, duplicate = await self._admit_once(sender_id, env, event_data_json)
        except Exception as err:
            reason = err.reason if isinstance(err, AgentNetError) else "INTERNAL"
            span.set_attribute("agentnet.refused", reason)
            span.set_status(trace.StatusCode.ERROR, reason)
            span.end()
            raise
        span.set_attributes(
            {"agentnet.seq": wire.seq, "agentnet.envelope_id": wire.envelope_id, "agentnet.duplicate": duplicate}
        )
        commit = tracer.start_span("agentnet.hub.commit", context=trace.set_span_in_context(span))

        def committed(f: asyncio.Future[None]) -> None:
            error = None if f.cancelled() else f.exception()
            if f.cancelled() or error is not None:
                reason = error.reason if isinstance(error, AgentNetError) else "CANCELLED"
                for s in (commit, span):
                    s.set_status(trace.StatusCode.ERROR, reason)
            commit.end()
            span.end()

        fut.add_done_callback(committed)
        return fut, wire, duplicate

    def _refused(self, sender_id: str, env: Envelope, err: Exception) -> Exception:
        """Audit a refused post as ``post_refused`` (not RATE_LIMITED: the limiter audits it); returns ``err``."""
        self._recorder.refused(err.reason if isinstance(err, AgentNetError) else "INTERNAL")
        if isinstance(err, AgentNetError) and not isinstance(err, RateLimited):
            detail = {"reason": err.reason, "event_type": env.event_type, "message": err.message}
            if "rule" in err.metadata:  # a governance refusal: which rule, and which part of it
                detail.update(rule=err.metadata["rule"], check=err.metadata.get("check", ""))
            self._audit("post_refused", sender_id, env.channel_id, detail)
        return err

    async def inherit_depth(self, env: Envelope) -> None:
        """Raise ``env.depth`` to its cause's when the cause is not in its channel's recent memory.

        A reply carries at least the depth of the envelope it answers (the seed's "reply path").
        Admission takes that from the channel's memory (``ChannelRuntime.depths``: its last
        envelopes); a cause in another channel (``say`` into another channel while answering a
        delegated question), or older than that memory, is read here, before the channel's lock:
        one lookup by envelope id. An unknown cause changes nothing, and so does any cause of an
        envelope of negative depth (admission's screen refuses it as such)."""
        cause = env.causation_id
        if not cause or env.depth < 0:
            return
        ch = self._channels.get(env.channel_id)
        if ch is not None and cause in ch.depths:
            return
        data = await self._store.find_envelope(cause)
        if data is not None:
            env.depth = max(env.depth, envelope_pb2.Envelope.FromString(data).depth)

    async def _admit(
        self, sender_id: str, env: Envelope, event_data_json: str | None
    ) -> tuple[asyncio.Future[None], envelope_pb2.Envelope, bool]:
        await self.inherit_depth(env)
        async with self._channels.locked(env.channel_id) as ch:  # waits out a rebuild after a failed write
            if ch is None:
                raise await self._not_live(sender_id, env, event_data_json)
            batch = Batch()
            earlier, wire, duplicate = await self._stage(ch, sender_id, env, event_data_json, batch, None)
            fut = earlier if earlier is not None else self._channels.commit(ch, batch)
            self._recorder.admitted(1, int(duplicate))
            return fut, wire, duplicate

    async def _admit_run(
        self,
        sender_id: str,
        channel_id: str,
        run: Sequence[tuple[Envelope, str | None]],
        *,
        indexes: list[int] | None = None,
        rechecked: bool = False,
    ) -> list[Admitted | Exception]:
        """Admit posts into one channel under one hold of its lock, staged into one batch.

        ``indexes``: the posts of ``run`` to admit (None: all of them; the outcomes returned are
        theirs, in order). A refusal that may come from this replica's stale copy of the channel
        stops the run there; the rest is admitted again once the copy is refreshed (see
        :meth:`_admit_once`).
        """
        if indexes is None:
            indexes = list(range(len(run)))
        if not self._placement.holds(channel_id):  # another replica's channel: forwarded there, not refused here
            moved = not_held(channel_id)
            return [moved for _ in indexes]
        outcomes: list[Admitted | Exception | None] = [None] * len(run)
        staged: list[tuple[int, envelope_pb2.Envelope, bool]] = []
        """Posts answered by this batch's commit: (index, envelope as written, duplicate)."""
        stale_at: int | None = None
        """Where a refusal stopped the run that a fresher copy of the channel might not give."""
        for i in indexes:
            await self.inherit_depth(run[i][0])
        batch = Batch()
        keyed: dict[str, envelope_pb2.Envelope] = {}
        async with self._channels.locked(channel_id) as live:
            stored = await self._stored_originals(live, sender_id, [run[i][0] for i in indexes])
            for n, i in enumerate(indexes):
                env, raw = run[i]
                try:
                    if live is None:
                        raise await self._not_live(sender_id, env, raw)
                    earlier, wire, duplicate = await self._stage(live, sender_id, env, raw, batch, keyed, stored)
                except _MAYBE_STALE as err:
                    if self._store.feed is not None and not rechecked:
                        stale_at = n
                        break
                    outcomes[i] = self._refused(sender_id, env, err)
                    continue
                except Exception as err:
                    outcomes[i] = self._refused(sender_id, env, err)
                    continue
                if earlier is None:
                    staged.append((i, wire, duplicate))
                else:
                    outcomes[i] = (earlier, wire, duplicate)
            if staged:
                assert live is not None  # something was staged into it
                try:
                    fut = self._channels.commit(live, batch)
                except Exception as err:
                    for i, _, _ in staged:
                        outcomes[i] = err
                else:
                    for i, wire, duplicate in staged:
                        outcomes[i] = (fut, wire, duplicate)
        admitted = [outcome for outcome in outcomes if isinstance(outcome, tuple)]
        if admitted:
            self._recorder.admitted(len(admitted), sum(duplicate for _, _, duplicate in admitted))
        if stale_at is not None:
            # Posts from the one refused on: again, on a fresh copy if the store was ahead (else
            # the refusal stands and is given again, and the posts after it go on as usual).
            rest = indexes[stale_at:]
            behind = await self._channels.refresh_if_behind(channel_id)
            again = await self._admit_run(sender_id, channel_id, run, indexes=rest, rechecked=not behind)
            for i, outcome in zip(rest, again, strict=True):
                outcomes[i] = outcome
        return [outcome for outcome in outcomes if outcome is not None]

    async def _stage(
        self,
        ch: ChannelRuntime,
        sender_id: str,
        env: Envelope,
        event_data_json: str | None,
        batch: Batch,
        keyed: dict[str, envelope_pb2.Envelope] | None,
        stored: dict[str, bytes | None] | None = None,
    ) -> tuple[asyncio.Future[None] | None, envelope_pb2.Envelope, bool]:
        """Under ``ch``'s lock: the original of an idempotent retry (with its commit future), or
        ``env`` admitted (:meth:`Admission.admit <hubsvc.core.admission.Admission.admit>`) and staged
        into ``batch`` (future None: the batch's commit answers it).

        ``keyed`` collects the keyed envelopes already staged into ``batch`` by envelope id, so
        a retry of one of them in the same batch is its duplicate (None: ``batch`` is fresh).
        ``stored``: the store's answer for the run's keys, asked at once (:meth:`_stored_originals`; a
        key in neither it nor the window is new), or None when nothing was asked for the run."""
        key = env.idempotency_key
        if key is not None:
            window = ch.idempotent
            envelope_id = window.get((sender_id, key))
            if envelope_id is not None and keyed and envelope_id in keyed:
                return None, keyed[envelope_id], True
            if envelope_id is not None or (
                key in stored if stored is not None else window.may_have_forgotten((sender_id, key))
            ):  # else: a new key
                original = await self._idempotent(ch, sender_id, key, stored)
                if original is not None:
                    return original[0], original[1], True
        # The rate token's grant, once the channel is known here and the post is no duplicate (either
        # takes none): under the lock, so the admission below finds it.
        await self._admission.prepare(sender_id, recipients=ch.participants)
        wire = self._admission.admit(ch, sender_id, env, batch, event_data_json)
        if key is not None and keyed is not None:
            keyed[wire.envelope_id] = wire
        return None, wire, False

    async def _not_live(self, sender_id: str, env: Envelope, event_data_json: str | None) -> AgentNetError:
        """Why a post into a channel that is not live here is refused: a malformed envelope as such
        (admission's screen, as for a live channel), an unknown channel NotFound, a non-participant
        NotParticipant, else the channel is closed."""
        self._admission.screen(env, event_data_json)
        channel_id = env.channel_id
        meta = await self._channels.meta(channel_id)  # NotFound for unknown ids
        require_participant(sender_id, [p.agent_id for p in meta.participants], channel_id, "post")
        return ChannelClosed(
            f"channel '{channel_id}' is closed (reason: {meta.close_reason or 'unknown'}); open a new channel.",
            metadata={"channel_id": channel_id, "reason": meta.close_reason},
        )

    async def _stored_originals(
        self, ch: ChannelRuntime | None, sender_id: str, envs: Sequence[Envelope]
    ) -> dict[str, bytes | None] | None:
        """Under ``ch``'s lock, before a run is staged: once the channel's window of keys has forgotten
        one, the run's keys the window misses and may have forgotten, each with the envelope the store
        holds under it (None: a new key), asked in one lookup; a key of the run in neither the window
        nor the answer is new. None: the window has forgotten no key (nothing asked). A run of 256
        keyed posts costs at most one store query, and none when the window's filter of forgotten
        keys proves them all new (:mod:`hubsvc.core.key_window`)."""
        if ch is None or not ch.idempotent.evicted:
            return None
        window = ch.idempotent
        keys = [
            key
            for env in envs
            if (key := env.idempotency_key) is not None
            and (sender_id, key) not in window
            and window.may_have_forgotten((sender_id, key))
        ]
        if not keys:
            return {}
        found = await self._store.find_idempotent_many(ch.channel_id, sender_id, keys)
        return {key: found.get(key) for key in keys}

    async def _idempotent(
        self, ch: ChannelRuntime, sender_id: str, key: str, stored: dict[str, bytes | None] | None = None
    ) -> tuple[asyncio.Future[None], envelope_pb2.Envelope] | None:
        """(commit future, envelope) admitted earlier under this key, or None for a new key.

        Exact for as long as the store keeps the WAL row: memory answers for the channel's
        last 4096 keyed posts; once that window has forgotten a key, a miss it may have forgotten
        (:mod:`hubsvc.core.key_window`) is asked of the store (or read from ``stored``, the store's
        answer for the whole run asked before it was staged). A retry of a post still in flight
        shares its commit future: it is answered only once the original commits (and fails if
        that fails).
        """
        envelope_id = ch.idempotent.get((sender_id, key))
        if envelope_id is not None:
            pending = ch.in_flight.get(envelope_id)
            if pending is not None:
                return pending[1], pending[0]
            wire = ch.keyed_wires.get(envelope_id)
            data = None if wire is not None else await self._store.find_envelope(envelope_id)
        elif ch.idempotent.may_have_forgotten((sender_id, key)):
            wire = None
            if stored is not None and key in stored:  # asked before the run was staged, under this lock hold
                data = stored[key]
            else:
                data = await self._store.find_idempotent(ch.channel_id, sender_id, key)
        else:
            return None  # the window holds every key of this channel: a miss is a new key
        if wire is None:
            if data is None:
                return None
            wire = envelope_pb2.Envelope.FromString(data)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done, wire

    async def can_send(
        self, caller: str, channel_id: str, event_type: str, causation_id: str = ""
    ) -> tuple[bool, AgentNetError | None, list[str]]:
        """Would a post of ``event_type`` by ``caller`` (answering ``causation_id``) pass now?
        (allowed, refusal, expected_next). :meth:`refusal`, then the arbiter as for the post.
        PartitionMoved when another replica holds the channel (the servicer asks that one)."""
        self._placement.require(channel_id)
        probe = _probe(caller, channel_id, event_type, causation_id)
        await self.inherit_depth(probe)
        refusal = self.refusal(caller, probe)
        ch = self._channels.get(channel_id)
        if refusal is None and self._govern is not None:
            try:
                await self._govern(caller, probe, ch)
            except AgentNetError as err:
                refusal = err
        return refusal is None, refusal, ch.expected_next() if ch is not None else []

    def refusal(self, caller: str, probe: Envelope) -> AgentNetError | None:
        """Why ``probe`` (from :func:`_probe`) would be refused now (None: it would pass): admission's
        membership and channel rules (:meth:`Admission.validate <hubsvc.core.admission.Admission.validate>`,
        the delegation depth among them), as :meth:`can_send` answers (also each delivery's ``can_send``)."""
        channel_id = probe.channel_id
        ch = self._channels.get(channel_id)
        if ch is None:
            return ChannelClosed(f"channel '{channel_id}' is not live (closed, expired or unknown).")
        try:
            self._admission.validate(ch, caller, probe)
        except AgentNetError as err:
            return err
        return None

    def reply_refusal(self, caller: str, channel_id: str, causation_id: str) -> AgentNetError | None:
        """:meth:`refusal` of an ag2.msg.text reply to ``causation_id`` (each delivery's ``can_send``)."""
        return self.refusal(caller, _probe(caller, channel_id, EV_TEXT, causation_id))


def _probe(caller: str, channel_id: str, event_type: str, causation_id: str) -> Envelope:
    """The post CanSend asks about: ``event_type`` (default ag2.msg.text) answering ``causation_id``."""
    return Envelope(
        channel_id=channel_id,
        sender_id=caller,
        audience=None,
        event_type=event_type or EV_TEXT,
        event_data={},
        causation_id=causation_id or None,
    )
