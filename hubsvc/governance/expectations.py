"""Channel expectations: which apply to a channel, and when each is due (pure functions).

An expectation is a deadline on a channel (``acks_within``, ``reply_within``,
``max_silence``, ``turn_within``) and the action the hub takes once when it passes
(docs/governance.md "Expectations"). This module holds the parts that need no I/O:

* :func:`resolve_expectations` — the expectations of a new channel: the built-in defaults
  (:data:`DEFAULT_EXPECTATIONS`, AG2's adapters' defaults), overridden by the policy's ``"*"``
  entry, overridden by its channel type's entry, overridden by the channel's
  ``knobs.expectations`` (``null`` turns one off); stored in the channel's knobs, so a
  channel keeps the expectations it was opened with across policy reloads and restarts;
* :class:`ExpectationTrack` — the times an evaluator needs, folded from the channel's WAL
  (so after a restart hydrate folds them again), and the firings already recorded there;
* :func:`pending` — every expectation not yet fired, with its deadline and whom it
  expects something of; the caller fires those whose deadline has passed.

Each firing is anchored on the envelope that started its clock (``since_seq``): the
channel's creation for ``acks_within``, the question for ``reply_within``, the last
participant envelope for ``max_silence``, the envelope that made the current speaker
due for ``turn_within``. A firing is recorded in the WAL (``ag2.channel.expectation_violated``
with ``since_seq``); an expectation fires at most once per anchor.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, get_args

from pydantic import TypeAdapter, ValidationError

from hubsvc.governance.policy import (
    EXPECTATION_TYPES,
    ExpectationAction,
    ExpectationName,
    ExpectationSpec,
    Policy,
)
from netkernel.channel_types import CONSULTING_TYPE, CONVERSATION_TYPE, DISCUSSION_TYPE, WORKFLOW_TYPE
from netkernel.envelope import EV_CHANNEL_OPENED, EV_EXPECTATION_VIOLATED, SUBSTANTIVE_EVENT_TYPES, Envelope
from netkernel.errors import InvalidArgument

log = logging.getLogger("agentnet.hub")

EXPECTATION_NAMES: tuple[ExpectationName, ...] = get_args(ExpectationName)
ACTIONS: tuple[ExpectationAction, ...] = get_args(ExpectationAction)
KNOB = "expectations"
"""The channel knob holding a channel's expectations."""

APPLIES_TO = EXPECTATION_TYPES
"""The channel types each expectation applies to (None = every type)."""

DESCRIPTIONS: dict[ExpectationName, str] = {
    "acks_within": "ack the invite within {s}s of the channel's creation",
    "reply_within": "reply within {s}s of the question",
    "max_silence": "post within {s}s of the last participant envelope (the channel went silent)",
    "turn_within": "take the turn within {s}s of becoming due",
}

CHANNEL_WIDE: frozenset[ExpectationName] = frozenset({"max_silence"})
"""Expectations the channel as a whole violates, as AG2's ``MaxSilenceEvaluator``: one firing is one
violation (one audit row) and names no violator (``expected_of`` is empty)."""

DEFAULT_EXPECTATIONS: dict[str, dict[ExpectationName, ExpectationSpec]] = {
    CONSULTING_TYPE: {"reply_within": ExpectationSpec(seconds=600, action="auto_close")},
    CONVERSATION_TYPE: {"max_silence": ExpectationSpec(seconds=3600, action="audit")},
    DISCUSSION_TYPE: {"turn_within": ExpectationSpec(seconds=120, action="warn")},
    WORKFLOW_TYPE: {"turn_within": ExpectationSpec(seconds=600, action="auto_close")},
}
"""The expectations in force when neither the policy nor the channel says otherwise, so no channel
waits silently forever (docs/governance.md "Defaults"). The values are those AG2 1.2.1's adapters
declare; where AG2 declares two ``turn_within`` (a warning, then a harder action later) only one fits
here (one spec per name): a discussion keeps the warning, a workflow the close. A consulting
channel's invite acks are the hub's invite-ack timeout (30 s, closing with ``invite_timeout``), which
is AG2's ``acks_within(30 s, auto_close)`` already."""

_Overrides = TypeAdapter(dict[ExpectationName, ExpectationSpec | None])


def applies(name: ExpectationName, channel_type: str) -> bool:
    """Whether expectation ``name`` means anything in a channel of ``channel_type``."""
    types = APPLIES_TO[name]
    return types is None or channel_type in types


