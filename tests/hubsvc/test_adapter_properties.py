"""Hypothesis properties of the adapters: replay equals live state, and each type's turn invariants.

Each test drives the hub's real admission unit (:class:`hubsvc.core.admission.Admission`)
over a random envelope stream, without a server: the channel is created pending and
opened by its invitees' acks; lifecycle envelopes are then posted by the hub itself
(stamped and folded without validation); everything else is admitted as a participant's
post — validated, stamped, folded, staged and passed to on_accepted. The stream stops
when the channel ends: the adapter closed it, or the hub posted closed/expired. A
recording wrapper around the adapter checks that every fold is pure and keeps the WAL
and the state after each entry.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from agentnet.v1 import envelope_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hubsvc.adapters import ADAPTERS
from hubsvc.adapters.base import Adapter, ChannelSpec
from hubsvc.core.admission import Admission, Batch
from hubsvc.core.channel import HUB_SENDER, OPENED, ChannelRuntime
from hubsvc.core.options import HubOptions
from netkernel.envelope import (
    EV_CHANNEL_INVITE_ACK,
    EV_CONTEXT_SET,
    EV_PACKET,
    EV_TASK_CANCEL_REQUEST,
    EV_TEXT,
    LIFECYCLE_EVENT_TYPES,
    SUBSTANTIVE_EVENT_TYPES,
    Envelope,
)
from netkernel.errors import InvalidArgument, ProtocolError
from netkernel.wire import envelope_from_wal, envelope_from_wire, envelope_to_wire

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TOOLS = ("approve", "reject", "handoff")
KEYS = ("stage", "count", "flag")
CID = "ch-prop"
NOW = 1_700_000_000.0

json_values = st.one_of(
    st.none(), st.booleans(), st.integers(-2, 2), st.sampled_from(["draft", "review", "done"]), st.just([1, 2])
)


@dataclass
class Run:
    """What the admission unit did with one channel."""

    spec: ChannelSpec
    wal: list[Envelope] = field(default_factory=list)
    states: list[Any] = field(default_factory=list)
    """Live state after each WAL entry (states[0] is the initial state)."""
    substantive_senders: list[str] = field(default_factory=list)
    refused_substantive: list[tuple[Envelope, Any]] = field(default_factory=list)
    """Refused substantive envelopes with the state they were refused in."""
    close_reason: str | None = None
    """The reason the adapter closed the channel with (through on_accepted), if it did."""


# ---------------------------------------------------------------- strategies


@st.composite
def specs(draw: st.DrawFn, type_: str, min_n: int, max_n: int) -> ChannelSpec:
    """A spec with 2..n participants ids p0.. and names n0.. (knobs filled in later)."""
    n = draw(st.integers(min_n, max_n))
    parts = tuple(f"p{i}" for i in range(n))
    return ChannelSpec(
        channel_id=CID, type=type_, initiator=parts[0], participants=parts, names={p: f"n{p[1:]}" for p in parts}
    )


def refs(spec: ChannelSpec) -> st.SearchStrategy[str]:
    """A participant reference: its id or its name."""
    return st.sampled_from([*spec.participants, *(spec.names[p] for p in spec.participants)])


def conditions(spec: ChannelSpec, depth: int = 1) -> st.SearchStrategy[dict[str, Any]]:
    """A random transition condition, optionally with an ``and`` list."""
    base = st.one_of(
        st.just({"type": "always"}),
        refs(spec).map(lambda r: {"type": "from_speaker", "speaker": r}),
        st.sampled_from(TOOLS).map(lambda t: {"type": "tool_called", "tool": t}),
        st.tuples(st.sampled_from(KEYS), json_values).map(
            lambda kv: {"type": "context_equals", "key": kv[0], "value": kv[1]}
        ),
    )
    if depth == 0:
        return base
    return st.tuples(base, st.lists(conditions(spec, depth - 1), max_size=1)).map(
        lambda pair: {**pair[0], "and": pair[1]} if pair[1] else pair[0]
    )


def targets(spec: ChannelSpec) -> st.SearchStrategy[dict[str, Any]]:
    """A random transition target (terminate is one choice of several, so runs get long)."""
    return st.one_of(
        refs(spec).map(lambda r: {"type": "agent", "agent": r}),
        st.sampled_from(
            [{"type": "round_robin"}, {"type": "stay"}, {"type": "revert_to_initiator"}, {"type": "terminate"}]
        ),
    )


@st.composite
def workflow_knobs(draw: st.DrawFn, spec: ChannelSpec) -> dict[str, Any]:
    """Random valid workflow knobs referencing participants by id or name."""
    transitions = draw(
        st.lists(
            st.fixed_dictionaries(
                {"condition": conditions(spec), "target": targets(spec)},
                optional={"priority": st.integers(-2, 2)},
            ),
            max_size=5,
        )
    )
    if draw(st.booleans()):
        # A catch-all tried last (lower priority is tried first) keeps many runs going past the
        # first unmatched round.
        transitions.append({"condition": {"type": "always"}, "target": {"type": "round_robin"}, "priority": 3})
    knobs: dict[str, Any] = {"transitions": transitions, "max_turns": draw(st.integers(1, 15))}
    if draw(st.booleans()):
        knobs["default_target"] = draw(targets(spec))
    if draw(st.booleans()):
        knobs["initial_speaker"] = draw(refs(spec))
    if draw(st.booleans()):
        knobs["context"] = draw(st.dictionaries(st.sampled_from(KEYS), json_values, max_size=3))
    return knobs


def _make(sender: str, event_type: str, data: dict[str, Any]) -> Envelope:
    return Envelope(channel_id=CID, sender_id=sender, audience=None, event_type=event_type, event_data=data)


def _context_updates() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {},
        optional={
            "set": st.dictionaries(st.sampled_from(KEYS), json_values, max_size=2),
            "delete": st.lists(st.sampled_from(KEYS), max_size=2),
        },
    )


# Strategies are cached per participant tuple: building one per step made runs ~10x slower.
@functools.cache
def non_turn_envelopes(participants: tuple[str, ...]) -> st.SearchStrategy[Envelope]:
    """Lifecycle (from the hub), custom, task and context-set envelopes (some context sets malformed)."""
    sender = st.sampled_from(participants)
    malformed = st.sampled_from([{"set": [1]}, {"delete": "stage"}, {"bogus": 1}])
    return st.one_of(
        st.builds(_make, st.just(HUB_SENDER), st.sampled_from(sorted(LIFECYCLE_EVENT_TYPES)), st.just({"reason": "r"})),
        st.builds(_make, sender, st.sampled_from(["myapp.x", EV_TASK_CANCEL_REQUEST]), st.just({"k": 1})),
        st.builds(_make, sender, st.just(EV_CONTEXT_SET), st.one_of(_context_updates(), malformed)),
    )


@functools.cache
def envelopes(participants: tuple[str, ...], preferred: str | None = None) -> st.SearchStrategy[Envelope]:
    """Any envelope the core might fold on this channel: substantive (some malformed) or not.

    Substantive senders lean towards ``preferred`` (the expected speaker) so runs get deep.
    """
    anyone = st.sampled_from(participants)
    sender = anyone if preferred is None else st.one_of(st.just(preferred), anyone)
    routing = st.fixed_dictionaries(
        {"tool_called": st.one_of(st.none(), st.sampled_from(TOOLS))},
        optional={"tools_called": st.lists(st.sampled_from(TOOLS), max_size=2)},
    )
    packet_data = st.fixed_dictionaries(
        {"body": st.just("b")}, optional={"routing": routing, "context_updates": _context_updates()}
    )
    return st.one_of(
        st.builds(_make, sender, st.just(EV_TEXT), st.just({"text": "hi"})),
        st.builds(_make, sender, st.just(EV_PACKET), packet_data),
        st.builds(_make, sender, st.just(EV_PACKET), st.just({"routing": "bad"})),
        non_turn_envelopes(participants),
    )


# ---------------------------------------------------------------- the real admission unit


class Recording:
    """Wraps an adapter: checks that every fold is pure and records the WAL and the state after each entry."""

    def __init__(self, adapter: Adapter[Any], run: Run) -> None:
        self._adapter = adapter
        self._run = run

    def __getattr__(self, name: str) -> Any:
        return getattr(self._adapter, name)

    def fold(self, spec: ChannelSpec, state: Any, env: Envelope) -> Any:
        before = copy.deepcopy(state)
        new_state = self._adapter.fold(spec, state, env)
        assert state == before, "fold mutated its input state"
        lifecycle = env.event_type in LIFECYCLE_EVENT_TYPES
        if lifecycle or env.event_type not in (*SUBSTANTIVE_EVENT_TYPES, EV_CONTEXT_SET):
            assert new_state == state, f"{env.event_type} changed the turn state"
        if lifecycle:
            # The core never asks on_accepted about lifecycle envelopes; they must not close a channel either.
            assert self._adapter.on_accepted(spec, new_state, env).close_reason is None
        json.dumps(self._adapter.state_json(new_state))
        self._run.wal.append(env)
        self._run.states.append(new_state)
        if env.event_type in SUBSTANTIVE_EVENT_TYPES:
            self._run.substantive_senders.append(env.sender_id)
        return new_state


def simulate(spec: ChannelSpec, pick: Callable[[ChannelSpec, Any], Envelope], steps: int) -> Run:
    """Open a channel of ``spec`` and post ``steps`` envelopes chosen by ``pick(spec, state)`` through Admission."""
    adapter = ADAPTERS[spec.type]
    spec = replace(spec, knobs=adapter.validate_create(spec))
    run = Run(spec=spec)
    admission = Admission(HubOptions(), clock=lambda: NOW)
    ch = ChannelRuntime.pending(spec, Recording(adapter, run), intent="", invite_ack_timeout=30.0, ttl=None, now=NOW)
    run.states.append(ch.state)
    json.dumps(adapter.state_json(ch.state))
    for invitee in spec.participants[1:]:
        admission.admit(ch, invitee, _make(invitee, EV_CHANNEL_INVITE_ACK, {}), Batch())
    assert ch.meta.state == OPENED
    for _ in range(steps):
        env = pick(spec, ch.state)
        batch = Batch()
        if env.sender_id == HUB_SENDER:
            admission.post_as_hub(ch, env.event_type, env.event_data, env.audience, batch)
        else:
            state = ch.state
            try:
                admission.admit(ch, env.sender_id, env, batch)
            except (ProtocolError, InvalidArgument):
                if env.event_type in SUBSTANTIVE_EVENT_TYPES:
                    run.refused_substantive.append((env, state))
                continue
        if batch.ended is not None:
            run.close_reason = batch.ended
        if ch.is_terminal:
            break
    return run


def replay(run: Run) -> Any:
    """Hydrate: fold the WAL from the initial state."""
    adapter = ADAPTERS[run.spec.type]
    state = adapter.initial_state(run.spec)
    for env in run.wal:
        state = adapter.fold(run.spec, state, env)
    return state


# ---------------------------------------------------------------- properties


@st.composite
def runs(draw: st.DrawFn, type_: str, min_n: int, max_n: int) -> Run:
    """A simulated run of a random channel of ``type_``."""
    spec = draw(specs(type_, min_n, max_n))
    if type_ == "workflow":
        spec = replace(spec, knobs=draw(workflow_knobs(spec)))
    elif type_ in ("conversation", "discussion"):
        spec = replace(spec, knobs=draw(st.sampled_from([{}, {"max_turns": 3}, {"max_turns": 7}])))

    def pick(spec: ChannelSpec, state: Any) -> Envelope:
        expected = ADAPTERS[spec.type].expected_next(spec, state)
        return draw(envelopes(spec.participants, expected[0] if expected else None))

    return simulate(spec, pick, draw(st.integers(0, 60)))


@SETTINGS
@given(runs("consulting", 2, 2))
def test_consulting_properties(run: Run) -> None:
    assert replay(run) == run.states[-1]
    assert len(run.substantive_senders) <= 2
    for env, state in run.refused_substantive:
        assert state.replied or env.sender_id != state.expected
    assert run.substantive_senders == list(run.spec.participants[: len(run.substantive_senders)])
    assert (run.close_reason == "consulting_complete") == (len(run.substantive_senders) == 2)


@SETTINGS
@given(runs("conversation", 2, 2))
def test_conversation_properties(run: Run) -> None:
    assert replay(run) == run.states[-1]
    assert run.refused_substantive == []
    limit = run.spec.knobs.get("max_turns")
    assert run.states[-1].turns == len(run.substantive_senders)
    if limit is not None:
        assert len(run.substantive_senders) <= limit
        assert (run.close_reason == "max_turns") == (len(run.substantive_senders) == limit)


@SETTINGS
@given(runs("discussion", 2, 5))
def test_discussion_properties(run: Run) -> None:
    assert replay(run) == run.states[-1]
    parts = run.spec.participants
    assert run.substantive_senders == [parts[i % len(parts)] for i in range(len(run.substantive_senders))]
    adapter = ADAPTERS["discussion"]
    for state in run.states:
        offered = [p for p in parts if adapter.offers_say(run.spec, state, p)]
        assert offered == adapter.expected_next(run.spec, state)
    # The expected speaker is never refused.
    for env, state in run.refused_substantive:
        assert env.sender_id != state.expected_next_speaker


@SETTINGS
@given(runs("workflow", 2, 5))
def test_workflow_properties(run: Run) -> None:
    assert replay(run) == run.states[-1]
    adapter = ADAPTERS["workflow"]
    # The knobs the core stores validate to themselves.
    assert adapter.validate_create(run.spec) == run.spec.knobs
    for state in run.states:
        assert state.current_speaker in run.spec.participants
        assert not any(adapter.offers_say(run.spec, state, p) for p in run.spec.participants)
    final = run.states[-1]
    assert final.turns == len(run.substantive_senders)
    assert final.turns <= run.spec.knobs["max_turns"]
    assert (run.close_reason is not None) == final.ended
    if run.close_reason is not None:
        assert run.close_reason == final.end_reason
        # Terminate targets here name no reason; no match without a default target terminates too.
        assert run.close_reason in ("after_work", "max_turns")
    # Each admitted substantive envelope came from the speaker whose turn it was.
    speaker_before = [
        before.current_speaker
        for before, env in zip(run.states[:-1], run.wal, strict=True)
        if env.event_type in SUBSTANTIVE_EVENT_TYPES
    ]
    assert speaker_before == run.substantive_senders
    # The current speaker is refused only for a malformed packet.
    for env, state in run.refused_substantive:
        assert env.sender_id != state.current_speaker or env.event_data == {"routing": "bad"}


@SETTINGS
@given(st.sampled_from(["consulting", "conversation", "discussion"]), st.data())
def test_lifecycle_and_custom_only_streams_never_advance(type_: str, data: st.DataObject) -> None:
    n = 2 if type_ != "discussion" else data.draw(st.integers(2, 5))
    spec = data.draw(specs(type_, n, n))
    run = simulate(
        spec, lambda spec, _: data.draw(non_turn_envelopes(spec.participants)), data.draw(st.integers(0, 30))
    )
    assert run.close_reason is None
    assert all(state == run.states[0] for state in run.states)


def rebuild(run: Run, decode: Callable[[envelope_pb2.Envelope], Envelope]) -> ChannelRuntime:
    """Hydrate as the hub does: fold every WAL entry read back from its stored bytes through ``decode``."""
    ch = ChannelRuntime.pending(
        run.spec, ADAPTERS[run.spec.type], intent="", invite_ack_timeout=30.0, ttl=None, now=NOW
    )
    for env in run.wal:
        ch.fold(decode(envelope_pb2.Envelope.FromString(envelope_to_wire(env).SerializeToString())), NOW)
    return ch


@SETTINGS
@given(st.sampled_from([("consulting", 2), ("conversation", 2), ("discussion", 5), ("workflow", 5)]), st.data())
def test_folding_stored_envelopes_with_lazy_event_data_rebuilds_the_live_channel(
    kind: tuple[str, int], data: st.DataObject
) -> None:
    """Hydrate parses event_data only when a fold reads it; every channel comes back exactly as it was."""
    run = data.draw(runs(kind[0], 2, kind[1]))
    lazy, eager = rebuild(run, envelope_from_wal), rebuild(run, envelope_from_wire)
    assert lazy.state == eager.state == run.states[-1]
    assert lazy.meta == eager.meta
    assert lazy.last_seq == eager.last_seq
    assert dict(lazy.depths.items()) == dict(eager.depths.items())
    assert dict(lazy.idempotent.items()) == dict(eager.idempotent.items())


@SETTINGS
@given(st.sampled_from([("consulting", 2), ("conversation", 2), ("discussion", 5), ("workflow", 5)]), st.data())
def test_folding_a_run_at_once_gives_the_state_of_folding_each_in_turn(
    kind: tuple[str, int], data: st.DataObject
) -> None:
    """fold_run (hydrate's fold) equals fold of each in turn, for any stream (limits included) split anywhere."""
    type_, max_n = kind
    adapter = ADAPTERS[type_]
    spec = data.draw(specs(type_, 2, max_n))
    if type_ == "workflow":
        spec = replace(spec, knobs=data.draw(workflow_knobs(spec)))
    elif type_ in ("conversation", "discussion"):
        spec = replace(spec, knobs=data.draw(st.sampled_from([{}, {"max_turns": 1}, {"max_turns": 3}])))
    spec = replace(spec, knobs=adapter.validate_create(spec))
    stream = data.draw(st.lists(envelopes(spec.participants), max_size=40))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=4)))
    each = adapter.initial_state(spec)
    for env in stream:
        each = adapter.fold(spec, each, env)
    state = adapter.initial_state(spec)
    for low, high in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        before = copy.deepcopy(state)
        new_state = adapter.fold_run(spec, state, stream[low:high])
        assert state == before, "fold_run mutated its input state"
        state = new_state
    assert state == each


