"""Conversation: two participants, free-form; anyone may speak at any time.

Optional knob ``max_turns`` (positive int) closes the channel with reason
``max_turns`` once that many substantive envelopes were admitted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from hubsvc.adapters.base import Accepted, ChannelSpec
from hubsvc.adapters.common import (
    EVERY_TYPE_EXPECTATIONS,
    channel_closed,
    counted_turns,
    is_substantive,
    optional_positive_int,
    require_participants,
    substantive_count,
)
from hubsvc.adapters.knobs import check_knobs
from netkernel.channel_types import CONVERSATION_TYPE, VIEW_WINDOWED_SUMMARY
from netkernel.envelope import Envelope


def conversation_max_turns(spec: ChannelSpec) -> int | None:
    """The ``max_turns`` knob (None = unlimited)."""
    return optional_positive_int(spec.knobs, "max_turns", spec=spec)


@dataclass(frozen=True)
class ConversationState:
    """How many substantive envelopes were admitted, and whether the turn limit ended it."""

    turns: int = 0
    end_reason: str | None = None


class ConversationAdapter:
    """Hub half of the conversation channel type."""

    type: ClassVar[str] = CONVERSATION_TYPE
    expectations: ClassVar[frozenset[str]] = EVERY_TYPE_EXPECTATIONS

    def validate_create(self, spec: ChannelSpec) -> dict[str, Any]:
        """Exactly two participants; ``max_turns`` if given must be a positive int."""
        require_participants(spec, exactly=2)
        check_knobs(spec)
        knobs = dict(spec.knobs)
        max_turns = optional_positive_int(spec.knobs, "max_turns", spec=spec)
        knobs.pop("max_turns", None)
        if max_turns is not None:
            knobs["max_turns"] = max_turns
        return knobs

    def initial_state(self, spec: ChannelSpec) -> ConversationState:
        """No turns yet."""
        return ConversationState()

    def validate_send(self, spec: ChannelSpec, state: ConversationState, env: Envelope) -> None:
        """Any participant may post at any time, until a ``max_turns`` limit was reached."""
        if is_substantive(env) and state.end_reason is not None:
            raise channel_closed(
                spec,
                f"this conversation reached its max_turns limit ({state.turns} turns). Open a new channel to continue.",
            )

    def fold(self, spec: ChannelSpec, state: ConversationState, env: Envelope) -> ConversationState:
        """Count substantive envelopes; mark the end when ``max_turns`` is reached."""
        if not is_substantive(env) or state.end_reason is not None:
            return state
        turns = state.turns + 1
        max_turns = spec.derived(conversation_max_turns)
        end = "max_turns" if max_turns is not None and turns >= max_turns else None
        return ConversationState(turns=turns, end_reason=end)  # direct construction: fold is on the hydrate hot path

    def fold_run(self, spec: ChannelSpec, state: ConversationState, envs: Sequence[Envelope]) -> ConversationState:
        """``fold`` of each in turn: the substantive ones count, up to the limit."""
        if state.end_reason is not None:
            return state
        n = substantive_count(envs)
        if not n:
            return state
        turns, end = counted_turns(state.turns, n, spec.derived(conversation_max_turns))
        return ConversationState(turns=turns, end_reason=end)

    def on_accepted(self, spec: ChannelSpec, state: ConversationState, env: Envelope) -> Accepted:
        """Close with ``max_turns`` when the envelope just folded reached the limit."""
        if is_substantive(env) and state.end_reason is not None:
            return Accepted(close_reason=state.end_reason)
        return Accepted()

    def expected_next(self, spec: ChannelSpec, state: ConversationState) -> list[str]:
        """Always [] — anyone may speak (or, after the limit, no one can)."""
        return []

    def default_view(self, spec: ChannelSpec) -> tuple[str, int]:
        """A windowed summary of the last 10 envelopes."""
        return VIEW_WINDOWED_SUMMARY, 10

    def offers_say(self, spec: ChannelSpec, state: ConversationState, participant_id: str) -> bool:
        """``say`` for every participant while the channel still takes turns."""
        return participant_id in spec.participants and state.end_reason is None

    def state_json(self, state: ConversationState) -> dict[str, Any]:
        """Turn count and end state as JSON."""
        return {"turns": state.turns, "ended": state.end_reason is not None, "end_reason": state.end_reason}
