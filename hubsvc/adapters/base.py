"""The hub half of a channel adapter: pure turn-taking rules.

An adapter never does I/O. The hub core calls it under the channel's
serialisation point:

1. ``validate_create(spec)`` when a channel is opened → normalised knobs (or InvalidArgument);
2. ``initial_state(spec)`` once;
3. for each post from a participant while the channel is OPENED:
   ``validate_send(spec, state, env)`` (raises NotYourTurn / ProtocolError / ChannelClosed /
   InvalidArgument), then, still under the channel's lock and before the WAL write commits,
   ``state = fold(spec, state, env)`` and ``on_accepted(spec, state, env)`` (e.g. "close the
   channel with reason X"). The post is answered, delivered and acked only after its write
   commits; if the commit fails, the channel is rebuilt from the WAL, so a folded but
   uncommitted envelope never reaches anyone;
4. on restart, ``fold_run`` over the whole WAL, a run at a time, rebuilds the state (hydrate). The
   run hydrate passes is an :class:`EnvelopeRun`: a sequence of the envelopes that also holds their
   event types, read once for every fold of the run (an adapter whose state depends on the event
   types alone never needs the envelopes themselves).

``fold`` sees every admitted envelope, including lifecycle and custom event types;
those never advance turn state. Because ``fold`` and ``validate_send`` are pure
functions of (spec, state, envelope), replaying the WAL always gives the live state.

What each LLM sees of a channel (its default view) is not the hub's business: the
SDK half of the adapter decides it (:mod:`agentsdk.network.adapters`).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Protocol, TypeVar, cast, overload

from netkernel.envelope import Envelope

S = TypeVar("S")
T = TypeVar("T")


@dataclass(frozen=True)
class ChannelSpec:
    """What an adapter knows about its channel (immutable for the channel's life)."""

    channel_id: str
    type: str
    initiator: str
    """Agent id of the opener."""
    participants: tuple[str, ...]
    """Agent ids, initiator first, then targets in invitation order."""
    names: Mapping[str, str] = field(default_factory=dict)
    """agent_id -> passport name of every participant."""
    knobs: Mapping[str, Any] = field(default_factory=dict)
    """Adapter options (normalised by validate_create)."""
    _derived: dict[Callable[[ChannelSpec], Any], Any] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def derived(self, compute: Callable[[ChannelSpec], T]) -> T:
        """``compute(self)``, computed once per spec: what an adapter reads from its knobs on every fold.

        The spec never changes, so neither does the value; a ``compute`` that raises is not kept."""
        memo = self._derived
        if compute in memo:
            return cast(T, memo[compute])
        value = memo[compute] = compute(self)
        return value

    def resolve(self, ref: str) -> str | None:
        """Agent id of the participant ``ref`` names (an id or a name); None if none."""
        if ref in self.participants:
            return ref
        for agent_id, name in self.names.items():
            if name == ref and agent_id in self.participants:
                return agent_id
        return None


_EVENT_TYPE = operator.attrgetter("event_type")


class EnvelopeRun(Sequence[Envelope]):
    """A run of one channel's admitted envelopes in seq order, as hydrate folds it: a sequence of the
    envelopes that also holds each one's event type (:attr:`event_types`), read once for every fold
    of the run. A run of stored envelopes (``hubsvc.core.stored_run.StoredRun``) builds the
    envelopes themselves only when first indexed or iterated, so a fold that reads the event types
    alone never builds one."""

    __slots__ = ("_envelopes", "event_types")

    def __init__(self, event_types: list[str], envelopes: list[Envelope] | None) -> None:
        self.event_types = event_types
        """The event type of each envelope, in order (never changed)."""
        self._envelopes = envelopes

    @classmethod
    def of(cls, envs: Sequence[Envelope]) -> EnvelopeRun:
        """The run of ``envs``."""
        envelopes = list(envs)
        return cls(list(map(_EVENT_TYPE, envelopes)), envelopes)

    @property
    def envelopes(self) -> list[Envelope]:
        """The envelopes (a run built without them builds them on the first read)."""
        envelopes = self._envelopes
        if envelopes is None:
            envelopes = self._envelopes = self._build()
        return envelopes

    def _build(self) -> list[Envelope]:
        """The envelopes of a run made without them (a subclass's job)."""
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self.event_types)

    @overload
    def __getitem__(self, index: int) -> Envelope: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Envelope]: ...

    def __getitem__(self, index: int | slice) -> Envelope | Sequence[Envelope]:
        return self.envelopes[index]

    def __iter__(self) -> Iterator[Envelope]:
        return iter(self.envelopes)


