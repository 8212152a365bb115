"""Helpers shared by the four built-in adapters: participant checks, knob parsing, error builders.

Every error built here names the channel and says what to do, so an LLM (or a
person) reading it can recover without looking anything up.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, TypeVar

from hubsvc.adapters.base import Adapter, ChannelSpec, event_types_of
from netkernel.channel_types import VIEW_NAMED_WINDOWED_SUMMARY
from netkernel.envelope import SUBSTANTIVE_EVENT_TYPES, Envelope
from netkernel.errors import ChannelClosed, InvalidArgument, NotParticipant, NotYourTurn


def is_substantive(env: Envelope) -> bool:
    """True for envelopes that take a turn (EV_TEXT and EV_PACKET)."""
    return env.event_type in SUBSTANTIVE_EVENT_TYPES


S = TypeVar("S")


def substantive_count(envs: Sequence[Envelope]) -> int:
    """How many of ``envs`` take a turn (read without a Python call per envelope; an
    :class:`~hubsvc.adapters.base.EnvelopeRun`'s event types, without reading an envelope)."""
    return sum(map(SUBSTANTIVE_EVENT_TYPES.__contains__, event_types_of(envs)))


def counted_turns(turns: int, n: int, max_turns: int | None) -> tuple[int, str | None]:
    """(turns, end reason) after ``n`` more substantive envelopes, each counted until ``max_turns`` is reached
    ("max_turns" then; None = unlimited): what folding them one by one gives."""
    if max_turns is None or turns + n < max_turns:
        return turns + n, None
    return max(turns + 1, max_turns), "max_turns"


def fold_each(adapter: Adapter[S], spec: ChannelSpec, state: S, envs: Sequence[Envelope]) -> S:
    """``adapter.fold`` of each of ``envs`` in turn: :meth:`Adapter.fold_run` without a shortcut."""
    fold = adapter.fold
    for env in envs:
        state = fold(spec, state, env)
    return state


EVERY_TYPE_EXPECTATIONS: frozenset[str] = frozenset({"acks_within", "max_silence"})
"""The expectations every channel type has: the invite's acks, and silence of the whole channel."""
TURN_EXPECTATIONS: frozenset[str] = EVERY_TYPE_EXPECTATIONS | {"turn_within"}
"""The expectations of a type whose adapter names who is due (``expected_next``): ``turn_within`` too."""


def named_window(spec: ChannelSpec) -> tuple[str, int]:
    """The default view of N-party channels: a named windowed summary of ``max(2 * N, 4)`` envelopes."""
    return VIEW_NAMED_WINDOWED_SUMMARY, max(2 * len(spec.participants), 4)


def label(spec: ChannelSpec, agent_id: str) -> str:
    """``"name (id)"`` for a participant, or just the id when it has no distinct name."""
    name = spec.names.get(agent_id)
    return f"{name} ({agent_id})" if name and name != agent_id else agent_id


def possessive(spec: ChannelSpec, agent_id: str) -> str:
    """``"name's (id)"`` — the form turn errors use ("it is bob's (a2) turn")."""
    name = spec.names.get(agent_id)
    return f"{name}'s ({agent_id})" if name and name != agent_id else f"{agent_id}'s"


def participant_list(spec: ChannelSpec) -> str:
    """All participants as ``"alice (a1), bob (a2)"``, for error messages."""
    return ", ".join(label(spec, p) for p in spec.participants)


def require_participants(spec: ChannelSpec, *, exactly: int | None = None, at_least: int | None = None) -> None:
    """Check the participant list's shape and size; raise InvalidArgument saying how to fix it."""
    got = len(spec.participants)
    if len(set(spec.participants)) != got:
        raise InvalidArgument(
            f"{spec.type} channel: participants must be distinct; got {got} with duplicates "
            f"({', '.join(spec.participants)}). List each agent once.",
            metadata={"participants": str(got)},
        )
    if got and spec.participants[0] != spec.initiator:
        raise InvalidArgument(
            f"{spec.type} channel: the initiator '{spec.initiator}' must be the first "
            f"participant; got participants {list(spec.participants)}.",
            metadata={},
        )
    if exactly is not None and got != exactly:
        raise InvalidArgument(
            f"a {spec.type} channel needs exactly {exactly} participants (the initiator and "
            f"{exactly - 1} target{'s' if exactly != 2 else ''}); got {got}. "
            f"Open it with exactly {exactly - 1} target{'s' if exactly != 2 else ''}.",
            metadata={"participants": str(got), "expected": str(exactly)},
        )
    if at_least is not None and got < at_least:
        raise InvalidArgument(
            f"a {spec.type} channel needs at least {at_least} participants (the initiator and "
            f"{at_least - 1} or more targets); got {got}. Add targets when opening it.",
            metadata={"participants": str(got), "expected": f">={at_least}"},
        )


def not_participant(channel_id: str, action: str = "use it") -> NotParticipant:
    """The hub's one refusal of a non-participant (``NOT_PARTICIPANT``, gRPC ``PERMISSION_DENIED``):
    ``action`` says what only participants may do (e.g. ``"post"``)."""
    return NotParticipant(
        f"you are not a participant of channel '{channel_id}'; only its participants may {action}.",
        metadata={"channel_id": channel_id},
    )


def require_participant(agent_id: str, participants: Collection[str], channel_id: str, action: str = "use it") -> None:
    """The membership check of reads and calls about a channel: :func:`not_participant` unless
    ``agent_id`` is one of ``participants`` (agent ids). A post's membership is checked once, by
    admission (``hubsvc.core.admission.Admission.validate``), before any adapter is asked."""
    if agent_id not in participants:
        raise not_participant(channel_id, action)


def positive_int(value: Any, *, spec: ChannelSpec, key: str) -> int:
    """``value`` as a positive int, or InvalidArgument naming the knob ``key``."""
    # bool is an int subclass; True as a turn limit is always a mistake.
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidArgument(
            f"{spec.type} channel: knob '{key}' must be a positive integer; "
            f"got {value!r}. Give a whole number ≥ 1, or leave it out.",
            metadata={"knob": key},
        )
    return value


def optional_positive_int(knobs: Mapping[str, Any], key: str, *, spec: ChannelSpec) -> int | None:
    """The knob ``key`` as a positive int, or None when absent (or explicitly null)."""
    value = knobs.get(key)
    return None if value is None else positive_int(value, spec=spec, key=key)


def not_your_turn(spec: ChannelSpec, env: Envelope, expected: str, hint: str) -> NotYourTurn:
    """NotYourTurn naming whose turn it is (name and id) and what the sender should do."""
    return NotYourTurn(
        f"{spec.type} channel '{spec.channel_id}': it is {possessive(spec, expected)} turn, not "
        f"{possessive(spec, env.sender_id)}; {hint}",
        metadata={
            "channel_id": spec.channel_id,
            "expected": expected,
            "expected_name": spec.names.get(expected, expected),
            "sender_id": env.sender_id,
        },
    )


def channel_closed(spec: ChannelSpec, why: str) -> ChannelClosed:
    """ChannelClosed for a channel whose adapter has finished (``why`` says why and what to do)."""
    return ChannelClosed(
        f"channel '{spec.channel_id}' is closed: {why}",
        metadata={"channel_id": spec.channel_id},
    )
