"""Consulting: strict one question, one reply between the initiator and one target.

The initiator asks (one substantive envelope), the target replies (one substantive
envelope), and the reply completes the channel (close reason ``consulting_complete``).
This is the channel ``delegate`` opens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from hubsvc.adapters.base import Accepted, ChannelSpec
from hubsvc.adapters.common import (
    TURN_EXPECTATIONS,
    channel_closed,
    is_substantive,
    not_your_turn,
    require_participants,
    substantive_count,
)
from hubsvc.adapters.knobs import check_knobs
from netkernel.channel_types import CONSULTING_TYPE, VIEW_FULL_TRANSCRIPT
from netkernel.envelope import Envelope

CLOSE_REASON = "consulting_complete"


@dataclass(frozen=True)
class ConsultingState:
    """Where a consulting channel is in its question → reply exchange."""

    asker: str
    """The initiator (asks the question)."""
    replier: str
    """The target (gives the reply)."""
    asked: bool = False
    replied: bool = False

    @property
    def end_reason(self) -> str | None:
        """``consulting_complete`` once replied, else None."""
        return CLOSE_REASON if self.replied else None

    @property
    def expected(self) -> str | None:
        """Agent id whose substantive envelope comes next (None once complete)."""
        if self.replied:
            return None
        return self.replier if self.asked else self.asker


class ConsultingAdapter:
    """Hub half of the consulting channel type (strict 1Q1R)."""

    type: ClassVar[str] = CONSULTING_TYPE
    expectations: ClassVar[frozenset[str]] = TURN_EXPECTATIONS | {"reply_within"}

    def validate_create(self, spec: ChannelSpec) -> dict[str, Any]:
        """Exactly two participants; consulting has only the common knobs (:mod:`hubsvc.adapters.knobs`)."""
        require_participants(spec, exactly=2)
        check_knobs(spec)
        return dict(spec.knobs)

    def initial_state(self, spec: ChannelSpec) -> ConsultingState:
        """Waiting for the initiator's question."""
        return ConsultingState(asker=spec.participants[0], replier=spec.participants[1])

    def validate_send(self, spec: ChannelSpec, state: ConsultingState, env: Envelope) -> None:
        """Only the question (from the initiator) then the reply (from the target) are admitted."""
        if not is_substantive(env):
            return  # custom and context events carry no turn rule
        expected = state.expected
        if expected is None:
            raise channel_closed(
                spec, "this consulting channel already has its question and reply. Open a new channel to ask again."
            )
        if env.sender_id != expected:
            hint = (
                "wait for their reply; a consulting channel takes exactly one question and one reply."
                if state.asked
                else "wait for their question, then reply once."
            )
            raise not_your_turn(spec, env, expected, hint)

    def fold(self, spec: ChannelSpec, state: ConsultingState, env: Envelope) -> ConsultingState:
        """The question sets ``asked``, the reply sets ``replied``; nothing else changes the state."""
        if not is_substantive(env) or state.replied:
            return state
        return replace(state, replied=True) if state.asked else replace(state, asked=True)

    def fold_run(self, spec: ChannelSpec, state: ConsultingState, envs: Sequence[Envelope]) -> ConsultingState:
        """``fold`` of each in turn: the first substantive one asks, the next replies, the rest change nothing."""
        if state.replied:
            return state
        n = substantive_count(envs)
        if not n:
            return state
        if state.asked:
            return replace(state, replied=True)
        return replace(state, asked=True, replied=n >= 2)

    def on_accepted(self, spec: ChannelSpec, state: ConsultingState, env: Envelope) -> Accepted:
        """Close with ``consulting_complete`` once the reply is in."""
        if is_substantive(env) and state.end_reason is not None:
            return Accepted(close_reason=state.end_reason)
        return Accepted()

    def expected_next(self, spec: ChannelSpec, state: ConsultingState) -> list[str]:
        """[initiator] before the question, [target] after it, [] when complete."""
        return [] if state.expected is None else [state.expected]

    def default_view(self, spec: ChannelSpec) -> tuple[str, int]:
        """The full transcript (one question, one reply)."""
        return VIEW_FULL_TRANSCRIPT, 0

    def offers_say(self, spec: ChannelSpec, state: ConsultingState, participant_id: str) -> bool:
        """``say`` only for the participant whose turn it is (no one once replied)."""
        return state.expected == participant_id

    def state_json(self, state: ConsultingState) -> dict[str, Any]:
        """Phase, flags and the expected speaker as JSON."""
        phase = "complete" if state.replied else "awaiting_reply" if state.asked else "awaiting_question"
        return {
            "phase": phase,
            "asker": state.asker,
            "replier": state.replier,
            "asked": state.asked,
            "replied": state.replied,
            "expected_next": [] if state.expected is None else [state.expected],
            "ended": state.replied,
            "end_reason": state.end_reason,
        }