def resolve_expectations(policy: Policy, channel_type: str, knob: Any) -> dict[ExpectationName, ExpectationSpec]:
    """The expectations of a new ``channel_type`` channel whose ``knobs.expectations`` is ``knob``.

    The built-in :data:`DEFAULT_EXPECTATIONS`, then policy ``"*"``, then the policy's entry for
    the type, then the knob, each overriding the one before expectation by expectation
    (``None`` / ``null`` turns one off). Policy entries that do not apply to the type are
    skipped; a knob naming one is refused.
    Raises InvalidArgument naming the problem.
    """
    merged: dict[ExpectationName, ExpectationSpec | None] = dict(DEFAULT_EXPECTATIONS.get(channel_type, {}))
    for key in ("*", channel_type):
        for name, spec in policy.expectations.get(key, {}).items():
            if applies(name, channel_type):
                merged[name] = spec
    if knob is not None:
        overrides = parse_overrides(knob)
        for name, spec in overrides.items():
            if not applies(name, channel_type):
                kinds = ", ".join(sorted(APPLIES_TO[name] or ()))
                raise InvalidArgument(
                    f"knobs_json.expectations.{name} does not apply to {channel_type} channels (only to: {kinds}); "
                    "remove it, or use max_silence, which applies to every channel type.",
                    metadata={"field": f"knobs_json.expectations.{name}"},
                )
            merged[name] = spec
    return {name: spec for name, spec in merged.items() if spec is not None}


def parse_overrides(knob: Any) -> dict[ExpectationName, ExpectationSpec | None]:
    """A channel's ``knobs.expectations`` validated (InvalidArgument naming the bad part otherwise)."""
    try:
        return _Overrides.validate_python(knob)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(["knobs_json.expectations", *(str(p) for p in first["loc"])])
        raise InvalidArgument(
            f'{where}: {first["msg"]}. Give {{name: {{"seconds": N, "action": A}} or null}} with name one of '
            f"{', '.join(EXPECTATION_NAMES)} and action one of {', '.join(ACTIONS)}.",
            metadata={"field": where},
        ) from None


def to_knob(expectations: Mapping[ExpectationName, ExpectationSpec]) -> dict[str, Any]:
    """The stored form of resolved expectations (the ``expectations`` knob of the channel)."""
    return {name: spec.model_dump() for name, spec in expectations.items()}


def from_knobs(knobs: Mapping[str, Any]) -> dict[ExpectationName, ExpectationSpec]:
    """A stored channel's resolved expectations (its ``expectations`` knob; {} without one).

    The knob was validated when the channel opened; one this version cannot read (written
    under another schema) is logged and ignored rather than stopping the hub's start."""
    knob = knobs.get(KNOB)
    if not knob:
        return {}
    try:
        overrides = parse_overrides(knob)
    except InvalidArgument as err:
        log.warning("ignoring a channel's stored expectations: %s", err.message)
        return {}
    return {name: spec for name, spec in overrides.items() if spec is not None}


@dataclass
class ExpectationTrack:
    """What the channel's WAL says about its expectations (folded envelope by envelope).

    Times are the envelopes' ``created_at`` texts (parsed only when a deadline is computed,
    so folding stays cheap on the hydrate path); seq 0 means "not yet".
    """

    opened_seq: int = 0
    opened_at: str = ""
    last_post_seq: int = 0
    """The last envelope a participant posted (any event type)."""
    last_post_at: str = ""
    turn_seq: int = 0
    """The envelope that made the current speaker due: the last substantive one, else opened."""
    turn_at: str = ""
    question_seq: int = 0
    """The first substantive envelope (a consulting channel's question)."""
    question_at: str = ""
    fired: dict[str, int] = field(default_factory=dict)
    """expectation name -> the latest ``since_seq`` it fired for."""
    hidden: dict[str, int] = field(default_factory=dict)
    """agent id -> seq of the ``hide`` firing that hid it (until it posts in the channel again)."""

    def observe(self, env: Envelope, *, from_hub: bool) -> None:
        """Fold one admitted envelope (``from_hub``: the hub posted it)."""
        if from_hub:
            if env.event_type == EV_CHANNEL_OPENED:
                self.opened_seq, self.opened_at = env.seq, env.created_at
                if not self.turn_seq:
                    self.turn_seq, self.turn_at = env.seq, env.created_at
            elif env.event_type == EV_EXPECTATION_VIOLATED:
                self._observe_firing(env)
            return
        self.last_post_seq, self.last_post_at = env.seq, env.created_at
        if self.hidden:
            self.hidden.pop(env.sender_id, None)
        if env.event_type in SUBSTANTIVE_EVENT_TYPES:
            self.turn_seq, self.turn_at = env.seq, env.created_at
            if not self.question_seq:
                self.question_seq, self.question_at = env.seq, env.created_at

    def _observe_firing(self, env: Envelope) -> None:
        data = env.event_data
        name, since = data.get("expectation"), data.get("since_seq")
        if not isinstance(name, str) or not isinstance(since, int):
            return
        self.fired[name] = max(self.fired.get(name, -1), since)
        if data.get("action") == "hide":
            for agent_id in data.get("expected_of") or ():
                if isinstance(agent_id, str):
                    self.hidden[agent_id] = env.seq

    def has_fired(self, name: str, since_seq: int) -> bool:
        """Whether ``name`` already fired for the clock started at ``since_seq``."""
        return self.fired.get(name, -1) >= since_seq


