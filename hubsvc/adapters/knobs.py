"""Every channel type's knobs, their defaults and meanings: the one table the adapters check and
docs/hub.md "Knobs" shows (``tests/hubsvc/test_knobs_doc.py`` compares the two).

``OpenChannel``'s ``knobs_json`` may name only these: an unknown knob (a typo such as ``rounds``
for ``max_rounds``) is refused with INVALID_ARGUMENT naming it and the valid ones, so a knob is
never silently ignored. The knobs every type takes (:data:`COMMON`) are checked here too; each
adapter's ``validate_create`` checks the values of its own.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from hubsvc.adapters.base import ChannelSpec
from netkernel.channel_types import CONSULTING_TYPE, CONVERSATION_TYPE, DISCUSSION_TYPE, WORKFLOW_TYPE
from netkernel.errors import InvalidArgument

TurnFailureAction = Literal["close", "notify"]
"""What the hub does when a member reports a failed turn (docs/hub.md "Failed turns")."""
TURN_FAILURE_ACTIONS: tuple[TurnFailureAction, ...] = get_args(TurnFailureAction)
ON_TURN_FAILED = "on_turn_failed"
"""The knob choosing a channel's turn-failure action."""
TURN_FAILED_REASON = "turn_failed"
"""The close reason of a channel the ``close`` action ended."""

TURN_FAILURE_DEFAULTS: dict[str, TurnFailureAction] = {
    CONSULTING_TYPE: "close",
    CONVERSATION_TYPE: "notify",
    DISCUSSION_TYPE: "notify",
    WORKFLOW_TYPE: "notify",
}
"""The default ``on_turn_failed`` of each type: a consulting channel exists for one answer, so when
the answer fails the channel ends (its asker's wait ends with TURN_FAILED); in the other types the
other members can go on (and the failed member may take its turn again), so the channel stays open."""


@dataclass(frozen=True)
class Knob:
    """One knob of a channel type: its name, its default (as docs/hub.md writes it) and its meaning."""

    name: str
    default: str
    meaning: str


COMMON: tuple[Knob, ...] = (
    Knob(
        "expectations",
        "the policy's, else the built-in defaults",
        "deadlines and their actions, by expectation name (`null` turns one off); docs/governance.md",
    ),
    Knob(
        ON_TURN_FAILED,
        "`close` (consulting), `notify` (other types)",
        "what a reported failed turn does: `close` ends the channel with `turn_failed`, `notify` only posts "
        "`ag2.channel.turn_failed`",
    ),
    Knob("labels", "none", "a JSON object kept verbatim (the AG2 gateway keeps an AG2 channel's labels here)"),
)
"""Knobs every channel type takes."""

_MAX_TURNS = Knob("max_turns", "none (no limit)", "close the channel with `max_turns` after this many turns")

OWN: dict[str, tuple[Knob, ...]] = {
    CONSULTING_TYPE: (),
    CONVERSATION_TYPE: (_MAX_TURNS,),
    DISCUSSION_TYPE: (
        Knob("ordering", "`round_robin`", "who speaks next; `round_robin` (participant order) is the only value"),
        _MAX_TURNS,
        Knob("max_rounds", "none (no limit)", "`max_turns` = this × participants (give one of the two)"),
    ),
    WORKFLOW_TYPE: (
        Knob("initial_speaker", "the initiator", "who speaks first (a participant name or id)"),
        Knob("max_turns", "`50`", "close the channel with `max_turns` after this many turns"),
        Knob("context", "`{}`", "the initial context (a JSON object)"),
        Knob(
            "transitions",
            "`[]`",
            "the transition graph (see Workflow knobs); a workflow needs this or `default_target`",
        ),
        Knob("default_target", '`{"type": "terminate"}`', "the target when no transition holds"),
        Knob("graph", "none", "an AG2 `TransitionGraph` (the AG2 gateway translates it and keeps it verbatim)"),
        Knob("context_vars", "none", "AG2's initial context (the AG2 gateway copies it to `context`)"),
    ),
}
"""Each built-in type's own knobs."""


def knobs_of(channel_type: str) -> dict[str, Knob]:
    """Every knob a ``channel_type`` channel takes, by name (its own, then the common ones)."""
    return {k.name: k for k in (*OWN.get(channel_type, ()), *COMMON)}


def check_knobs(spec: ChannelSpec) -> None:
    """Refuse a knob ``spec.type`` does not take, and a bad value of a common one (InvalidArgument naming
    the knob and what is valid; the message names no channel: none exists yet)."""
    valid = knobs_of(spec.type)
    for name in spec.knobs:
        if name not in valid:
            close = difflib.get_close_matches(name, valid, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise InvalidArgument(
                f"{spec.type} channels have no knob '{name}'{hint}; valid knobs: {', '.join(sorted(valid))} "
                "(docs/hub.md, Knobs). Nothing was created.",
                metadata={"knob": name, "valid": ",".join(sorted(valid)), "type": spec.type},
            )
    action = spec.knobs.get(ON_TURN_FAILED)
    if action is not None and action not in TURN_FAILURE_ACTIONS:
        raise InvalidArgument(
            f"{spec.type} channel: knob '{ON_TURN_FAILED}' is {action!r}; give one of "
            f"{', '.join(repr(a) for a in TURN_FAILURE_ACTIONS)} or leave it out (default "
            f"{TURN_FAILURE_DEFAULTS.get(spec.type, 'notify')!r}). Nothing was created.",
            metadata={"knob": ON_TURN_FAILED, "allowed": ",".join(TURN_FAILURE_ACTIONS)},
        )
    labels = spec.knobs.get("labels")
    if labels is not None and not isinstance(labels, Mapping):
        raise InvalidArgument(
            f"{spec.type} channel: knob 'labels' must be a JSON object, got {labels!r}. Nothing was created.",
            metadata={"knob": "labels"},
        )


def turn_failure_action(channel_type: str, knobs: Mapping[str, Any]) -> TurnFailureAction:
    """What a reported failed turn does in a channel of ``channel_type`` with ``knobs``."""
    action = knobs.get(ON_TURN_FAILED)
    if action in TURN_FAILURE_ACTIONS:
        return action  # type: ignore[no-any-return]
    return TURN_FAILURE_DEFAULTS.get(channel_type, "notify")