def event_types_of(envs: Sequence[Envelope]) -> Sequence[str]:
    """The event type of each of ``envs`` (an :class:`EnvelopeRun` has them already)."""
    if isinstance(envs, EnvelopeRun):
        return envs.event_types
    return list(map(_EVENT_TYPE, envs))


@dataclass(frozen=True)
class Accepted:
    """What the hub should do after an envelope was admitted and folded."""

    close_reason: str | None = None
    """Close the channel with this reason (e.g. "consulting_complete", "max_turns")."""


class Adapter(Protocol, Generic[S]):
    """The hub half of a channel type."""

    type: ClassVar[str]
    """Channel type name (one of :data:`netkernel.channel_types.CHANNEL_TYPES` for the built-in ones)."""
    expectations: ClassVar[frozenset[str]]
    """The channel expectations (``docs/governance.md``) that mean something on this type: the policy
    accepts a type's entry only for these (``hubsvc.governance.policy.EXPECTATION_TYPES`` is read
    from the adapters)."""

    def validate_create(self, spec: ChannelSpec) -> dict[str, Any]:
        """Check participant count and knobs; return normalised knobs (names resolved to ids).

        Raises InvalidArgument with a message saying what to fix.
        """
        ...

    def initial_state(self, spec: ChannelSpec) -> S:
        """State of a freshly opened channel."""
        ...

    def validate_send(self, spec: ChannelSpec, state: S, env: Envelope) -> None:
        """Raise if ``env`` (from participant ``env.sender_id``) may not be posted now.

        Only the channel's turn rules: the hub has checked already that the sender is a participant
        (and everything else admission checks: :mod:`hubsvc.core.admission`)."""
        ...

    def fold(self, spec: ChannelSpec, state: S, env: Envelope) -> S:
        """Return the state after ``env`` was admitted (pure; must not mutate ``state``)."""
        ...

    def fold_run(self, spec: ChannelSpec, state: S, envs: Sequence[Envelope]) -> S:
        """``fold`` of each of ``envs`` in turn, in one call (hydrate folds the WAL a run at a time).

        The same state as the loop (pure; must not mutate ``state``); :func:`~hubsvc.adapters.common.fold_each`
        is that loop, for an adapter with no shortcut."""
        ...

    def on_accepted(self, spec: ChannelSpec, state: S, env: Envelope) -> Accepted:
        """Effects of an admitted envelope, given the state after folding it."""
        ...

    def expected_next(self, spec: ChannelSpec, state: S) -> list[str]:
        """Agent ids expected to speak next ([] = anyone may, or no one can)."""
        ...

    def offers_say(self, spec: ChannelSpec, state: S, participant_id: str) -> bool:
        """Whether the ``say`` tool is offered to ``participant_id`` now (the `say` column of docs/hub.md, Adapters)."""
        ...

    def default_view(self, spec: ChannelSpec) -> tuple[str, int]:
        """(view name, recent_n) an LLM participant sees of this channel by default (recent_n 0 = all)."""
        ...

    def state_json(self, state: S) -> dict[str, Any]:
        """The state as a JSON object (DescribeChannel's adapter_state_json)."""
        ...
