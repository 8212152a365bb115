"""The workflow transition graph: parse and validate the knobs, then pick the next speaker.

Knobs (participant references are ids or passport names; normalised to ids)::

    {"initial_speaker": "<id or name>",          # default: the initiator
     "max_turns": int > 0,                        # default 50
     "context": {...},                            # initial context vars, a JSON object; default {}
     "transitions": [                             # default []
        {"condition": C, "target": T, "priority": int}, ...],   # priority default 0
     "default_target": T}                         # when no transition holds; default {"type": "terminate"}

    C = {"type": "always"} | {"type": "from_speaker", "speaker": "<id or name>"}
      | {"type": "tool_called", "tool": "<name>"}
      | {"type": "context_equals", "key": "<k>", "value": <any JSON>}
      each optionally with "and": [C, ...] (all must hold too)
    T = {"type": "agent", "agent": "<id or name>"} | {"type": "round_robin"} | {"type": "stay"}
      | {"type": "revert_to_initiator"} | {"type": "terminate", "reason": "<close reason>"}
      | {"type": "<a registered custom target>", "args": {...}}   (:mod:`netkernel.transition_targets`)
      (the terminate reason is optional; default "after_work")

Transitions are tried by ascending priority (lower first), ties in declaration order; the
first whose condition holds decides, and when none holds the default target does (so by
default the workflow ends with "after_work"). These are AG2 1.2.1's rules. A packet routes
on one tool (:meth:`Routing.routing_tool`: the first the speaker called); ``context_equals``
with value null also matches a missing key. A typed routing value in the packet decides
before the transitions: a Finish ends the workflow with its close reason, a Handoff names
the next speaker. Unknown keys inside a transition, condition or target are refused (a typo
would otherwise silently change routing); unknown top-level knobs are refused (:mod:`hubsvc.adapters.knobs`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hubsvc.adapters.base import ChannelSpec
from hubsvc.adapters.common import participant_list
from hubsvc.adapters.payloads import (
    Routing,
    canonical_json,
    close_reason_problem,
    json_equal,
    json_problem,
)
from netkernel.errors import InvalidArgument
from netkernel.packet import DEFAULT_FINISH_REASON, KIND_FINISH, KIND_HANDOFF
from netkernel.transition_targets import TARGETS, TurnView

DEFAULT_MAX_TURNS = 50
AFTER_WORK = "after_work"
"""The close reason of a terminate target that names none (the default target's, too)."""
MAX_TURNS = "max_turns"
TARGET_UNAVAILABLE = "target_unavailable"
"""The close reason when a custom target cannot decide: not registered in this hub process (a restart
without its ``--transition-targets``), its ``resolve`` raised, or it named no participant."""

# Per type: the keys it requires besides "type" (plus the optional "and" for conditions).
CONDITION_FIELDS: dict[str, tuple[str, ...]] = {
    "always": (),
    "from_speaker": ("speaker",),
    "tool_called": ("tool",),
    "context_equals": ("key", "value"),
}
TARGET_FIELDS: dict[str, tuple[str, ...]] = {
    "agent": ("agent",),
    "round_robin": (),
    "stay": (),
    "revert_to_initiator": (),
    "terminate": (),
}
_TRANSITION_KEYS = ("condition", "target", "priority")
_EXAMPLE = '[{"condition": {"type": "always"}, "target": {"type": "round_robin"}}]'


@dataclass(frozen=True)
class Condition:
    """One normalised transition condition (``speaker`` is an agent id)."""

    type: str
    speaker: str | None = None
    tool: str | None = None
    key: str | None = None
    value_json: str | None = None
    """context_equals' expected value as canonical JSON (immutable)."""
    all_of: tuple[Condition, ...] = ()
    """The optional ``and`` list."""

    def holds(self, sender: str, tool: str | None, context: Mapping[str, Any]) -> bool:
        """Whether this condition (and every ``and`` condition) holds for the envelope just folded
        (``tool``: the packet's routing tool, :meth:`Routing.routing_tool`)."""
        if self.type == "always":
            ok = True
        elif self.type == "from_speaker":
            ok = sender == self.speaker
        elif self.type == "tool_called":
            ok = self.tool is not None and tool == self.tool
        else:  # context_equals: JSON-equal; a missing key (never set, or deleted) counts as null
            ok = json_equal(context.get(self.key or ""), json.loads(self.value_json or "null"))
        return ok and all(c.holds(sender, tool, context) for c in self.all_of)

    def tools(self) -> set[str]:
        """The tools this condition (with its ``and`` list) routes on."""
        own = {self.tool} if self.type == "tool_called" and self.tool else set()
        return own.union(*(c.tools() for c in self.all_of))

    def to_json(self) -> dict[str, Any]:
        """The normalised knob form."""
        out: dict[str, Any] = {"type": self.type}
        if self.type == "from_speaker":
            out["speaker"] = self.speaker
        elif self.type == "tool_called":
            out["tool"] = self.tool
        elif self.type == "context_equals":
            out["key"] = self.key
            out["value"] = json.loads(self.value_json or "null")
        if self.all_of:
            out["and"] = [c.to_json() for c in self.all_of]
        return out


@dataclass(frozen=True)
class Target:
    """One normalised transition target (``agent`` is an agent id)."""

    type: str
    agent: str | None = None
    reason: str | None = None
    """A terminate target's close reason (None: ``after_work``)."""
    args_json: str | None = None
    """A custom target's arguments as canonical JSON (None: a built-in target)."""

    def to_json(self) -> dict[str, Any]:
        """The normalised knob form."""
        if self.args_json is not None:
            return {"type": self.type, "args": json.loads(self.args_json)}
        if self.type == "agent":
            return {"type": self.type, "agent": self.agent}
        if self.type == "terminate" and self.reason is not None:
            return {"type": self.type, "reason": self.reason}
        return {"type": self.type}


@dataclass(frozen=True)
class Transition:
    """An edge of the graph: when ``condition`` holds, ``target`` picks the next speaker."""

    condition: Condition
    target: Target
    priority: int = 0

    def to_json(self) -> dict[str, Any]:
        """The normalised knob form."""
        return {"condition": self.condition.to_json(), "target": self.target.to_json(), "priority": self.priority}


@dataclass(frozen=True)
class Decision:
    """What the graph decided after a substantive envelope."""

    next_speaker: str
    end_reason: str | None = None


@dataclass(frozen=True)
class WorkflowConfig:
    """Validated, normalised workflow knobs."""

    initial_speaker: str
    max_turns: int
    context_json: str
    """Initial context vars as canonical JSON."""
    transitions: tuple[Transition, ...]
    """In declaration order."""
    default_target: Target = Target("terminate")
    """Decides when no transition holds (default: end with ``after_work``)."""

    @functools.cached_property
    def ranked(self) -> tuple[Transition, ...]:
        """Transitions in evaluation order: ascending priority (lower first), ties in declaration order."""
        # sorted() is stable, so equal priorities keep their declaration order.
        return tuple(sorted(self.transitions, key=lambda t: t.priority))

    @functools.cached_property
    def routing_tools(self) -> frozenset[str]:
        """Every tool a ``tool_called`` condition names (a packet without ``tool_called`` routes on the first)."""
        return frozenset(name for t in self.transitions for name in t.condition.tools())

    @functools.cached_property
    def reads_context(self) -> bool:
        """Whether any condition or custom target reads the context vars (``decide`` ignores them otherwise)."""
        if any(t.args_json is not None for t in (self.default_target, *(t.target for t in self.transitions))):
            return True
        level = [t.condition for t in self.transitions]
        while level:
            if any(c.type == "context_equals" for c in level):
                return True
            level = [c for parent in level for c in parent.all_of]
        return False

    def to_knobs(self) -> dict[str, Any]:
        """The normalised knobs (ids, defaults filled in)."""
        return {
            "initial_speaker": self.initial_speaker,
            "max_turns": self.max_turns,
            "context": json.loads(self.context_json),
            "transitions": [t.to_json() for t in self.transitions],
            "default_target": self.default_target.to_json(),
        }

    def decide(
        self, spec: ChannelSpec, speaker: str, routing: Routing, context: Mapping[str, Any], turns: int = 0
    ) -> Decision:
        """Pick the next speaker after ``speaker``'s envelope (``context`` already updated; ``turns``
        taken, this one included).

        A typed routing value decides first (a Finish ends, a Handoff names the speaker); else
        the transitions, on the packet's one routing tool; else the default target."""
        if routing.kind == KIND_FINISH:
            return Decision(next_speaker=speaker, end_reason=routing.close_reason or DEFAULT_FINISH_REASON)
        if routing.kind == KIND_HANDOFF and routing.target is not None:
            chosen = spec.resolve(routing.target)
            if chosen is not None:  # validate_send refused any other
                return Decision(next_speaker=chosen)
        tool = routing.routing_tool(self.routing_tools)
        target = next((t.target for t in self.ranked if t.condition.holds(speaker, tool, context)), self.default_target)
        if target.args_json is not None:
            turn = TurnView(speaker, spec.participants, spec.initiator, spec.names, context, turns, tool)
            return _custom_decision(spec, target, turn)
        if target.type == "terminate":
            return Decision(next_speaker=speaker, end_reason=target.reason or AFTER_WORK)
        if target.type == "agent" and target.agent is not None:
            return Decision(next_speaker=target.agent)
        if target.type == "round_robin":
            order = spec.participants
            return Decision(next_speaker=order[(order.index(speaker) + 1) % len(order)])
        if target.type == "revert_to_initiator":
            return Decision(next_speaker=spec.initiator)
        return Decision(next_speaker=speaker)  # stay


def _custom_decision(spec: ChannelSpec, target: Target, turn: TurnView) -> Decision:
    """A custom target's decision; one that cannot decide ends the workflow with :data:`TARGET_UNAVAILABLE`
    (a fold never raises: the hub folds this WAL again after a restart)."""
    unavailable = Decision(next_speaker=turn.speaker, end_reason=TARGET_UNAVAILABLE)
    if TARGETS.get(target.type) is None or target.args_json is None:
        return unavailable
    try:
        choice = TARGETS.build(target.type, json.loads(target.args_json)).resolve(turn)
    except Exception:  # user code: whatever it raises, the channel gets a clear end instead of a broken fold
        return unavailable
    end = getattr(choice, "end_reason", None)
    if end is not None:
        return Decision(
            next_speaker=turn.speaker, end_reason=end if close_reason_problem(end) is None else TARGET_UNAVAILABLE
        )
    ref = getattr(choice, "next_speaker", None)
    chosen = spec.resolve(ref) if isinstance(ref, str) else None
    return unavailable if chosen is None else Decision(next_speaker=chosen)


class _KnobParser:
    """Validates workflow knobs; every error names the offending path and how to fix it.

    ``strict``: a custom target must be registered in this process and take its arguments (when a
    channel opens); not strict (the stored knobs of an open channel, folded again), it is kept as
    it was stored and decides, or ends the workflow, when a turn reaches it."""

    def __init__(self, spec: ChannelSpec, strict: bool = True) -> None:
        self.spec = spec
        self.strict = strict

    def fail(self, where: str, problem: str, fix: str) -> InvalidArgument:
        return InvalidArgument(
            f"workflow channel: {where} {problem}; {fix}",
            metadata={"knob": where},
        )

    def participant(self, ref: Any, where: str) -> str:
        if not isinstance(ref, str) or not ref:
            raise self.fail(where, f"must be a participant id or name, got {ref!r}", "give a string")
        agent_id = self.spec.resolve(ref)
        if agent_id is None:
            raise self.fail(
                where,
                f"'{ref}' is not a participant",
                f"use the id or name of one of: {participant_list(self.spec)}",
            )
        return agent_id

    def obj(self, value: Any, where: str, allowed: tuple[str, ...]) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(where, f"must be an object, got {value!r}", f"give an object with keys {list(allowed)}")
        unknown = sorted(str(k) for k in value if k not in allowed)
        if unknown:
            raise self.fail(where, f"has unknown key(s) {unknown}", f"allowed keys are {list(allowed)}")
        return value

    def kind(self, value: Mapping[str, Any], where: str, kinds: Mapping[str, tuple[str, ...]]) -> str:
        kind = value.get("type")
        if not isinstance(kind, str) or kind not in kinds:
            raise self.fail(f"{where}.type", f"is {kind!r}", f"use one of {', '.join(kinds)}")
        for name in kinds[kind]:
            if name not in value:
                raise self.fail(where, f"of type '{kind}' needs '{name}'", f'add "{name}": ...')
        return kind

    def condition(self, value: Any, where: str) -> Condition:
        raw = self.obj(value, where, ("type", "speaker", "tool", "key", "value", "and"))
        kind = self.kind(raw, where, CONDITION_FIELDS)
        stray = [k for k in raw if k not in ("type", "and", *CONDITION_FIELDS[kind])]
        if stray:
            raise self.fail(where, f"of type '{kind}' does not take {stray}", "remove them")
        extra = raw.get("and")
        if extra is None:
            extra = []
        if not isinstance(extra, list | tuple):
            raise self.fail(f"{where}.and", f"must be a list of conditions, got {extra!r}", "wrap them in [...]")
        all_of = tuple(self.condition(c, f"{where}.and[{i}]") for i, c in enumerate(extra))
        if kind == "from_speaker":
            return Condition(kind, speaker=self.participant(raw["speaker"], f"{where}.speaker"), all_of=all_of)
        if kind == "tool_called":
            tool = raw["tool"]
            if not isinstance(tool, str) or not tool:
                raise self.fail(f"{where}.tool", f"must be a tool name, got {tool!r}", "give a non-empty string")
            return Condition(kind, tool=tool, all_of=all_of)
        if kind == "context_equals":
            key = raw["key"]
            if not isinstance(key, str) or not key:
                raise self.fail(f"{where}.key", f"must be a context key, got {key!r}", "give a non-empty string")
            problem = json_problem(raw["value"])
            if problem:
                raise self.fail(f"{where}.value", f"is not JSON: {problem}", "use JSON data")
            return Condition(kind, key=key, value_json=canonical_json(raw["value"]), all_of=all_of)
        return Condition(kind, all_of=all_of)

    def custom_target(self, value: Mapping[str, Any], where: str) -> Target:
        name = value["type"]
        raw = self.obj(value, where, ("type", "args"))
        args = raw.get("args", {})
        if not isinstance(args, Mapping) or json_problem(args):
            raise self.fail(f"{where}.args", f"must be a JSON object, got {args!r}", "give the target's fields by name")
        if self.strict:
            try:
                TARGETS.build(name, args)
            except (TypeError, ValueError) as err:
                raise self.fail(
                    f"{where}.args", f"do not fit custom target '{name}': {err}", "give its fields"
                ) from None
        return Target(name, args_json=canonical_json(args))

    def target(self, value: Any, where: str) -> Target:
        if isinstance(value, Mapping) and value.get("type") not in TARGET_FIELDS and isinstance(value.get("type"), str):
            if TARGETS.get(value["type"]) is not None or not self.strict:
                return self.custom_target(value, where)
            registered = TARGETS.names()
            raise self.fail(
                f"{where}.type",
                f"is {value['type']!r}",
                f"use one of {', '.join(TARGET_FIELDS)}"
                + (f", or a custom target registered in this hub: {', '.join(registered)}" if registered else "")
                + " (custom targets: register_target, or the hub's --transition-targets)",
            )
        raw = self.obj(value, where, ("type", "agent", "reason"))
        kind = self.kind(raw, where, TARGET_FIELDS)
        if "reason" in raw:
            if kind != "terminate":
                raise self.fail(
                    where, f"of type '{kind}' does not take 'reason'", "only terminate names a close reason"
                )
            problem = close_reason_problem(raw["reason"])
            if problem:
                raise self.fail(f"{where}.reason", problem, "name the close reason, e.g. 'approved'")
            return Target(kind, reason=raw["reason"])
        if kind != "agent":
            if "agent" in raw:
                raise self.fail(where, f"of type '{kind}' does not take 'agent'", "remove it, or use type 'agent'")
            return Target(kind)
        return Target(kind, agent=self.participant(raw["agent"], f"{where}.agent"))

    def transition(self, value: Any, where: str) -> Transition:
        raw = self.obj(value, where, _TRANSITION_KEYS)
        for name in ("condition", "target"):
            if name not in raw:
                raise self.fail(
                    where, f"has no '{name}'", f"every transition needs a condition and a target, e.g. {_EXAMPLE}"
                )
        priority = raw.get("priority", 0)
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise self.fail(
                f"{where}.priority", f"must be an integer, got {priority!r}", "lower is tried first; default 0"
            )
        return Transition(
            self.condition(raw["condition"], f"{where}.condition"),
            self.target(raw["target"], f"{where}.target"),
            priority,
        )

    def config(self, knobs: Mapping[str, Any]) -> WorkflowConfig:
        initial = knobs.get("initial_speaker")
        speaker = self.spec.initiator if initial is None else self.participant(initial, "knob 'initial_speaker'")
        max_turns = knobs.get("max_turns")
        if max_turns is None:
            max_turns = DEFAULT_MAX_TURNS
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns <= 0:
            raise self.fail(
                "knob 'max_turns'", f"must be a positive integer, got {max_turns!r}", "e.g. 50 (the default)"
            )
        context = knobs.get("context")
        if context is None:
            context = {}
        if not isinstance(context, Mapping):
            raise self.fail("knob 'context'", f"must be a JSON object, got {context!r}", 'e.g. {"stage": "draft"}')
        problem = json_problem(context)
        if problem:
            raise self.fail("knob 'context'", f"is not JSON: {problem}", "use strings, finite numbers, lists, objects")
        transitions = knobs.get("transitions")
        if transitions is None:
            transitions = []
        if not isinstance(transitions, list | tuple):
            raise self.fail("knob 'transitions'", f"must be a list, got {transitions!r}", f"e.g. {_EXAMPLE}")
        parsed = tuple(self.transition(t, f"transitions[{i}]") for i, t in enumerate(transitions))
        default = knobs.get("default_target")
        default_target = Target("terminate") if default is None else self.target(default, "knob 'default_target'")
        return WorkflowConfig(speaker, max_turns, canonical_json(context), parsed, default_target)


def parse_workflow_knobs(spec: ChannelSpec) -> WorkflowConfig:
    """Validate ``spec.knobs`` as workflow knobs (raises InvalidArgument saying what to fix)."""
    return _KnobParser(spec).config(spec.knobs)


def stored_workflow_config(spec: ChannelSpec) -> WorkflowConfig:
    """The config of an open channel's stored knobs (validated when it opened): custom targets are
    kept whether or not this process has them registered, so hydrate never fails on them."""
    return _KnobParser(spec, strict=False).config(spec.knobs)
