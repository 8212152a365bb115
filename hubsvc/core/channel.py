"""One live channel in memory: metadata, adapter state, the lifecycle fold and its storage row.

The lifecycle fold (invite ack → acked; opened; closed/expired) and the adapter
fold together turn the channel's WAL into its live state, so hydrate is just
"fold every envelope again".
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentnet.v1 import channel_pb2, envelope_pb2

from hubsvc.adapters import get_adapter
from hubsvc.adapters.base import Adapter, ChannelSpec
from hubsvc.core.key_window import KeyWindow
from hubsvc.core.stored_run import StoredRun
from hubsvc.core.util import BoundedDict, from_timestamp, to_timestamp
from hubsvc.governance.expectations import ChannelFacts, ExpectationTrack, from_knobs
from hubsvc.governance.policy import ExpectationName, ExpectationSpec
from hubsvc.storage import ChannelRow
from netkernel.envelope import (
    EV_CHANNEL_CLOSED,
    EV_CHANNEL_EXPIRED,
    EV_CHANNEL_INVITE_ACK,
    EV_CHANNEL_OPENED,
    SUBSTANTIVE_EVENT_TYPES,
    Envelope,
)
from netkernel.tool_schemas import ADAPTER_TOOLS
from netkernel.wire import dumps_json, envelope_from_wire, envelope_to_wire, parse_json_object

PENDING = channel_pb2.CHANNEL_STATE_PENDING
OPENED = channel_pb2.CHANNEL_STATE_OPENED
CLOSED = channel_pb2.CHANNEL_STATE_CLOSED
EXPIRED = channel_pb2.CHANNEL_STATE_EXPIRED
TERMINAL = frozenset({CLOSED, EXPIRED})

_LIFECYCLE_FOLDED = frozenset({EV_CHANNEL_INVITE_ACK, EV_CHANNEL_OPENED, EV_CHANNEL_CLOSED, EV_CHANNEL_EXPIRED})
"""The event types that change a channel's lifecycle (its state and acks)."""

HUB_SENDER = "hub"
"""sender_id of envelopes the hub posts itself (invites, opened, closed, expired)."""


def _audience(env: Envelope) -> tuple[str, ...] | None:
    return None if env.audience is None else tuple(env.audience)


def spec_from_meta(meta: channel_pb2.ChannelMetadata) -> ChannelSpec:
    """The adapter's view of a channel, rebuilt from its stored metadata."""
    return ChannelSpec(
        channel_id=meta.channel_id,
        type=meta.type,
        initiator=meta.participants[0].agent_id,
        participants=tuple(p.agent_id for p in meta.participants),
        names={p.agent_id: p.name for p in meta.participants},
        knobs=parse_json_object(meta.knobs_json, "knobs_json"),
    )


class Members(Protocol):
    """A live channel as delivery sees it: its id and its members (held or followed)."""

    @property
    def channel_id(self) -> str:
        """The channel id."""

    @property
    def participants(self) -> tuple[str, ...]:
        """Member agent ids."""


class MemberView(Members, Protocol):
    """A live channel as a member's stream sees it: what was committed, and the turn it awaits."""

    committed_seq: int

    def pending_turn(self, agent_id: str) -> tuple[int, str] | None:
        """(seq, envelope_id) the channel awaits ``agent_id``'s answer to (None: none, or unknown here)."""


