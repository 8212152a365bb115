"""Workflow: a transition graph decides who speaks after each round.

Only the current speaker may post a substantive envelope (EV_PACKET, or EV_TEXT as
a packet without routing — how a human seeder kicks a workflow off). Folding it
applies the packet's context updates, counts the turn and runs the transition graph
(:mod:`hubsvc.adapters.workflow_graph`). EV_CONTEXT_SET may come from any
participant at any time and only changes the context. Workflow never offers ``say``:
routing is done by the agents' own handoff tools through the round-end packet.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, ClassVar

from hubsvc.adapters.base import Accepted, ChannelSpec
from hubsvc.adapters.common import (
    TURN_EXPECTATIONS,
    channel_closed,
    fold_each,
    is_substantive,
    named_window,
    not_your_turn,
    require_participants,
)
from hubsvc.adapters.knobs import check_knobs
from hubsvc.adapters.payloads import ContextUpdates, Packet, canonical_json, parse_context_updates, parse_packet
from hubsvc.adapters.workflow_graph import (
    MAX_TURNS,
    TARGET_UNAVAILABLE,
    parse_workflow_knobs,
    stored_workflow_config,
)
from netkernel.channel_types import WORKFLOW_TYPE
from netkernel.envelope import EV_CONTEXT_SET, Envelope
from netkernel.errors import InvalidArgument

_CONTEXT_SET_WHERE = "ag2.context.set event_data"
_NO_UPDATES = ContextUpdates()
_UNREAD: Mapping[str, Any] = MappingProxyType({})
"""The context passed to ``decide`` when no condition reads it."""


@dataclass(frozen=True)
class WorkflowState:
    """Current speaker, turns taken, context vars and whether the workflow ended."""

    current_speaker: str
    turns: int = 0
    context_json: str = "{}"
    """Context vars as canonical JSON text, so the state stays an immutable value."""
    end_reason: str | None = None
    """Once ended: a terminate target's reason (``after_work`` when it names none, as when no transition
    holds and there is no other default target), a Finish's close reason, or ``max_turns``."""

    @property
    def context(self) -> dict[str, Any]:
        """A fresh copy of the context vars."""
        loaded: dict[str, Any] = json.loads(self.context_json)
        return loaded

    @property
    def ended(self) -> bool:
        """True once a transition or the turn limit ended the workflow."""
        return self.end_reason is not None


GRAPH_KNOBS = ("transitions", "default_target")
"""A workflow's knobs must name at least one of these: a workflow without a graph is refused, as AG2's."""


