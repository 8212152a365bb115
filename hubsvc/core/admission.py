"""Admission: the one call that turns a client's envelope into a WAL entry of a live channel.

:meth:`Admission.admit` is the seam every envelope an identity originates passes, whatever
the path — a post (PostEnvelope, a Connect ``Post`` or a ``PostBatch``'s run, Say, a task's
cancel request, CallTool actions that post, invite acks) through :mod:`hubsvc.core.posts`,
and the seed of a channel being opened (OpenChannel's message or seed envelope, Delegate's
prompt, InvokeAgent's question) through :mod:`hubsvc.core.live_channels.lifecycle`:

``screen → membership → the channel's rules (sender, audience, depth, lifecycle, adapter) →
inbox cap → rate token → stamp (seq, id, time) → fold → stage``

each check written once, here or in the governance module it names (the depth rule is
:func:`hubsvc.governance.checks.check_depth`, the inbox cap :mod:`hubsvc.governance.inbox`, the
rate buckets :mod:`hubsvc.governance.rate`). The rate token is taken last, once nothing else
can refuse the envelope, so a refused envelope takes none; it is noted in the
:class:`Batch`'s ``charged`` and given back (:meth:`Admission.refund`) if the commit stores
nothing. Admission also stages what an admitted envelope does to the channel's lifecycle:
the last invite ack opens the channel (and posts its seed), a reject or the adapter's word
ends it. Everything here runs under the channel's lock, does no I/O and never awaits: what
it decides is staged in a :class:`Batch`, which the caller submits as one store bundle (so
admission order is WAL order). Tests drive it directly over a :class:`ChannelRuntime`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Iterable
from typing import Any, Literal, overload

from agentnet.v1 import envelope_pb2

from hubsvc.adapters.common import not_participant
from hubsvc.core.channel import HUB_SENDER, PENDING, TERMINAL, ChannelRuntime
from hubsvc.core.options import HubOptions
from hubsvc.core.util import Clock, check_seconds, iso_z, next_envelope_id, stamp_time
from hubsvc.governance.checks import check_depth
from hubsvc.governance.inbox import Inboxes
from hubsvc.governance.inbox_share import SharedInboxes
from hubsvc.governance.rate import RateLimiter
from hubsvc.storage import WalRow, Writes, nothing_stored
from netkernel.envelope import (
    EV_CHANNEL_CLOSED,
    EV_CHANNEL_EXPIRED,
    EV_CHANNEL_INVITE_ACK,
    EV_CHANNEL_INVITE_REJECT,
    EV_CHANNEL_OPENED,
    EV_TEXT,
    LIFECYCLE_EVENT_TYPES,
    Envelope,
)
from netkernel.errors import (
    AgentNetError,
    ChannelClosed,
    InvalidArgument,
    PayloadTooLarge,
    PermissionDenied,
    ProtocolError,
)
from netkernel.images import check_images
from netkernel.wire import dumps_json, envelope_to_wire

log = logging.getLogger("agentnet.hub")

_CLIENT_LIFECYCLE = frozenset({EV_CHANNEL_INVITE_ACK, EV_CHANNEL_INVITE_REJECT})
"""The lifecycle event types a participant may post (answering its invite)."""


@dataclasses.dataclass
class Batch:
    """What one lock hold of a channel staged: writes committed together, and their effects."""

    writes: Writes = dataclasses.field(default_factory=Writes)
    wires: list[envelope_pb2.Envelope] = dataclasses.field(default_factory=list)
    """The staged envelopes as written, in seq order (delivered once the batch commits)."""
    opened: bool = False
    """The channel opened in this batch (its TTL timer is armed when the batch is submitted)."""
    ended: str | None = None
    """The reason the channel ended in this batch (its tasks end in the same commit)."""
    charged: list[str] = dataclasses.field(default_factory=list)
    """The sender of each staged envelope that took a rate token (given back if nothing is stored)."""


def check_shape(env: Envelope, options: HubOptions) -> None:
    """Refuse an envelope whose fields are malformed regardless of the channel."""
    if not env.channel_id:
        raise InvalidArgument("envelope.channel_id is empty; set the channel to post to.")
    if not env.event_type or len(env.event_type) > 200:
        raise InvalidArgument("envelope.event_type must be 1-200 characters, e.g. 'ag2.msg.text' or 'myapp.event'.")
    if env.ttl_seconds is not None:
        check_seconds(env.ttl_seconds, "envelope.ttl_seconds", options.max_ttl_seconds, absent="the channel's expiry")
    if env.depth < 0:
        raise InvalidArgument("envelope.depth must not be negative.")


def refuse_forged_dispatch(env: Envelope) -> None:
    """Only the hub writes A2A dispatches (InvokeAgent's question), so a callee can trust them."""
    a2a = env.event_data.get("a2a") if env.event_type == EV_TEXT else None
    if isinstance(a2a, dict) and "execution_id" in a2a:
        raise InvalidArgument(
            "event_data.a2a with an execution_id is an A2A dispatch, which only the hub writes; call agents with "
            "InvokeAgent. A reply's event_data.a2a holds only 'status' and 'error'.",
            metadata={"field": "event_data.a2a"},
        )


class Admission:
    """The admission of envelopes into live channels; the caller holds the channel's lock."""

    def __init__(
        self,
        options: HubOptions,
        clock: Clock,
        inboxes: Inboxes | None = None,
        rate: RateLimiter | None = None,
        *,
        depth_limit: Callable[[str], tuple[int, str]] | None = None,
    ) -> None:
        self.options = options
        self.clock = clock
        self.inboxes = inboxes
        """The inbox caps, and the count of every staged envelope for its recipients (None in tests that
        drive admission alone: no cap, nothing counted)."""
        self.rate = rate
        """The senders' rate buckets (None in tests that drive admission alone: no limit)."""
        self.shared_inboxes: SharedInboxes | None = None
        """The inbox counts of the other replicas, when they divide the channels (set by the hub)."""
        self.depth_limit = depth_limit or (lambda sender_id: (options.max_depth, ""))
        """The deepest envelope a sender may post, and the governance rule that set it ("" = the hub's limit)."""

    def screen(self, env: Envelope, event_data_json: str | None = None) -> None:
        """The checks of the envelope itself, before anything of its channel is asked (the first step
        of :meth:`admit`). Stateless: shape, size, and no forged A2A dispatch; images a text or packet
        carries are checked here too (:mod:`netkernel.images`)."""
        check_shape(env, self.options)
        raw = event_data_json if event_data_json is not None else dumps_json(env.event_data)
        limit = self.options.max_event_data_bytes
        if len(raw) > limit // 4 and len(raw.encode()) > limit:
            raise PayloadTooLarge(
                f"event_data is larger than {self.options.max_event_data_bytes} bytes; store big content in the "
                "knowledge service and send a reference.",
                metadata={"limit": str(self.options.max_event_data_bytes)},
            )
        refuse_forged_dispatch(env)
        check_images(env.event_type, env.event_data)

    @overload
    def admit(
        self, ch: ChannelRuntime, sender_id: str, env: Envelope, batch: Batch, event_data_json: str | None = None
    ) -> envelope_pb2.Envelope: ...

    @overload
    def admit(
        self,
        ch: ChannelRuntime,
        sender_id: str,
        env: Envelope,
        batch: Batch,
        event_data_json: str | None = None,
        *,
        seed: Literal[True],
    ) -> None: ...

    def admit(
        self,
        ch: ChannelRuntime,
        sender_id: str,
        env: Envelope,
        batch: Batch,
        event_data_json: str | None = None,
        *,
        seed: bool = False,
    ) -> envelope_pb2.Envelope | None:
        """Admit ``env`` from ``sender_id`` into ``ch``: screen, membership and the channel's rules
        (:meth:`validate`), the recipients' inbox caps, the sender's rate token (last), then stamp,
        fold and stage it into ``batch`` with its lifecycle and adapter effects; returns it as written.

        Raises the domain error when refused; nothing is staged or taken then. ``event_data_json``
        is the JSON text ``env.event_data`` was parsed from, if the caller has it (saves
        serialising it twice). ``seed``: ``env`` is the seed of ``ch``, a channel being opened
        (PENDING, its sender the initiator): it is held as ``ch.seed`` instead of staged, and the
        channel's rules answer it when the channel opens (a refusal then ends the channel as
        ``seed_failed``); returns None."""
        self.screen(env, event_data_json)
        if not seed:
            self.validate(ch, sender_id, env)
        spec = ch.spec
        inboxes = self.inboxes
        if inboxes is not None:
            inboxes.check(sender_id, spec.participants, env.audience, env.event_type)
        rate = self.rate
        if rate is not None and rate.take(sender_id, spec.channel_id, env.event_type):
            batch.charged.append(sender_id)  # last: a post refused above takes no token
        if seed:
            ch.seed = env
            return None
        return self.accept(ch, env, batch, event_data_json)

    async def prepare(self, sender_id: str, count: int = 1, recipients: Iterable[str] = ()) -> None:
        """Before ``count`` envelopes of ``sender_id`` are admitted, since :meth:`admit` runs without
        awaiting: with rate buckets shared by replicas, have their tokens taken from the store
        (:meth:`RateLimiter.prepare <hubsvc.governance.rate.RateLimiter.prepare>`); with replicas that
        divide the channels, read what waits for the capped ``recipients`` on the other replicas
        (:meth:`SharedInboxes.refresh <hubsvc.governance.inbox_share.SharedInboxes.refresh>`)."""
        if self.rate is not None:
            await self.rate.prepare(sender_id, count)
        if self.shared_inboxes is not None:
            await self.shared_inboxes.refresh(r for r in recipients if r != sender_id)

    def refund(self, charged: list[str], error: BaseException | None) -> None:
        """The commit whose envelopes took the rate tokens in ``charged`` (a :class:`Batch`'s) failed with
        ``error``: if it stored nothing of them (a race lost to another replica, a write the store did
        not take), give the tokens back, never above a bucket's burst — so a post admitted again after
        a lost race still counts once.

        A write stored but unconfirmed keeps its tokens: the client's retry with the same idempotency
        key is answered as the duplicate, which takes none."""
        rate = self.rate
        if charged and rate is not None and nothing_stored(error):
            for sender_id in charged:
                rate.refund(sender_id)

    def validate(self, ch: ChannelRuntime, sender_id: str, env: Envelope) -> None:
        """Raise the domain error refusing ``env`` from ``sender_id`` now (stamps sender and depth):
        membership, then the channel's rules — the step of :meth:`admit` that CanSend asks alone.

        The envelope itself passed :meth:`screen` already."""
        spec = ch.spec  # its fields read directly: this runs for every post
        cid = spec.channel_id
        participants = spec.participants
        if sender_id not in participants:  # the hub's one membership check of a post
            raise not_participant(cid, "post")
        if env.sender_id and env.sender_id != sender_id:
            raise PermissionDenied(
                f"envelope.sender_id {env.sender_id!r} is not you; the hub stamps the sender from your credential — "
                "leave sender_id empty or set it to your own agent id.",
                metadata={"channel_id": cid},
            )
        env.sender_id = sender_id
        if env.audience is not None:
            strangers = [a for a in env.audience if a not in participants]
            if strangers:
                raise InvalidArgument(
                    f"audience contains non-participants of channel '{cid}': {strangers}; "
                    "address only participants (or leave audience unset to broadcast).",
                    metadata={"channel_id": cid},
                )
        if env.causation_id and env.causation_id in ch.depths:
            env.depth = max(env.depth, ch.depths[env.causation_id])
        if env.depth > 0:  # depth 0 (no delegation) is always allowed; only then are the rules asked
            check_depth(self.depth_limit(sender_id), env.depth, metadata={"channel_id": cid})
        etype = env.event_type
        state = ch.meta.state
        if state in TERMINAL:
            raise ChannelClosed(
                f"channel '{cid}' is closed (reason: {ch.meta.close_reason}); open a new channel.",
                metadata={"channel_id": cid, "reason": ch.meta.close_reason},
            )
        if etype in LIFECYCLE_EVENT_TYPES:
            if etype not in _CLIENT_LIFECYCLE:
                raise ProtocolError(f"only the hub posts {etype!r} envelopes.", metadata={"channel_id": cid})
            member = ch.participant(sender_id)
            if state != PENDING or member is None or member.acked:
                raise ProtocolError(
                    f"there is no open invite for you in channel '{cid}' to accept or reject.",
                    metadata={"channel_id": cid},
                )
            return
        if state == PENDING:
            raise ProtocolError(
                f"channel '{cid}' is not open yet: every invitee must ack its invite; wait for {EV_CHANNEL_OPENED!r}.",
                metadata={"channel_id": cid},
            )
        ch.adapter.validate_send(spec, ch.state, env)

    def accept(
        self, ch: ChannelRuntime, env: Envelope, batch: Batch, event_data_json: str | None = None
    ) -> envelope_pb2.Envelope:
        """Stage an admitted envelope and its lifecycle and adapter effects; returns it as written."""
        wire = self.append(ch, env, batch, event_data_json)
        self._after_accept(ch, env, batch)
        return wire

    def append(
        self, ch: ChannelRuntime, env: Envelope, batch: Batch, event_data_json: str | None = None
    ) -> envelope_pb2.Envelope:
        """Stamp (seq, id, time), fold and stage one envelope without validating it; returns it as written."""
        now = self.clock()
        env.seq = ch.last_seq + 1
        env.envelope_id = next_envelope_id()
        env.created_at = iso_z(now)
        wire = envelope_to_wire(env, event_data_json=event_data_json)
        stamp_time(wire.created_time, now)
        data = wire.SerializeToString()
        track = ch.track
        hid = track is not None and bool(track.hidden)
        ch.fold(env, now)
        if track is not None and (hid or track.hidden):  # what discovery leaves out, for every replica
            batch.writes.hidden[ch.channel_id] = tuple(track.hidden)
        ch.meta.last_seq = env.seq
        text = env.event_data.get("text") if env.event_type == EV_TEXT else None
        batch.writes.wal.append(
            WalRow(
                channel_id=ch.channel_id,
                seq=env.seq,
                envelope_id=env.envelope_id,
                sender_id=env.sender_id,
                event_type=env.event_type,
                idempotency_key=env.idempotency_key,
                text=text if isinstance(text, str) else None,
                created_at=env.created_at,
                data=data,
                causation_id=env.causation_id or None,
            )
        )
        batch.wires.append(wire)
        if self.inboxes is not None:
            self.inboxes.staged(ch.channel_id, ch.participants, wire)
        return wire

    def post_as_hub(
        self, ch: ChannelRuntime, event_type: str, data: dict[str, Any], audience: list[str] | None, batch: Batch
    ) -> envelope_pb2.Envelope:
        """Stage an envelope the hub itself posts (invites, opened, closed, expired)."""
        env = Envelope(
            channel_id=ch.channel_id, sender_id=HUB_SENDER, audience=audience, event_type=event_type, event_data=data
        )
        return self.append(ch, env, batch)

    def end(
        self,
        ch: ChannelRuntime,
        reason: str,
        batch: Batch,
        *,
        expired: bool = False,
        detail: dict[str, Any] | None = None,
    ) -> None:
        """Stage the channel's end: its closed envelope (after an expired one when its TTL ended it),
        its final row and the audit record.

        Every end posts ``ag2.channel.closed`` last, so a waiter on it sees every end; a TTL end
        posts ``ag2.channel.expired`` just before it (same reason, same commit)."""
        if ch.is_terminal:
            return
        data = {"reason": reason, **(detail or {})}
        if expired:
            self.post_as_hub(ch, EV_CHANNEL_EXPIRED, data, None, batch)
        self.post_as_hub(ch, EV_CHANNEL_CLOSED, dict(data), None, batch)
        ch.cancel_timers()
        batch.ended = reason
        batch.writes.channels.append(ch.to_row())
        kind = "channel_expired" if expired else "channel_closed"
        batch.writes.audit.append((kind, "", ch.channel_id, json.dumps({"reason": reason}), self.clock()))

    def _after_accept(self, ch: ChannelRuntime, env: Envelope, batch: Batch) -> None:
        """Lifecycle and adapter effects of an admitted envelope (same lock hold, same commit)."""
        if env.event_type == EV_CHANNEL_INVITE_REJECT:
            self.end(ch, "invite_rejected", batch)
            return
        if env.event_type == EV_CHANNEL_INVITE_ACK:
            if ch.all_acked():
                self._open(ch, batch)
            return
        if env.event_type in LIFECYCLE_EVENT_TYPES:
            return
        accepted = ch.adapter.on_accepted(ch.spec, ch.state, env)
        if accepted.close_reason:
            self.end(ch, accepted.close_reason, batch)

    def _open(self, ch: ChannelRuntime, batch: Batch) -> None:
        """Every invitee acked: post opened, then the seed (if any) as the initiator's first envelope.

        The seed passed :meth:`admit` when the channel was opened (screen, inbox cap, rate token); the
        channel's rules answer it now, against the channel it is posted into."""
        self.post_as_hub(
            ch, EV_CHANNEL_OPENED, {"channel_id": ch.channel_id, "participants": list(ch.participants)}, None, batch
        )
        ch.cancel_timers()  # the invite timeout no longer applies
        batch.opened = True
        batch.writes.channels.append(ch.to_row())
        if ch.seed is None:
            return
        seed = dataclasses.replace(ch.seed, sender_id=ch.spec.initiator, audience=ch.seed.audience)
        ch.seed = None
        try:
            self.validate(ch, ch.spec.initiator, seed)
        except AgentNetError as err:
            log.info("seed of channel %s refused: %s", ch.channel_id, err.message)
            self.end(ch, "seed_failed", batch, detail={"error": err.message})
            return
        self.accept(ch, seed, batch)
        batch.writes.channels[-1] = ch.to_row()