@dataclass
class ChannelRuntime:
    """A channel the hub is serving."""

    meta: channel_pb2.ChannelMetadata
    spec: ChannelSpec
    adapter: Adapter[Any]
    state: Any
    seed: Envelope | None = None
    last_seq: int = 0
    """Highest admitted seq (committed or about to be)."""
    committed_seq: int = 0
    """Highest seq known committed."""
    last_commit: asyncio.Future[None] | None = None
    """The commit of the latest batch submitted (batches of a channel commit in order)."""
    unpublished: int = 0
    """Batches submitted whose commit has not been handled yet (their envelopes not yet handed to the
    sessions): a batch written inline is delivered at once only when it is the only one, so sessions
    always get a channel's envelopes in seq order."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    depths: BoundedDict[str, int] = field(default_factory=lambda: BoundedDict(4096))
    """envelope_id -> depth of recent envelopes (causation on the reply path)."""
    idempotent: KeyWindow = field(default_factory=KeyWindow)
    """(sender_id, idempotency_key) -> envelope_id of the channel's recent keyed posts (rebuilt by hydrate).
    A miss the window may have forgotten (``idempotent.may_have_forgotten``) is checked in the store."""
    in_flight: dict[str, tuple[envelope_pb2.Envelope, asyncio.Future[None]]] = field(default_factory=dict)
    """envelope_id -> (wire, commit future) of keyed posts admitted but not yet committed (a retry shares
    its original's commit: it is answered only once that commits, and fails if it fails)."""
    keyed_wires: BoundedDict[str, envelope_pb2.Envelope] = field(default_factory=lambda: BoundedDict(512))
    """envelope_id -> wire of keyed posts committed by this process (answers retries without a read)."""
    timers: list[asyncio.TimerHandle] = field(default_factory=list)
    stale: bool = False
    """A commit of this runtime failed: it is being rebuilt from the store and must not admit more."""
    rebuilt: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once a stale runtime has been replaced (look the channel up again)."""
    expectations: dict[ExpectationName, ExpectationSpec] = field(default_factory=dict)
    """The channel's expectations (its ``expectations`` knob, resolved when it was opened)."""
    track: ExpectationTrack | None = None
    """The WAL-derived times and firings its expectations need (None: it has none)."""
    last_turn: tuple[int, str, str, tuple[str, ...] | None] | None = None
    """The latest substantive envelope (ag2.msg.text / ag2.packet) folded: (seq, envelope_id, sender_id,
    audience or None for a broadcast) — what a pending turn answers (:meth:`pending_turn`)."""

    def __post_init__(self) -> None:
        self.expectations = from_knobs(self.spec.knobs)
        if self.expectations:
            self.track = ExpectationTrack()

    @classmethod
    def pending(
        cls,
        spec: ChannelSpec,
        adapter: Adapter[Any],
        *,
        intent: str,
        invite_ack_timeout: float,
        ttl: float | None,
        now: float,
        seed: Envelope | None = None,
    ) -> ChannelRuntime:
        """A new channel waiting for its invite acks (the initiator counts as acked)."""
        meta = channel_pb2.ChannelMetadata(
            channel_id=spec.channel_id,
            type=adapter.type,
            state=PENDING,
            knobs_json=dumps_json(dict(spec.knobs)),
            intent=intent,
            invite_ack_timeout_seconds=invite_ack_timeout,
        )
        for agent_id in spec.participants:
            initiator = agent_id == spec.initiator
            role = channel_pb2.PARTICIPANT_ROLE_INITIATOR if initiator else channel_pb2.PARTICIPANT_ROLE_TARGET
            meta.participants.add(agent_id=agent_id, name=spec.names[agent_id], role=role, acked=initiator)
        meta.created_at.CopyFrom(to_timestamp(now))
        if ttl is not None:
            meta.expires_at.CopyFrom(to_timestamp(now + ttl))
        return cls(meta=meta, spec=spec, adapter=adapter, state=adapter.initial_state(spec), seed=seed)

    @classmethod
    def from_row(cls, row: ChannelRow) -> ChannelRuntime:
        """A stored channel before its WAL is folded again (the fold recomputes acks and state)."""
        meta = channel_pb2.ChannelMetadata.FromString(row.record)
        adapter = get_adapter(meta.type)
        spec = spec_from_meta(meta)
        meta.state = PENDING
        for p in meta.participants:
            p.acked = p.role == channel_pb2.PARTICIPANT_ROLE_INITIATOR
        seed = envelope_from_wire(envelope_pb2.Envelope.FromString(row.seed)) if row.seed else None
        return cls(meta=meta, spec=spec, adapter=adapter, state=adapter.initial_state(spec), seed=seed)

    def to_row(self) -> ChannelRow:
        """The channel's storage row: its metadata, and the seed still to post once opened."""
        seed = envelope_to_wire(self.seed).SerializeToString() if self.seed is not None else b""
        return ChannelRow(self.channel_id, not self.is_terminal, self.meta.SerializeToString(), seed)

    @property
    def channel_id(self) -> str:
        """The channel id."""
        return self.meta.channel_id

    @property
    def participants(self) -> tuple[str, ...]:
        """Member agent ids, initiator first."""
        return self.spec.participants

    @property
    def is_terminal(self) -> bool:
        """CLOSED or EXPIRED."""
        return self.meta.state in TERMINAL

    def participant(self, agent_id: str) -> channel_pb2.Participant | None:
        """The member entry of ``agent_id``."""
        for p in self.meta.participants:
            if p.agent_id == agent_id:
                return p
        return None

    def expected_next(self) -> list[str]:
        """Agent ids the adapter expects to speak next; [] unless the channel is OPENED."""
        return self.adapter.expected_next(self.spec, self.state) if self.meta.state == OPENED else []

    def pending_turn(self, agent_id: str) -> tuple[int, str] | None:
        """(seq, envelope_id) of the envelope the channel awaits ``agent_id``'s answer to: the adapter
        expects it to speak next and the latest substantive envelope, visible to it, is someone else's
        (it has not answered). None otherwise (also before any substantive envelope: nothing to answer)."""
        turn = self.last_turn
        if turn is None or turn[2] == agent_id or (turn[3] is not None and agent_id not in turn[3]):
            return None
        if agent_id not in self.expected_next():
            return None
        return turn[0], turn[1]

    def offered_tools(self, participant_id: str) -> list[str]:
        """The adapter tools ``participant_id`` may use now (["say"] or []; none unless OPENED)."""
        if self.meta.state == OPENED and self.adapter.offers_say(self.spec, self.state, participant_id):
            return list(ADAPTER_TOOLS)
        return []

    def all_acked(self) -> bool:
        """Every invitee acked its invite."""
        return all(p.acked for p in self.meta.participants)

    def fold(self, env: Envelope, now: float) -> None:
        """Apply an admitted envelope to the lifecycle and the adapter state."""
        self.last_seq = env.seq
        if env.depth:  # absent means 0; keeps the map small and hydrate fast
            self.depths[env.envelope_id] = env.depth
        if env.idempotency_key is not None:
            self.idempotent[(env.sender_id, env.idempotency_key)] = env.envelope_id
        if env.event_type in _LIFECYCLE_FOLDED:
            self._fold_lifecycle(env, now)
        elif env.event_type in SUBSTANTIVE_EVENT_TYPES:
            self.last_turn = (env.seq, env.envelope_id, env.sender_id, _audience(env))
        self.state = self.adapter.fold(self.spec, self.state, env)
        if self.track is not None:
            self.track.observe(env, from_hub=env.sender_id == HUB_SENDER)

    def fold_run(self, envs: Sequence[Envelope], now: float) -> None:
        """:meth:`fold` of each of ``envs`` in turn (hydrate folds the stored WAL a run at a time with
        :meth:`fold_stored`, which gives the same state).

        The lifecycle, the adapter state and the expectation track are independent folds
        of the same envelopes, so each takes the whole run in turn (the adapter in one call)."""
        if not envs:
            return
        depths, idempotent = self.depths, self.idempotent
        last_turn: Envelope | None = None
        for env in envs:
            if env.depth:
                depths[env.envelope_id] = env.depth
            key = env.idempotency_key
            if key is not None:
                idempotent[(env.sender_id, key)] = env.envelope_id
            if env.event_type in _LIFECYCLE_FOLDED:
                self._fold_lifecycle(env, now)
            elif env.event_type in SUBSTANTIVE_EVENT_TYPES:
                last_turn = env
        if last_turn is not None:  # only the run's last one counts: read its audience once
            self.last_turn = (last_turn.seq, last_turn.envelope_id, last_turn.sender_id, _audience(last_turn))
        self.last_seq = envs[-1].seq
        self.state = self.adapter.fold_run(self.spec, self.state, envs)
        track = self.track
        if track is not None:
            for env in envs:
                track.observe(env, from_hub=env.sender_id == HUB_SENDER)

    def fold_stored(self, run: StoredRun, now: float) -> None:
        """:meth:`fold_run` of a run of stored envelopes: hydrate's fold.

        The same state as :meth:`fold_run` of the run's envelopes, read from the run's columns:
        most runs have no depth, no key and no lifecycle envelope, so only the record of their
        last turn is parsed. The adapter gets the run itself; only an adapter or an expectation
        track that reads the envelopes builds them."""
        types = run.event_types
        if not types:
            return
        if run.deep:
            depths = self.depths
            for wire in run.wires:
                if wire.depth:
                    depths[wire.envelope_id] = wire.depth
        keyed = run.keyed()
        if keyed:
            idempotent = self.idempotent
            for wire in keyed:
                idempotent[(wire.sender_id, wire.idempotency_key)] = wire.envelope_id
        if not _LIFECYCLE_FOLDED.isdisjoint(types):
            for index, etype in enumerate(types):
                if etype in _LIFECYCLE_FOLDED:
                    self._fold_lifecycle(run.envelope(index), now)
        for index in range(len(types) - 1, -1, -1):
            if types[index] in SUBSTANTIVE_EVENT_TYPES:  # the run's last turn (never a lifecycle type)
                wire = run.wire(index)
                audience = tuple(wire.audience.agent_ids) if wire.HasField("audience") else None
                self.last_turn = (wire.seq, wire.envelope_id, wire.sender_id, audience)
                break
        self.last_seq = run.seqs[-1]
        self.state = self.adapter.fold_run(self.spec, self.state, run)
        track = self.track
        if track is not None:
            for env in run:
                track.observe(env, from_hub=env.sender_id == HUB_SENDER)

    def _fold_lifecycle(self, env: Envelope, now: float) -> None:
        etype = env.event_type
        if etype == EV_CHANNEL_INVITE_ACK:
            member = self.participant(env.sender_id)
            if member is not None:
                member.acked = True
        elif etype == EV_CHANNEL_OPENED:
            self.meta.state = OPENED
        elif self.meta.state != EXPIRED:  # closed or expired; the closed after an expired keeps EXPIRED
            self.meta.state = EXPIRED if etype == EV_CHANNEL_EXPIRED else CLOSED
            self.meta.close_reason = str(env.event_data.get("reason", ""))
            self.meta.closed_at.CopyFrom(to_timestamp(now))

    def facts(self) -> ChannelFacts:
        """What the expectation evaluators read of this channel now (needs :attr:`track`)."""
        assert self.track is not None
        state = self.meta.state
        return ChannelFacts(
            channel_type=self.meta.type,
            state="pending" if state == PENDING else "opened" if state == OPENED else "ended",
            created_at=from_timestamp(self.meta.created_at),
            participants=self.participants,
            unacked=tuple(p.agent_id for p in self.meta.participants if not p.acked),
            expected_next=tuple(self.expected_next()),
            track=self.track,
        )

    def cancel_timers(self) -> None:
        """Disarm the invite-timeout and TTL timers."""
        for timer in self.timers:
            timer.cancel()
        self.timers.clear()
