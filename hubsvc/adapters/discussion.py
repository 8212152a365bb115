"""Discussion: two or more participants speaking in strict round robin.

The order is ``spec.participants`` (initiator first): the next speaker is
``participants[turns % n]``. Optional knobs ``max_turns`` or ``max_rounds``
(one round = every participant speaks once) close the channel with reason
``max_turns``; validate_create normalises ``max_rounds`` into ``max_turns``.
The knob ``ordering`` names the turn order: only ``"round_robin"`` (the default) exists;
any other value is refused at OpenChannel rather than accepted and ignored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from hubsvc.adapters.base import Accepted, ChannelSpec
from hubsvc.adapters.common import (
    TURN_EXPECTATIONS,
    channel_closed,
    counted_turns,
    is_substantive,
    label,
    named_window,
    not_your_turn,
    optional_positive_int,
    require_participants,
    substantive_count,
)
from hubsvc.adapters.knobs import check_knobs
from netkernel.channel_types import DISCUSSION_ORDERINGS, DISCUSSION_TYPE
from netkernel.envelope import Envelope
from netkernel.errors import InvalidArgument


def discussion_max_turns(spec: ChannelSpec) -> int | None:
    """The turn limit from ``max_turns`` or ``max_rounds`` × participants (None = unlimited)."""
    max_turns = optional_positive_int(spec.knobs, "max_turns", spec=spec)
    max_rounds = optional_positive_int(spec.knobs, "max_rounds", spec=spec)
    if max_turns is not None and max_rounds is not None:
        raise InvalidArgument(
            f"discussion channel: give either knob 'max_turns' ({max_turns}) or "
            f"'max_rounds' ({max_rounds}), not both; max_rounds={max_rounds} means "
            f"max_turns={max_rounds * len(spec.participants)} with {len(spec.participants)} participants.",
            metadata={"knob": "max_rounds"},
        )
    if max_rounds is not None:
        return max_rounds * len(spec.participants)
    return max_turns


ORDERINGS = DISCUSSION_ORDERINGS
"""The values the ``ordering`` knob accepts (the first is the default)."""


def check_ordering(spec: ChannelSpec) -> None:
    """Refuse an ``ordering`` knob this adapter does not implement (InvalidArgument naming the allowed values)."""
    ordering = spec.knobs.get("ordering")
    if ordering is None or (isinstance(ordering, str) and ordering in ORDERINGS):
        return
    raise InvalidArgument(
        f"discussion channel: knob 'ordering' is {ordering!r}, which is not supported; "
        f"allowed: {', '.join(repr(o) for o in ORDERINGS)} (the default). Leave it out or give one of those.",
        metadata={"knob": "ordering", "allowed": ",".join(ORDERINGS)},
    )


@dataclass(frozen=True)
class DiscussionState:
    """Turns taken so far and who speaks next."""

    expected_next_speaker: str
    turns: int = 0
    end_reason: str | None = None


class DiscussionAdapter:
    """Hub half of the discussion channel type (strict round robin)."""

    type: ClassVar[str] = DISCUSSION_TYPE
    expectations: ClassVar[frozenset[str]] = TURN_EXPECTATIONS

    def validate_create(self, spec: ChannelSpec) -> dict[str, Any]:
        """Two or more participants; a known ``ordering``; ``max_turns`` / ``max_rounds`` as ``max_turns``."""
        require_participants(spec, at_least=2)
        check_knobs(spec)
        check_ordering(spec)
        max_turns = discussion_max_turns(spec)
        knobs = {k: v for k, v in spec.knobs.items() if k not in ("max_turns", "max_rounds")}
        if max_turns is not None:
            knobs["max_turns"] = max_turns
        return knobs

    def initial_state(self, spec: ChannelSpec) -> DiscussionState:
        """The initiator speaks first."""
        return DiscussionState(expected_next_speaker=spec.participants[0])

    def validate_send(self, spec: ChannelSpec, state: DiscussionState, env: Envelope) -> None:
        """Only the expected next speaker may post a substantive envelope."""
        if not is_substantive(env):
            return
        if state.end_reason is not None:
            raise channel_closed(
                spec, f"this discussion reached its max_turns limit ({state.turns} turns). Open a new channel."
            )
        if env.sender_id != state.expected_next_speaker:
            order = " → ".join(label(spec, p) for p in spec.participants)
            raise not_your_turn(
                spec,
                env,
                state.expected_next_speaker,
                f"wait for their envelope; speakers take turns in round robin ({order}).",
            )

    def fold(self, spec: ChannelSpec, state: DiscussionState, env: Envelope) -> DiscussionState:
        """A substantive envelope passes the turn to the next participant in order."""
        if not is_substantive(env) or state.end_reason is not None:
            return state
        turns = state.turns + 1
        max_turns = spec.derived(discussion_max_turns)
        end = "max_turns" if max_turns is not None and turns >= max_turns else None
        nxt = spec.participants[turns % len(spec.participants)]
        # Direct construction (every field given): dataclasses.replace costs more than the rest of the fold.
        return DiscussionState(expected_next_speaker=nxt, turns=turns, end_reason=end)

    def fold_run(self, spec: ChannelSpec, state: DiscussionState, envs: Sequence[Envelope]) -> DiscussionState:
        """``fold`` of each in turn: the substantive ones pass the turn on, up to the limit."""
        if state.end_reason is not None:
            return state
        n = substantive_count(envs)
        if not n:
            return state
        turns, end = counted_turns(state.turns, n, spec.derived(discussion_max_turns))
        nxt = spec.participants[turns % len(spec.participants)]
        return DiscussionState(expected_next_speaker=nxt, turns=turns, end_reason=end)

    def on_accepted(self, spec: ChannelSpec, state: DiscussionState, env: Envelope) -> Accepted:
        """Close with ``max_turns`` when the envelope just folded reached the limit."""
        if is_substantive(env) and state.end_reason is not None:
            return Accepted(close_reason=state.end_reason)
        return Accepted()

    def expected_next(self, spec: ChannelSpec, state: DiscussionState) -> list[str]:
        """[expected_next_speaker], or [] once the limit was reached."""
        return [] if state.end_reason is not None else [state.expected_next_speaker]

    def default_view(self, spec: ChannelSpec) -> tuple[str, int]:
        """A named windowed summary of the last ``max(2 * participants, 4)`` envelopes."""
        return named_window(spec)

    def offers_say(self, spec: ChannelSpec, state: DiscussionState, participant_id: str) -> bool:
        """``say`` only for the expected next speaker (the `say` column of docs/hub.md, Adapters)."""
        return state.end_reason is None and participant_id == state.expected_next_speaker

    def state_json(self, state: DiscussionState) -> dict[str, Any]:
        """Turns, next speaker and end state as JSON."""
        return {
            "turns": state.turns,
            "expected_next_speaker": state.expected_next_speaker,
            "ended": state.end_reason is not None,
            "end_reason": state.end_reason,
        }