@dataclass(frozen=True)
class ChannelFacts:
    """What the evaluators read of one live channel (built by the hub from its runtime)."""

    channel_type: str
    state: str
    """"pending" (waiting for invite acks), "opened" or "ended"."""
    created_at: float
    participants: tuple[str, ...]
    unacked: tuple[str, ...]
    """Invitees that have not acked their invite."""
    expected_next: tuple[str, ...]
    """Whom the adapter expects to speak next ([] = anyone, or no one)."""
    track: ExpectationTrack


@dataclass(frozen=True)
class Violation:
    """One expectation whose clock is running: what is expected of whom, and by when."""

    name: ExpectationName
    spec: ExpectationSpec
    since_seq: int
    """The envelope that started the clock (0: the channel's creation)."""
    since: float
    deadline: float
    expected_of: tuple[str, ...]

    @property
    def channel_wide(self) -> bool:
        """Whether the channel as a whole violated it (``max_silence``) rather than each of ``expected_of``."""
        return self.name in CHANNEL_WIDE

    @property
    def description(self) -> str:
        """What was expected, in words ("take the turn within 60s of becoming due")."""
        return DESCRIPTIONS[self.name].format(s=f"{self.spec.seconds:g}")


def parse_time(text: str) -> float:
    """Seconds since the epoch of an envelope's ``created_at`` (RFC 3339, "Z")."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _clock(name: ExpectationName, spec: ExpectationSpec, seq: int, at: str, whom: Sequence[str]) -> Violation | None:
    if not whom:
        return None
    since = parse_time(at)
    return Violation(name, spec, seq, since, since + spec.seconds, tuple(whom))


def acks_within(spec: ExpectationSpec, facts: ChannelFacts) -> Violation | None:
    """Every invitee acks its invite within ``seconds`` of the channel's creation."""
    if facts.state != "pending" or not facts.unacked:
        return None
    return Violation("acks_within", spec, 0, facts.created_at, facts.created_at + spec.seconds, tuple(facts.unacked))


def reply_within(spec: ExpectationSpec, facts: ChannelFacts) -> Violation | None:
    """The respondent (whoever is due after the question) replies within ``seconds`` of the question."""
    t = facts.track
    if facts.state != "opened" or not t.question_seq:
        return None
    return _clock("reply_within", spec, t.question_seq, t.question_at, facts.expected_next)


def max_silence(spec: ExpectationSpec, facts: ChannelFacts) -> Violation | None:
    """Some participant posts within ``seconds`` of the last participant envelope (or the opening).

    Channel-wide: the channel went silent, no participant in particular, so it names no violator
    (AG2's ``violator_ids=[]``); who is due next is ``turn_within``'s business."""
    t = facts.track
    if facts.state != "opened" or not t.opened_seq:
        return None
    seq, at = (t.last_post_seq, t.last_post_at) if t.last_post_seq > t.opened_seq else (t.opened_seq, t.opened_at)
    since = parse_time(at)
    return Violation("max_silence", spec, seq, since, since + spec.seconds, ())


def turn_within(spec: ExpectationSpec, facts: ChannelFacts) -> Violation | None:
    """The participant whose turn it is speaks within ``seconds`` of becoming due."""
    t = facts.track
    if facts.state != "opened" or not t.turn_seq:
        return None
    return _clock("turn_within", spec, t.turn_seq, t.turn_at, facts.expected_next)


EVALUATORS = {
    "acks_within": acks_within,
    "reply_within": reply_within,
    "max_silence": max_silence,
    "turn_within": turn_within,
}


def pending(expectations: Mapping[ExpectationName, ExpectationSpec], facts: ChannelFacts) -> list[Violation]:
    """Every expectation of the channel whose clock runs and that has not fired for it yet."""
    out = []
    for name, spec in expectations.items():
        found = EVALUATORS[name](spec, facts)
        if found is not None and not facts.track.has_fired(name, found.since_seq):
            out.append(found)
    return out
