"""Workflow transitions as values: conditions, targets, :class:`Transition` and :class:`TransitionGraph`.

The hub reads a workflow's transition graph from its knobs as JSON (docs/hub.md,
"Workflow knobs"). These values build that JSON instead of raw dicts::

    graph = TransitionGraph(
        initial_speaker="user",
        transitions=[
            Transition(FromSpeaker("user"), AgentTarget("writer")),
            Transition(ToolCalled("approve"), TerminateTarget(reason="approved"), priority=-10),
            Transition(ContextEquals("draft", None), AgentTarget("writer")),
        ],
        default_target=RoundRobinTarget(),
    )
    channel = await user.open(type="workflow", target=["writer", "reviewer"], knobs=graph.to_knobs())

Field names and factories (``TransitionGraph.round_robin``, ``.sequence``) follow AG2 1.2.1's
``ag2.network``. Every value has ``to_json()``; ``open(knobs=...)`` also takes them anywhere inside the
knobs (e.g. ``{"transitions": [Transition(...)]}``). Participants are named by passport
name or agent id; the hub resolves and validates them when the channel opens. As in AG2,
transitions are tried by ascending ``priority`` (lower first), ties in the order given, and
when none holds ``default_target`` decides (by default ``TerminateTarget()``: the channel
closes with ``after_work``).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from agentsdk.routing import MAX_CLOSE_REASON
from netkernel.transition_targets import TargetChoice, TurnView, register_target, target_args

__all__ = [
    "AgentTarget",
    "Always",
    "ContextEquals",
    "CustomTarget",
    "FromSpeaker",
    "RevertToInitiatorTarget",
    "RoundRobinTarget",
    "StayTarget",
    "TargetChoice",
    "TerminateTarget",
    "ToolCalled",
    "Transition",
    "TransitionCondition",
    "TransitionGraph",
    "TransitionTarget",
    "TurnView",
    "knob_json",
    "register_target",
]


@dataclass(frozen=True)
class TransitionCondition:
    """When a transition fires; ``also`` adds conditions that must hold too (the knob's ``"and"``)."""

    type: ClassVar[str] = ""
    also: tuple[TransitionCondition, ...] = field(default=(), kw_only=True)

    def fields(self) -> dict[str, Any]:
        """The condition's own keys besides ``type`` and ``and``."""
        return {}

    def to_json(self) -> dict[str, Any]:
        """The knob form, e.g. ``{"type": "tool_called", "tool": "approve"}``."""
        out: dict[str, Any] = {"type": self.type, **self.fields()}
        if self.also:
            out["and"] = [c.to_json() for c in self.also]
        return out


@dataclass(frozen=True)
class Always(TransitionCondition):
    """Always holds."""

    type: ClassVar[str] = "always"


@dataclass(frozen=True)
class FromSpeaker(TransitionCondition):
    """Holds when ``agent_id`` (a participant's agent id or passport name) posted the envelope just folded."""

    agent_id: str
    type: ClassVar[str] = "from_speaker"

    def fields(self) -> dict[str, Any]:
        """``speaker``."""
        return {"speaker": self.agent_id}


@dataclass(frozen=True)
class ToolCalled(TransitionCondition):
    """Holds when the packet's routing tool (the first routing call of the turn) is ``tool_name``."""

    tool_name: str
    type: ClassVar[str] = "tool_called"

    def fields(self) -> dict[str, Any]:
        """``tool``."""
        return {"tool": self.tool_name}


@dataclass(frozen=True)
class ContextEquals(TransitionCondition):
    """Holds when context var ``key`` JSON-equals ``value``; a missing key counts as ``None``."""

    key: str
    value: Any
    type: ClassVar[str] = "context_equals"

    def fields(self) -> dict[str, Any]:
        """``key`` and ``value``."""
        return {"key": self.key, "value": self.value}


@dataclass(frozen=True)
class TransitionTarget:
    """Where the turn goes when a transition fires."""

    type: ClassVar[str] = ""

    def to_json(self) -> dict[str, Any]:
        """The knob form, e.g. ``{"type": "round_robin"}``."""
        return {"type": self.type}


@dataclass(frozen=True)
class AgentTarget(TransitionTarget):
    """``agent_id`` (a participant's agent id or passport name) speaks next."""

    agent_id: str
    type: ClassVar[str] = "agent"

    def to_json(self) -> dict[str, Any]:
        """``{"type": "agent", "agent": ...}``."""
        return {"type": self.type, "agent": self.agent_id}


@dataclass(frozen=True)
class RoundRobinTarget(TransitionTarget):
    """The participant after the speaker, in participant order."""

    type: ClassVar[str] = "round_robin"


@dataclass(frozen=True)
class StayTarget(TransitionTarget):
    """The speaker speaks again."""

    type: ClassVar[str] = "stay"


@dataclass(frozen=True)
class RevertToInitiatorTarget(TransitionTarget):
    """The channel's initiator speaks next."""

    type: ClassVar[str] = "revert_to_initiator"


@dataclass(frozen=True)
class TerminateTarget(TransitionTarget):
    """The workflow ends; the channel closes with ``reason`` (default ``after_work``, as AG2's).

    A reason is a non-empty string of at most 64 characters; others raise ValueError here
    (the hub refuses them too)."""

    reason: str = "after_work"
    type: ClassVar[str] = "terminate"

    def __post_init__(self) -> None:
        if not isinstance(self.reason, str) or not self.reason.strip() or len(self.reason) > MAX_CLOSE_REASON:
            raise ValueError(
                f"TerminateTarget.reason is the channel's close reason: a non-empty string of at most "
                f"{MAX_CLOSE_REASON} characters; got {self.reason!r} (leave it out for 'after_work')"
            )

    def to_json(self) -> dict[str, Any]:
        """``{"type": "terminate", "reason": ...}``."""
        return {"type": self.type, "reason": self.reason}


@dataclass(frozen=True)
class CustomTarget(TransitionTarget):
    """A transition target of your own (AG2's ``register_target``): subclass it as a dataclass with a
    ``type`` name, fields for its arguments (JSON values) and ``resolve(turn)``, and register it::

        @register_target
        @dataclass(frozen=True)
        class ByTopic(CustomTarget):
            type: ClassVar[str] = "by_topic"
            experts: dict[str, str] = field(default_factory=dict)   # topic -> participant name

            def resolve(self, turn: TurnView) -> TargetChoice:
                expert = self.experts.get(str(turn.context.get("topic")))
                return TargetChoice(next_speaker=expert) if expert else TargetChoice(end_reason="no_expert")

    In a graph it is ``{"type": "by_topic", "args": {"experts": {...}}}`` (:meth:`to_json`), so the
    graph stays data. The hub runs ``resolve`` in its own process on each turn the transition
    decides: an embedded hub (``Hub.open``) sees the classes this program registered; a hub process
    loads them with ``--transition-targets package.module:attribute`` (docs/hub.md). ``resolve`` must
    be a pure function of ``turn`` and the fields: the hub folds the WAL again after a restart."""

    def resolve(self, turn: TurnView) -> TargetChoice:
        """Who speaks next after ``turn`` (a participant's name or id), or the reason to end."""
        raise NotImplementedError(f"{type(self).__name__}.resolve(turn) decides the next speaker; define it")

    def to_json(self) -> dict[str, Any]:
        """``{"type": <type>, "args": {<field>: <value>, ...}}``."""
        return {"type": self.type, "args": target_args(self)}


@dataclass(frozen=True)
class Transition:
    """When ``when`` holds, ``then`` picks the next speaker; lower ``priority`` is tried first, ties in list order."""

    when: TransitionCondition
    then: TransitionTarget
    priority: int = 0

    def to_json(self) -> dict[str, Any]:
        """``{"condition": ..., "target": ..., "priority": ...}``."""
        return {"condition": self.when.to_json(), "target": self.then.to_json(), "priority": self.priority}


@dataclass(frozen=True)
class TransitionGraph:
    """A workflow's knobs as one value: who starts, the transitions, and what happens when none fires.

    ``default_target`` decides a turn no transition matches; the default ``TerminateTarget()``
    closes the channel with ``after_work`` (AG2's default)."""

    initial_speaker: str | None = None
    """A participant's name or id (None: the initiator)."""
    transitions: Sequence[Transition] = ()
    default_target: TransitionTarget = field(default_factory=TerminateTarget)
    max_turns: int | None = None
    """None: the hub's default (50)."""
    context: Mapping[str, Any] | None = None
    """Initial context vars."""

    def __post_init__(self) -> None:
        if not isinstance(self.default_target, TransitionTarget):
            raise TypeError(
                f"TransitionGraph.default_target must be a transition target, got {self.default_target!r}; "
                "leave it out to end unmatched turns with TerminateTarget() ('after_work')"
            )

    def to_knobs(self) -> dict[str, Any]:
        """The workflow knobs for ``open(type="workflow", knobs=...)``."""
        knobs: dict[str, Any] = {
            "transitions": [t.to_json() for t in self.transitions],
            "default_target": self.default_target.to_json(),
        }
        if self.initial_speaker is not None:
            knobs["initial_speaker"] = self.initial_speaker
        if self.max_turns is not None:
            knobs["max_turns"] = self.max_turns
        if self.context is not None:
            knobs["context"] = dict(self.context)
        return knobs

    def to_json(self) -> dict[str, Any]:
        """Same as :meth:`to_knobs`."""
        return self.to_knobs()

    @classmethod
    def round_robin(cls, participants: Sequence[str], *, max_turns: int | None = None) -> TransitionGraph:
        """Everyone in participant order, ``participants[0]`` first, until ``max_turns``."""
        if not participants:
            raise ValueError("round_robin needs at least one participant (the first speaks first)")
        return cls(
            initial_speaker=participants[0],
            transitions=[Transition(Always(), RoundRobinTarget())],
            default_target=TerminateTarget(reason="round_robin_complete"),
            max_turns=max_turns,
        )

    @classmethod
    def sequence(cls, steps: Sequence[str]) -> TransitionGraph:
        """A pipeline: ``steps[0]`` → ``steps[1]`` → … → the channel closes with ``sequence_complete``."""
        if not steps:
            raise ValueError("sequence needs at least one step")
        return cls(
            initial_speaker=steps[0],
            transitions=[Transition(FromSpeaker(a), AgentTarget(b)) for a, b in itertools.pairwise(steps)],
            default_target=TerminateTarget(reason="sequence_complete"),
            max_turns=len(steps),
        )


def knob_json(value: Any) -> Any:
    """``json.dumps`` ``default=`` hook: a transition value (anything with ``to_json()``) as its JSON."""
    to_json = getattr(value, "to_json", None)
    if callable(to_json):
        return to_json()
    raise TypeError(f"{type(value).__name__} value {value!r} is not JSON; knobs hold JSON data or transition values")