def rebuild_in_runs(run: Run, cuts: list[int]) -> ChannelRuntime:
    """Hydrate as the hub does: the stored WAL read back through envelope_from_wal, folded a run at a time."""
    ch = ChannelRuntime.pending(
        run.spec, ADAPTERS[run.spec.type], intent="", invite_ack_timeout=30.0, ttl=None, now=NOW
    )
    stored = [
        envelope_from_wal(envelope_pb2.Envelope.FromString(envelope_to_wire(env).SerializeToString()))
        for env in run.wal
    ]
    for low, high in zip([0, *cuts], [*cuts, len(stored)], strict=True):
        ch.fold_run(stored[low:high], NOW)
    return ch


@SETTINGS
@given(st.sampled_from([("consulting", 2), ("conversation", 2), ("discussion", 5), ("workflow", 5)]), st.data())
def test_a_channel_folded_a_run_at_a_time_is_the_live_channel(kind: tuple[str, int], data: st.DataObject) -> None:
    """ChannelRuntime.fold_run over the stored WAL, split anywhere, rebuilds what folding each envelope built."""
    run = data.draw(runs(kind[0], 2, kind[1]))
    for i, env in enumerate(run.wal):  # some envelopes carry a depth and an idempotency key
        env.seq = i + 1
        if data.draw(st.booleans()):
            env.depth, env.idempotency_key, env.envelope_id = i % 3, f"k{i % 4}", f"e{i}"
    cuts = sorted(data.draw(st.lists(st.integers(0, len(run.wal)), max_size=4)))
    in_runs, eager = rebuild_in_runs(run, cuts), rebuild(run, envelope_from_wire)
    assert in_runs.state == eager.state == run.states[-1]
    assert in_runs.meta == eager.meta
    assert in_runs.last_seq == eager.last_seq
    assert list(in_runs.depths.items()) == list(eager.depths.items())
    assert list(in_runs.idempotent.items()) == list(eager.idempotent.items())