class WorkflowAdapter:
    """Hub half of the workflow channel type."""

    type: ClassVar[str] = WORKFLOW_TYPE
    expectations: ClassVar[frozenset[str]] = TURN_EXPECTATIONS

    def validate_create(self, spec: ChannelSpec) -> dict[str, Any]:
        """Two or more participants and valid knobs holding a transition graph (as AG2's hub requires
        ``knobs["graph"]``); returns the knobs with ids and defaults."""
        require_participants(spec, at_least=2)
        check_knobs(spec)
        if not any(name in spec.knobs for name in GRAPH_KNOBS):
            raise InvalidArgument(
                "workflow channel: the knobs hold no transition graph; give 'transitions' and/or 'default_target' "
                '(e.g. {"transitions": [{"condition": {"type": "always"}, "target": {"type": "round_robin"}}]}, '
                "or TransitionGraph(...).to_knobs() in the Python SDK), as AG2's hub requires a graph",
                metadata={"knob": "transitions"},
            )
        return {**spec.knobs, **parse_workflow_knobs(spec).to_knobs()}

    def initial_state(self, spec: ChannelSpec) -> WorkflowState:
        """The initial speaker holds the turn; the context holds the ``context`` knob."""
        config = spec.derived(stored_workflow_config)
        return WorkflowState(current_speaker=config.initial_speaker, context_json=config.context_json)

    def validate_send(self, spec: ChannelSpec, state: WorkflowState, env: Envelope) -> None:
        """Context sets from anyone; substantive envelopes only from the current speaker, well-formed."""
        if env.event_type == EV_CONTEXT_SET:
            parse_context_updates(env.event_data, spec=spec, where=_CONTEXT_SET_WHERE)
            return
        if not is_substantive(env):
            return
        if state.end_reason == TARGET_UNAVAILABLE:
            raise channel_closed(
                spec,
                f"this workflow stopped ({TARGET_UNAVAILABLE}): a custom transition target of its graph is not "
                "registered in this hub process, or could not decide. Start the hub with the same "
                "--transition-targets as when the channel opened, and it goes on from where it was.",
            )
        if state.end_reason is not None:
            raise channel_closed(
                spec, f"this workflow has ended ({state.end_reason}). Open a new channel to run again."
            )
        if env.sender_id != state.current_speaker:
            raise not_your_turn(
                spec,
                env,
                state.current_speaker,
                "wait for their envelope; the workflow's transitions choose who speaks next "
                "(ag2.context.set is allowed at any time).",
            )
        parse_packet(env, spec=spec)

    def fold(self, spec: ChannelSpec, state: WorkflowState, env: Envelope) -> WorkflowState:
        """Apply context sets; for a substantive envelope also count the turn and route."""
        if env.event_type == EV_CONTEXT_SET:
            try:
                updates = parse_context_updates(env.event_data, spec=spec, where=_CONTEXT_SET_WHERE)
            except InvalidArgument:
                return state  # validate_send refuses these; ignoring keeps replay total
            return replace(state, context_json=canonical_json(updates.apply(state.context)))
        if not is_substantive(env) or state.end_reason is not None:
            return state
        try:
            packet = parse_packet(env, spec=spec)
        except InvalidArgument:
            packet = Packet()  # unreachable for admitted envelopes; the turn still counts
        config = spec.derived(stored_workflow_config)
        if packet.updates == _NO_UPDATES:  # the context stays; its canonical text too
            context_json = state.context_json
            # Parsed only for a condition that reads it.
            context: Mapping[str, Any] = state.context if config.reads_context else _UNREAD
        else:
            context = packet.updates.apply(state.context)
            context_json = canonical_json(context)
        turns = state.turns + 1
        decision = config.decide(spec, env.sender_id, packet.routing, context, turns)
        # The graph's own end (a terminate target, the default one too) wins over the turn limit.
        end = decision.end_reason or (MAX_TURNS if turns >= config.max_turns else None)
        return WorkflowState(
            current_speaker=decision.next_speaker,
            turns=turns,
            context_json=context_json,
            end_reason=end,
        )

    def fold_run(self, spec: ChannelSpec, state: WorkflowState, envs: Sequence[Envelope]) -> WorkflowState:
        """``fold`` of each in turn."""
        return fold_each(self, spec, state, envs)

    def on_accepted(self, spec: ChannelSpec, state: WorkflowState, env: Envelope) -> Accepted:
        """Close with the end reason once the envelope just folded ended the workflow."""
        if is_substantive(env) and state.end_reason is not None:
            return Accepted(close_reason=state.end_reason)
        return Accepted()

    def expected_next(self, spec: ChannelSpec, state: WorkflowState) -> list[str]:
        """[current_speaker], or [] once ended."""
        return [] if state.end_reason is not None else [state.current_speaker]

    def default_view(self, spec: ChannelSpec) -> tuple[str, int]:
        """A named windowed summary of the last ``max(2 * participants, 4)`` envelopes."""
        return named_window(spec)

    def offers_say(self, spec: ChannelSpec, state: WorkflowState, participant_id: str) -> bool:
        """Never: workflow agents speak through the round-end packet (the `say` column of docs/hub.md, Adapters)."""
        return False

    def state_json(self, state: WorkflowState) -> dict[str, Any]:
        """Speaker, turns, context and end state as JSON."""
        return {
            "current_speaker": state.current_speaker,
            "turns": state.turns,
            "context": state.context,
            "ended": state.ended,
            "end_reason": state.end_reason,
        }
