"""Unit tests for the hub halves of the four channel adapters (pure functions, no hub), and of what
admission checks before an adapter is asked."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

import pytest

from agentsdk.errors import ChannelClosed, InvalidArgument, NotParticipant, NotYourTurn, ProtocolError
from hubsvc.adapters import (
    ADAPTERS,
    ConsultingAdapter,
    ConversationAdapter,
    DiscussionAdapter,
    WorkflowAdapter,
    get_adapter,
)
from hubsvc.adapters.base import Accepted, ChannelSpec
from hubsvc.adapters.workflow import WorkflowState
from hubsvc.core.admission import Admission, Batch
from hubsvc.core.channel import OPENED, ChannelRuntime
from hubsvc.core.options import HubOptions
from netkernel.envelope import (
    EV_CHANNEL_CLOSED,
    EV_CHANNEL_INVITE,
    EV_CHANNEL_INVITE_ACK,
    EV_CHANNEL_OPENED,
    EV_CONTEXT_SET,
    EV_PACKET,
    EV_TASK_CANCEL_REQUEST,
    EV_TEXT,
    LIFECYCLE_EVENT_TYPES,
    Envelope,
)

A, B, C = "id-a", "id-b", "id-c"
NAMES = {A: "alice", B: "bob", C: "carol"}
CID = "ch-42"

consulting = ConsultingAdapter()
conversation = ConversationAdapter()
discussion = DiscussionAdapter()
workflow = WorkflowAdapter()


# ---------------------------------------------------------------- helpers


def make_spec(
    type_: str, participants: Iterable[str] = (A, B), knobs: Mapping[str, Any] | None = None, *, normalise: bool = True
) -> ChannelSpec:
    """A spec as the core builds it: knobs normalised by the adapter's validate_create."""
    parts = tuple(participants)
    spec = ChannelSpec(
        channel_id=CID,
        type=type_,
        initiator=parts[0],
        participants=parts,
        names={p: NAMES[p] for p in parts},
        knobs=dict(knobs or {}),
    )
    if normalise:
        spec = replace(spec, knobs=ADAPTERS[type_].validate_create(spec))
    return spec


def env(sender: str, event_type: str = EV_TEXT, data: dict[str, Any] | None = None) -> Envelope:
    """An envelope from ``sender``."""
    return Envelope(
        channel_id=CID,
        sender_id=sender,
        audience=None,
        event_type=event_type,
        event_data={"text": "hello"} if data is None else data,
    )


def text(sender: str) -> Envelope:
    """An EV_TEXT."""
    return env(sender, EV_TEXT, {"text": f"from {sender}"})


def packet(
    sender: str,
    *,
    tool: str | None = None,
    tools: list[str] | None = None,
    set_: dict[str, Any] | None = None,
    delete: list[str] | None = None,
) -> Envelope:
    """A workflow EV_PACKET."""
    routing: dict[str, Any] = {"tool_called": tool}
    if tools is not None:
        routing["tools_called"] = tools
    updates = {"set": set_ or {}, "delete": delete or []}
    return env(sender, EV_PACKET, {"routing": routing, "context_updates": updates, "body": "done"})


def context_set(sender: str, set_: dict[str, Any] | None = None, delete: list[str] | None = None) -> Envelope:
    """An EV_CONTEXT_SET."""
    return env(sender, EV_CONTEXT_SET, {"set": set_ or {}, "delete": delete or []})


def non_turn_envelopes(sender: str) -> list[Envelope]:
    """Envelopes that must never advance turn state (lifecycle from the hub, custom, task)."""
    hub = [env("hub", t, {"reason": "x"}) for t in sorted(LIFECYCLE_EVENT_TYPES)]
    return [
        *hub,
        env(sender, "myapp.review_request", {"x": 1}),
        env(sender, EV_TASK_CANCEL_REQUEST, {"task_id": "t1", "reason": "r"}),
    ]


def post(adapter: Any, spec: ChannelSpec, state: Any, envelope: Envelope) -> tuple[Any, Accepted]:
    """What the core does for a participant's post: validate, fold, on_accepted."""
    adapter.validate_send(spec, state, envelope)
    state = adapter.fold(spec, state, envelope)
    return state, adapter.on_accepted(spec, state, envelope)


def run(adapter: Any, spec: ChannelSpec, envelopes: Iterable[Envelope]) -> tuple[Any, list[str | None]]:
    """Post every envelope in order; return the final state and the close reasons seen."""
    state = adapter.initial_state(spec)
    reasons: list[str | None] = []
    for envelope in envelopes:
        state, accepted = post(adapter, spec, state, envelope)
        reasons.append(accepted.close_reason)
    return state, reasons


# ---------------------------------------------------------------- registry and shared rules


def test_registry_has_the_four_types() -> None:
    assert set(ADAPTERS) == {"consulting", "conversation", "discussion", "workflow"}
    for name, adapter in ADAPTERS.items():
        assert adapter.type == name
        assert get_adapter(name) is adapter


def test_get_adapter_unknown_type_lists_valid_types() -> None:
    with pytest.raises(InvalidArgument) as info:
        get_adapter("debate")
    for name in ("consulting", "conversation", "discussion", "workflow", "debate"):
        assert name in info.value.message


@pytest.mark.parametrize(
    ("type_", "participants"),
    [("consulting", (A,)), ("consulting", (A, B, C)), ("conversation", (A, B, C)), ("discussion", (A,))],
)
def test_validate_create_participant_count(type_: str, participants: tuple[str, ...]) -> None:
    with pytest.raises(InvalidArgument) as info:
        make_spec(type_, participants)
    assert type_ in info.value.message
    assert f"got {len(participants)}" in info.value.message


def test_workflow_needs_two_participants() -> None:
    with pytest.raises(InvalidArgument, match=r"workflow channel needs at least 2 participants.*got 1"):
        make_spec("workflow", (A,), {"transitions": [{"condition": {"type": "always"}, "target": {"type": "stay"}}]})


def test_validate_create_refuses_duplicates_and_initiator_not_first() -> None:
    with pytest.raises(InvalidArgument, match="distinct"):
        make_spec("discussion", (A, B, B))
    spec = ChannelSpec(channel_id=CID, type="discussion", initiator=B, participants=(A, B), names=NAMES)
    with pytest.raises(InvalidArgument, match="first participant"):
        discussion.validate_create(spec)


@pytest.mark.parametrize("type_", ["consulting", "conversation", "discussion"])
def test_non_participant_is_refused_by_admission_before_the_adapter_is_asked(type_: str) -> None:
    # Membership is checked once, by admission; an adapter's validate_send sees participants only.
    spec = make_spec(type_)
    asked: list[Envelope] = []

    class Asked:
        def __getattr__(self, name: str) -> Any:
            return getattr(ADAPTERS[type_], name)

        def validate_send(self, spec: ChannelSpec, state: Any, envelope: Envelope) -> None:
            asked.append(envelope)

    ch = ChannelRuntime.pending(spec, Asked(), intent="", invite_ack_timeout=30.0, ttl=None, now=0.0)
    admission = Admission(HubOptions(), clock=lambda: 0.0)
    admission.admit(ch, B, env(B, EV_CHANNEL_INVITE_ACK, {}), Batch())
    assert ch.meta.state == OPENED
    batch = Batch()
    with pytest.raises(NotParticipant, match=CID):
        admission.admit(ch, "mallory", text("mallory"), batch)
    assert not asked and not batch.wires and not batch.charged
    admission.admit(ch, A, text(A), batch)  # a participant's post is the adapter's to judge
    assert [e.sender_id for e in asked] == [A]


@pytest.mark.parametrize("type_", ["consulting", "conversation", "discussion"])
def test_lifecycle_and_custom_events_never_advance_state(type_: str) -> None:
    spec = make_spec(type_)
    adapter = ADAPTERS[type_]
    state = adapter.initial_state(spec)
    for envelope in [*non_turn_envelopes(B), context_set(B, {"k": 1})]:
        if envelope.event_type not in LIFECYCLE_EVENT_TYPES:
            adapter.validate_send(spec, state, envelope)  # no turn rule applies
        assert adapter.fold(spec, state, envelope) == state
        assert adapter.on_accepted(spec, state, envelope) == Accepted()


@pytest.mark.parametrize("type_", ["consulting", "conversation", "discussion"])
def test_common_knobs_pass_through(type_: str) -> None:
    knobs = {"expectations": {"reply_within": 5}, "on_turn_failed": "close", "labels": {"team": "x"}}
    spec = make_spec(type_, knobs=knobs, normalise=False)
    assert ADAPTERS[type_].validate_create(spec) == knobs


@pytest.mark.parametrize("type_", ["consulting", "conversation", "discussion", "workflow"])
def test_unknown_knobs_are_refused_naming_the_valid_ones(type_: str) -> None:
    spec = make_spec(type_, knobs={"rounds": 1}, normalise=False)
    with pytest.raises(InvalidArgument) as info:
        ADAPTERS[type_].validate_create(spec)
    assert "no knob 'rounds'" in info.value.message and "on_turn_failed" in info.value.message
    assert CID not in info.value.message and info.value.metadata["knob"] == "rounds"
    if type_ == "discussion":
        assert "did you mean 'max_rounds'" in info.value.message


# ---------------------------------------------------------------- consulting


def test_consulting_question_then_reply_closes() -> None:
    spec = make_spec("consulting")
    state = consulting.initial_state(spec)
    assert consulting.expected_next(spec, state) == [A]
    assert consulting.offers_say(spec, state, A) and not consulting.offers_say(spec, state, B)

    state, accepted = post(consulting, spec, state, text(A))
    assert accepted == Accepted()
    assert consulting.expected_next(spec, state) == [B]
    assert consulting.offers_say(spec, state, B) and not consulting.offers_say(spec, state, A)

    state, accepted = post(consulting, spec, state, text(B))
    assert accepted == Accepted(close_reason="consulting_complete")
    assert consulting.expected_next(spec, state) == []
    assert not consulting.offers_say(spec, state, A) and not consulting.offers_say(spec, state, B)
    assert consulting.state_json(state)["phase"] == "complete"


def test_consulting_target_cannot_speak_first() -> None:
    spec = make_spec("consulting")
    with pytest.raises(NotYourTurn) as info:
        consulting.validate_send(spec, consulting.initial_state(spec), text(B))
    assert CID in info.value.message
    assert "alice's (id-a) turn" in info.value.message
    assert info.value.metadata["expected"] == A
    assert info.value.metadata["channel_id"] == CID


def test_consulting_initiator_cannot_ask_twice() -> None:
    spec = make_spec("consulting")
    state, _ = run(consulting, spec, [text(A)])
    with pytest.raises(NotYourTurn) as info:
        consulting.validate_send(spec, state, text(A))
    assert "bob's (id-b) turn" in info.value.message
    assert "wait for their reply" in info.value.message


@pytest.mark.parametrize("sender", [A, B])
def test_consulting_after_reply_is_closed(sender: str) -> None:
    spec = make_spec("consulting")
    state, _ = run(consulting, spec, [text(A), text(B)])
    for envelope in (text(sender), packet(sender)):
        with pytest.raises(ChannelClosed) as info:
            consulting.validate_send(spec, state, envelope)
        assert info.value.message == (
            f"channel '{CID}' is closed: this consulting channel already has its question and reply. "
            "Open a new channel to ask again."
        )
        assert isinstance(info.value, ProtocolError)
    # Non-substantive posts still pass; nothing changes.
    consulting.validate_send(spec, state, env(A, "myapp.note", {}))
    assert consulting.fold(spec, state, text(A)) == state


def test_consulting_packet_counts_as_substantive() -> None:
    spec = make_spec("consulting")
    _, reasons = run(consulting, spec, [packet(A), env(B, "myapp.x", {}), packet(B)])
    assert reasons == [None, None, "consulting_complete"]


def test_consulting_state_json() -> None:
    spec = make_spec("consulting")
    state, _ = run(consulting, spec, [text(A)])
    data = consulting.state_json(state)
    assert data == {
        "phase": "awaiting_reply",
        "asker": A,
        "replier": B,
        "asked": True,
        "replied": False,
        "expected_next": [B],
        "ended": False,
        "end_reason": None,
    }
    json.dumps(data)


# ---------------------------------------------------------------- conversation


def test_conversation_anyone_any_time() -> None:
    spec = make_spec("conversation")
    state, reasons = run(conversation, spec, [text(A), text(A), text(B), packet(A), text(B)] * 10)
    assert set(reasons) == {None}
    assert state.turns == 50
    assert conversation.expected_next(spec, state) == []
    assert conversation.offers_say(spec, state, A) and conversation.offers_say(spec, state, B)


@pytest.mark.parametrize("bad", [0, -1, "3", True, 1.5, [3]])
def test_conversation_max_turns_validation(bad: Any) -> None:
    with pytest.raises(InvalidArgument) as info:
        make_spec("conversation", knobs={"max_turns": bad})
    assert "max_turns" in info.value.message and CID not in info.value.message  # the channel does not exist
    assert "positive integer" in info.value.message


def test_conversation_max_turns_closes() -> None:
    spec = make_spec("conversation", knobs={"max_turns": 3})
    assert spec.knobs == {"max_turns": 3}
    state, reasons = run(conversation, spec, [text(A), env(B, "myapp.x", {}), text(B), text(B)])
    assert reasons == [None, None, None, "max_turns"]
    assert state.turns == 3
    assert not conversation.offers_say(spec, state, A)
    with pytest.raises(ChannelClosed, match="max_turns"):
        conversation.validate_send(spec, state, text(A))
    assert conversation.state_json(state) == {"turns": 3, "ended": True, "end_reason": "max_turns"}


def test_conversation_null_max_turns_means_unlimited() -> None:
    spec = make_spec("conversation", knobs={"max_turns": None})
    assert spec.knobs == {}


# ---------------------------------------------------------------- discussion


def test_discussion_round_robin() -> None:
    spec = make_spec("discussion", (A, B, C))
    state = discussion.initial_state(spec)
    for i, speaker in enumerate([A, B, C, A, B, C, A]):
        assert discussion.expected_next(spec, state) == [speaker]
        assert [p for p in spec.participants if discussion.offers_say(spec, state, p)] == [speaker]
        for other in spec.participants:
            if other != speaker:
                with pytest.raises(NotYourTurn):
                    discussion.validate_send(spec, state, text(other))
        state, accepted = post(discussion, spec, state, text(speaker))
        assert accepted == Accepted()
        assert state.turns == i + 1


def test_discussion_not_your_turn_names_expected_speaker() -> None:
    spec = make_spec("discussion", (A, B, C))
    state, _ = run(discussion, spec, [text(A)])
    with pytest.raises(NotYourTurn) as info:
        discussion.validate_send(spec, state, text(C))
    message = info.value.message
    assert CID in message and "bob's (id-b) turn" in message and "wait for their envelope" in message
    assert info.value.metadata == {
        "channel_id": CID,
        "expected": B,
        "expected_name": "bob",
        "sender_id": C,
    }


def test_discussion_max_turns_and_max_rounds() -> None:
    spec = make_spec("discussion", (A, B, C), {"max_rounds": 2})
    assert spec.knobs == {"max_turns": 6}
    _, reasons = run(discussion, spec, [text(p) for p in (A, B, C, A, B, C)])
    assert reasons == [None] * 5 + ["max_turns"]

    spec = make_spec("discussion", (A, B), {"max_turns": 3})
    state, reasons = run(discussion, spec, [text(A), text(B), text(A)])
    assert reasons == [None, None, "max_turns"]
    assert discussion.expected_next(spec, state) == []
    assert not any(discussion.offers_say(spec, state, p) for p in (A, B))
    with pytest.raises(ChannelClosed):
        discussion.validate_send(spec, state, text(B))


def test_discussion_knob_validation() -> None:
    with pytest.raises(InvalidArgument, match="not both"):
        make_spec("discussion", (A, B), {"max_turns": 4, "max_rounds": 2})
    with pytest.raises(InvalidArgument, match="max_rounds"):
        make_spec("discussion", (A, B), {"max_rounds": 0})
    with pytest.raises(InvalidArgument, match="max_turns"):
        make_spec("discussion", (A, B), {"max_turns": "ten"})


def test_discussion_ordering_knob_accepts_only_round_robin() -> None:
    """``ordering`` is refused unless it is a value the adapter implements (never accepted and ignored)."""
    spec = make_spec("discussion", (A, B, C), {"ordering": "round_robin"})
    assert spec.knobs == {"ordering": "round_robin"}
    _, _ = run(discussion, spec, [text(A), text(B), text(C), text(A)])  # round robin, as without the knob
    for bad in ("free", "random", "", 1, ["round_robin"]):
        with pytest.raises(InvalidArgument) as info:
            make_spec("discussion", (A, B), {"ordering": bad})
        assert "'round_robin'" in info.value.message and "allowed" in info.value.message
        assert info.value.metadata["knob"] == "ordering" and info.value.metadata["allowed"] == "round_robin"


def test_discussion_normalised_knobs_are_stable() -> None:
    spec = make_spec("discussion", (A, B, C), {"max_rounds": 3, "labels": {"x": 1}})
    assert discussion.validate_create(spec) == spec.knobs == {"max_turns": 9, "labels": {"x": 1}}


# ---------------------------------------------------------------- workflow: knobs

ALWAYS_RR = [{"condition": {"type": "always"}, "target": {"type": "round_robin"}}]


def wf_spec(knobs: Mapping[str, Any], participants: Iterable[str] = (A, B, C)) -> ChannelSpec:
    """A workflow spec with normalised knobs."""
    return make_spec("workflow", participants, knobs)


def test_workflow_knob_defaults_and_name_resolution() -> None:
    spec = wf_spec(
        {
            "initial_speaker": "bob",
            "transitions": [
                {
                    "condition": {"type": "from_speaker", "speaker": "bob"},
                    "target": {"type": "agent", "agent": "carol"},
                },
                {"condition": {"type": "always"}, "target": {"type": "agent", "agent": A}, "priority": -1},
            ],
            "labels": {"x": 1},
        }
    )
    assert spec.knobs == {
        "initial_speaker": B,
        "max_turns": 50,
        "context": {},
        "default_target": {"type": "terminate"},
        "transitions": [
            {
                "condition": {"type": "from_speaker", "speaker": B},
                "target": {"type": "agent", "agent": C},
                "priority": 0,
            },
            {"condition": {"type": "always"}, "target": {"type": "agent", "agent": A}, "priority": -1},
        ],
        "labels": {"x": 1},
    }
    # Normalised knobs validate to themselves.
    assert workflow.validate_create(spec) == spec.knobs
    assert workflow.initial_state(spec).current_speaker == B


def test_workflow_default_initial_speaker_is_initiator() -> None:
    spec = wf_spec({"transitions": ALWAYS_RR})
    assert spec.knobs["initial_speaker"] == A
    state = workflow.initial_state(spec)
    assert state == WorkflowState(current_speaker=A)
    assert workflow.expected_next(spec, state) == [A]


@pytest.mark.parametrize(
    ("knobs", "fragment"),
    [
        ({"transitions": {"condition": {}}}, "knob 'transitions' must be a list"),
        ({"transitions": "always"}, "knob 'transitions' must be a list"),
        ({"default_target": "terminate"}, "knob 'default_target' must be an object"),
        ({"default_target": {"type": "jump"}}, "knob 'default_target'.type is 'jump'"),
        (
            {"default_target": {"type": "agent", "agent": "zed"}},
            "knob 'default_target'.agent 'zed' is not a participant",
        ),
        ({"default_target": {"type": "stay", "reason": "x"}}, "knob 'default_target' of type 'stay' does not take"),
        ({"transitions": ["x"]}, "transitions[0] must be an object"),
        ({"transitions": [{"target": {"type": "stay"}}]}, "transitions[0] has no 'condition'"),
        ({"transitions": [{"condition": {"type": "always"}}]}, "transitions[0] has no 'target'"),
        (
            {"transitions": [{"condition": {"type": "always"}, "target": {"type": "stay"}, "priorty": 1}]},
            "transitions[0] has unknown key(s) ['priorty']",
        ),
        (
            {"transitions": [{"condition": {"type": "sometimes"}, "target": {"type": "stay"}}]},
            "transitions[0].condition.type is 'sometimes'; use one of always, from_speaker",
        ),
        (
            {"transitions": [{"condition": {"type": "always"}, "target": {"type": "jump"}}]},
            "transitions[0].target.type is 'jump'; use one of agent, round_robin, stay",
        ),
        (
            {"transitions": [{"condition": {"type": "always"}, "target": {"type": "agent"}}]},
            "transitions[0].target of type 'agent' needs 'agent'",
        ),
        (
            {"transitions": [{"condition": {"type": "always"}, "target": {"type": "agent", "agent": "zed"}}]},
            "transitions[0].target.agent 'zed' is not a participant; use the id or name of one of: alice (id-a)",
        ),
        (
            {"transitions": [{"condition": {"type": "always"}, "target": {"type": "stay", "agent": A}}]},
            "transitions[0].target of type 'stay' does not take 'agent'",
        ),
        (
            {"transitions": [{"condition": {"type": "from_speaker"}, "target": {"type": "stay"}}]},
            "transitions[0].condition of type 'from_speaker' needs 'speaker'",
        ),
        (
            {"transitions": [{"condition": {"type": "from_speaker", "speaker": 7}, "target": {"type": "stay"}}]},
            "transitions[0].condition.speaker must be a participant id or name",
        ),
        (
            {"transitions": [{"condition": {"type": "tool_called", "tool": ""}, "target": {"type": "stay"}}]},
            "transitions[0].condition.tool must be a tool name",
        ),
        (
            {"transitions": [{"condition": {"type": "context_equals", "key": "k"}, "target": {"type": "stay"}}]},
            "transitions[0].condition of type 'context_equals' needs 'value'",
        ),
        (
            {
                "transitions": [
                    {
                        "condition": {"type": "context_equals", "key": "k", "value": float("nan")},
                        "target": {"type": "stay"},
                    }
                ]
            },
            "transitions[0].condition.value is not JSON",
        ),
        (
            {"transitions": [{"condition": {"type": "always", "tool": "x"}, "target": {"type": "stay"}}]},
            "transitions[0].condition of type 'always' does not take ['tool']",
        ),
        (
            {"transitions": [{"condition": {"type": "always", "and": {"type": "always"}}, "target": {"type": "stay"}}]},
            "transitions[0].condition.and must be a list of conditions",
        ),
        (
            {"transitions": [{"condition": {"type": "always", "and": [{"type": "nope"}]}, "target": {"type": "stay"}}]},
            "transitions[0].condition.and[0].type is 'nope'",
        ),
        (
            {"transitions": [{"condition": {"type": "always"}, "target": {"type": "stay"}, "priority": True}]},
            "transitions[0].priority must be an integer",
        ),
        (
            {"transitions": [{"condition": {"type": "always"}, "target": {"type": "stay"}, "priority": "high"}]},
            "transitions[0].priority must be an integer",
        ),
        ({"transitions": ALWAYS_RR, "max_turns": 0}, "knob 'max_turns' must be a positive integer"),
        ({"transitions": ALWAYS_RR, "max_turns": "5"}, "knob 'max_turns' must be a positive integer"),
        ({"transitions": ALWAYS_RR, "context": [1]}, "knob 'context' must be a JSON object"),
        ({"transitions": ALWAYS_RR, "context": {"x": {1, 2}}}, "knob 'context' is not JSON"),
        ({"transitions": ALWAYS_RR, "initial_speaker": "dave"}, "knob 'initial_speaker' 'dave' is not a participant"),
    ],
)
def test_workflow_knob_errors(knobs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        wf_spec(knobs)
    assert fragment in info.value.message
    assert "workflow channel:" in info.value.message and CID not in info.value.message  # never created
    assert "channel_id" not in info.value.metadata


# ---------------------------------------------------------------- workflow: turns and targets


def test_workflow_only_current_speaker_posts() -> None:
    spec = wf_spec({"transitions": ALWAYS_RR})
    state = workflow.initial_state(spec)
    with pytest.raises(NotYourTurn) as info:
        workflow.validate_send(spec, state, packet(B))
    assert "alice's (id-a) turn" in info.value.message and CID in info.value.message
    assert info.value.metadata["expected"] == A
    # EV_TEXT from the current speaker counts as a packet (a human seeder kicking off).
    state, accepted = post(workflow, spec, state, text(A))
    assert accepted == Accepted()
    assert (state.current_speaker, state.turns) == (B, 1)


def test_workflow_round_robin_wraps() -> None:
    spec = wf_spec({"transitions": ALWAYS_RR})
    state, _ = run(workflow, spec, [packet(A), packet(B), packet(C), packet(A)])
    assert state.current_speaker == B and state.turns == 4


def test_workflow_round_robin_from_non_initiator_start() -> None:
    spec = wf_spec({"transitions": ALWAYS_RR, "initial_speaker": "carol"})
    state, _ = run(workflow, spec, [packet(C)])
    assert state.current_speaker == A


@pytest.mark.parametrize(
    ("target", "speakers", "expected"),
    [
        ({"type": "agent", "agent": "carol"}, [A], C),
        ({"type": "stay"}, [A, A, A], A),
        ({"type": "revert_to_initiator"}, [A], A),
    ],
)
def test_workflow_targets(target: dict[str, Any], speakers: list[str], expected: str) -> None:
    spec = wf_spec({"transitions": [{"condition": {"type": "always"}, "target": target}]})
    state, reasons = run(workflow, spec, [packet(s) for s in speakers])
    assert state.current_speaker == expected
    assert set(reasons) == {None}


def test_workflow_revert_to_initiator_from_another_speaker() -> None:
    spec = wf_spec(
        {
            "transitions": [
                {"condition": {"type": "from_speaker", "speaker": A}, "target": {"type": "agent", "agent": C}},
                {"condition": {"type": "from_speaker", "speaker": C}, "target": {"type": "revert_to_initiator"}},
            ]
        }
    )
    state, _ = run(workflow, spec, [packet(A), packet(C)])
    assert state.current_speaker == A and state.turns == 2


def test_workflow_terminate_closes() -> None:
    """A terminate target without a reason closes with after_work (AG2's TerminateTarget default)."""
    spec = wf_spec({"transitions": [{"condition": {"type": "always"}, "target": {"type": "terminate"}}]})
    state, reasons = run(workflow, spec, [packet(A)])
    assert reasons == ["after_work"]
    assert workflow.expected_next(spec, state) == []
    assert workflow.state_json(state)["ended"] is True
    with pytest.raises(ChannelClosed, match="after_work"):
        workflow.validate_send(spec, state, packet(A))


def test_workflow_no_matching_transition_takes_the_default_target() -> None:
    """No transition holds: the default target decides; without one the workflow ends with after_work (AG2)."""
    next_only = [{"condition": {"type": "tool_called", "tool": "next"}, "target": {"type": "round_robin"}}]
    spec = wf_spec({"transitions": next_only})
    state, reasons = run(workflow, spec, [packet(A, tool="next"), packet(B, tool="other")])
    assert reasons == [None, "after_work"]
    assert state.end_reason == "after_work" and state.turns == 2
    # A default target of another kind picks the next speaker instead.
    to_carol = wf_spec({"transitions": next_only, "default_target": {"type": "agent", "agent": "carol"}})
    assert to_carol.knobs["default_target"] == {"type": "agent", "agent": C}
    state, reasons = run(workflow, to_carol, [packet(A, tool="other")])
    assert reasons == [None] and state.current_speaker == C
    stay = wf_spec({"transitions": next_only, "default_target": {"type": "stay"}})
    assert run(workflow, stay, [packet(A)])[0].current_speaker == A
    named = wf_spec({"transitions": next_only, "default_target": {"type": "terminate", "reason": "unrouted"}})
    assert run(workflow, named, [packet(A)])[1] == ["unrouted"]
    # Every transition is tried before the default target, whatever its priority.
    late = wf_spec(
        {
            "transitions": [{"condition": {"type": "always"}, "target": {"type": "agent", "agent": B}, "priority": 99}],
            "default_target": {"type": "agent", "agent": C},
        }
    )
    assert run(workflow, late, [packet(A)])[0].current_speaker == B


def test_workflow_without_transitions_uses_only_the_default_target() -> None:
    """AG2's graph defaults to no transitions: every turn goes to the default target."""
    for knobs in ({"transitions": []}, {"default_target": {"type": "terminate"}}):
        spec = wf_spec(knobs)
        assert spec.knobs["transitions"] == [] and spec.knobs["default_target"] == {"type": "terminate"}
        assert run(workflow, spec, [packet(A)])[1] == ["after_work"]
    rr = wf_spec({"default_target": {"type": "round_robin"}, "max_turns": 3})
    assert run(workflow, rr, [packet(A), packet(B), packet(C)])[1] == [None, None, "max_turns"]


@pytest.mark.parametrize("knobs", [{}, {"max_turns": 3}, {"initial_speaker": "b", "context": {"k": 1}}])
def test_a_workflow_without_a_graph_is_refused_as_ag2s_hub_refuses_it(knobs: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgument, match="the knobs hold no transition graph; give 'transitions'"):
        wf_spec(knobs)


def test_workflow_max_turns_and_terminate_precedence() -> None:
    spec = wf_spec({"transitions": ALWAYS_RR, "max_turns": 2})
    _, reasons = run(workflow, spec, [packet(A), packet(B)])
    assert reasons == [None, "max_turns"]

    knobs = {
        "max_turns": 2,
        "transitions": [
            {"condition": {"type": "tool_called", "tool": "finish"}, "target": {"type": "terminate"}},
            {"condition": {"type": "always"}, "target": {"type": "round_robin"}},
        ],
    }
    _, reasons = run(workflow, wf_spec(knobs), [packet(A), packet(B, tool="finish")])
    assert reasons == [None, "after_work"]


def test_workflow_from_speaker_condition() -> None:
    spec = wf_spec(
        {
            "transitions": [
                {"condition": {"type": "from_speaker", "speaker": "alice"}, "target": {"type": "agent", "agent": C}},
                {"condition": {"type": "always"}, "target": {"type": "agent", "agent": B}},
            ]
        }
    )
    state, _ = run(workflow, spec, [packet(A)])
    assert state.current_speaker == C
    state, _ = run(workflow, spec, [packet(A), packet(C)])
    assert state.current_speaker == B


def test_workflow_tool_called_condition_uses_tool_called_and_tools_called() -> None:
    knobs = {
        "transitions": [
            {"condition": {"type": "tool_called", "tool": "to_carol"}, "target": {"type": "agent", "agent": C}},
            {"condition": {"type": "always"}, "target": {"type": "stay"}},
        ]
    }
    spec = wf_spec(knobs)
    assert run(workflow, spec, [packet(A, tool="to_carol")])[0].current_speaker == C
    assert run(workflow, spec, [packet(A, tools=["x", "to_carol"])])[0].current_speaker == C
    assert run(workflow, spec, [packet(A, tool="x", tools=["y"])])[0].current_speaker == A
    assert run(workflow, spec, [text(A)])[0].current_speaker == A


def test_workflow_context_equals_sees_this_packets_updates() -> None:
    knobs = {
        "context": {"stage": "draft"},
        "transitions": [
            {
                "condition": {"type": "context_equals", "key": "stage", "value": "review"},
                "target": {"type": "agent", "agent": C},
            },
            {"condition": {"type": "always"}, "target": {"type": "stay"}},
        ],
    }
    spec = wf_spec(knobs)
    assert workflow.initial_state(spec).context == {"stage": "draft"}
    state, _ = run(workflow, spec, [packet(A, set_={"stage": "review"})])
    assert state.current_speaker == C and state.context == {"stage": "review"}
    # Deleted in the same packet → the key is missing → no match.
    state, _ = run(workflow, spec, [packet(A, set_={"stage": "review"}, delete=["stage"])])
    assert state.current_speaker == A and state.context == {}


def test_workflow_context_equals_is_json_equality() -> None:
    knobs = {
        "transitions": [
            {
                "condition": {"type": "context_equals", "key": "ok", "value": True},
                "target": {"type": "agent", "agent": B},
            },
            {
                "condition": {"type": "context_equals", "key": "n", "value": [1, {"a": 2}]},
                "target": {"type": "agent", "agent": C},
            },
            {"condition": {"type": "always"}, "target": {"type": "stay"}},
        ]
    }
    spec = wf_spec(knobs)
    assert run(workflow, spec, [packet(A, set_={"ok": True})])[0].current_speaker == B
    assert run(workflow, spec, [packet(A, set_={"ok": 1})])[0].current_speaker == A  # 1 is not true
    assert run(workflow, spec, [packet(A, set_={"n": [1, {"a": 2}]})])[0].current_speaker == C
    assert run(workflow, spec, [packet(A, set_={"n": [1, {"a": 3}]})])[0].current_speaker == A


def test_workflow_and_conditions() -> None:
    knobs = {
        "transitions": [
            {
                "condition": {
                    "type": "from_speaker",
                    "speaker": "alice",
                    "and": [{"type": "tool_called", "tool": "approve"}],
                },
                "target": {"type": "terminate"},
            },
            {"condition": {"type": "always"}, "target": {"type": "round_robin"}},
        ]
    }
    spec = wf_spec(knobs)
    assert spec.knobs["transitions"][0]["condition"]["and"] == [{"type": "tool_called", "tool": "approve"}]
    assert run(workflow, spec, [packet(A, tool="approve")])[1] == ["after_work"]
    assert run(workflow, spec, [packet(A, tool="nope")])[0].current_speaker == B
    assert run(workflow, spec, [packet(A), packet(B, tool="approve")])[0].current_speaker == C


def test_workflow_priority_beats_declaration_order_and_ties_keep_it() -> None:
    """Lower priority is tried first (AG2's order); equal priorities in declaration order."""
    knobs = {
        "transitions": [
            {"condition": {"type": "always"}, "target": {"type": "agent", "agent": B}},
            {"condition": {"type": "always"}, "target": {"type": "agent", "agent": C}, "priority": -5},
            {"condition": {"type": "always"}, "target": {"type": "agent", "agent": A}, "priority": -5},
        ]
    }
    assert run(workflow, wf_spec(knobs), [packet(A)])[0].current_speaker == C
    higher_later = {
        "transitions": [
            {"condition": {"type": "always"}, "target": {"type": "agent", "agent": B}, "priority": 10},
            {"condition": {"type": "always"}, "target": {"type": "agent", "agent": C}, "priority": 1},
        ]
    }
    assert run(workflow, wf_spec(higher_later), [packet(A)])[0].current_speaker == C
    ties = {
        "transitions": [
            {"condition": {"type": "always"}, "target": {"type": "agent", "agent": C}},
            {"condition": {"type": "always"}, "target": {"type": "agent", "agent": B}},
        ]
    }
    assert run(workflow, wf_spec(ties), [packet(A)])[0].current_speaker == C


def test_workflow_context_set_from_anyone_changes_only_context() -> None:
    spec = wf_spec({"transitions": ALWAYS_RR, "context": {"a": 1, "b": 2}})
    state = workflow.initial_state(spec)
    state, accepted = post(workflow, spec, state, context_set(C, {"c": [3]}, ["a"]))
    assert accepted == Accepted()
    assert state == WorkflowState(current_speaker=A, turns=0, context_json=state.context_json)
    assert state.context == {"b": 2, "c": [3]}
    # set is applied before delete.
    state, _ = post(workflow, spec, state, context_set(B, {"b": 5}, ["b"]))
    assert state.context == {"c": [3]}
    assert workflow.state_json(state) == {
        "current_speaker": A,
        "turns": 0,
        "context": {"c": [3]},
        "ended": False,
        "end_reason": None,
    }


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ([], "must be an object"),
        ({"set": {}, "remove": ["x"]}, "unknown key(s) ['remove']"),
        ({"set": [1]}, "ag2.context.set event_data.set must be an object"),
        ({"set": {"x": float("inf")}}, "is not JSON"),
        ({"delete": "x"}, "delete must be a list of key strings"),
        ({"delete": [1]}, "delete must be a list of key strings"),
    ],
)
def test_workflow_context_set_shape(data: Any, fragment: str) -> None:
    spec = wf_spec({"transitions": ALWAYS_RR})
    state = workflow.initial_state(spec)
    with pytest.raises(InvalidArgument) as info:
        workflow.validate_send(spec, state, env(B, EV_CONTEXT_SET, data))
    assert fragment in info.value.message and CID in info.value.message
    # Replay never fails on a malformed one: fold ignores it.
    assert workflow.fold(spec, state, env(B, EV_CONTEXT_SET, data)) == state


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"routing": "approve"}, "ag2.packet routing must be an object"),
        ({"routing": {"tool_called": 3}}, "routing.tool_called must be a string or null"),
        ({"routing": {"tools_called": "a"}}, "routing.tools_called must be a list of strings"),
        ({"context_updates": {"set": 1}}, "context_updates.set must be an object"),
        ({"context_updates": {"sett": {}}}, "unknown key(s) ['sett']"),
        ({"body": 5}, "ag2.packet body must be a string"),
    ],
)
def test_workflow_packet_shape(data: dict[str, Any], fragment: str) -> None:
    spec = wf_spec({"transitions": ALWAYS_RR})
    with pytest.raises(InvalidArgument) as info:
        workflow.validate_send(spec, workflow.initial_state(spec), env(A, EV_PACKET, data))
    assert fragment in info.value.message


def test_workflow_minimal_packet_is_fine() -> None:
    spec = wf_spec({"transitions": ALWAYS_RR})
    state, _ = run(workflow, spec, [env(A, EV_PACKET, {}), env(B, EV_PACKET, {"routing": None, "body": "x"})])
    assert state.turns == 2


def test_workflow_never_offers_say_and_lifecycle_does_not_advance() -> None:
    spec = wf_spec({"transitions": ALWAYS_RR})
    state = workflow.initial_state(spec)
    assert not any(workflow.offers_say(spec, state, p) for p in spec.participants)
    for envelope in non_turn_envelopes(B):
        if envelope.event_type not in LIFECYCLE_EVENT_TYPES:
            workflow.validate_send(spec, state, envelope)
        assert workflow.fold(spec, state, envelope) == state
        assert workflow.on_accepted(spec, state, envelope) == Accepted()
    for event_type in (EV_CHANNEL_INVITE, EV_CHANNEL_INVITE_ACK, EV_CHANNEL_OPENED, EV_CHANNEL_CLOSED):
        assert workflow.fold(spec, state, env("hub", event_type, {})) == state


def test_workflow_state_does_not_alias_envelope_data() -> None:
    spec = wf_spec({"transitions": ALWAYS_RR})
    value = {"nested": [1]}
    envelope = context_set(B, {"k": value})
    state = workflow.fold(spec, workflow.initial_state(spec), envelope)
    value["nested"].append(2)
    assert state.context == {"k": {"nested": [1]}}
    state.context["k"] = "mutated copy"
    assert state.context == {"k": {"nested": [1]}}


# ---------------------------------------------------------------- workflow: one routing tool, typed routing

TWO_ROUTES = {
    "transitions": [
        {"condition": {"type": "tool_called", "tool": "to_bob"}, "target": {"type": "agent", "agent": B}},
        {
            "condition": {"type": "tool_called", "tool": "to_carol"},
            "target": {"type": "agent", "agent": C},
            "priority": -5,  # tried first (lower priority first)
        },
        {"condition": {"type": "always"}, "target": {"type": "stay"}},
    ]
}


def typed(sender: str, routing: dict[str, Any]) -> Envelope:
    """A workflow EV_PACKET with the given routing object."""
    return env(sender, EV_PACKET, {"routing": routing, "body": "done"})


def test_workflow_routes_on_the_first_routing_tool_only() -> None:
    """Two routing tools in one turn: the first routes; the second (even of a transition tried first) does not."""
    spec = wf_spec(TWO_ROUTES)
    assert run(workflow, spec, [packet(A, tool="to_bob", tools=["to_bob", "to_carol"])])[0].current_speaker == B
    # Without tool_called, the first of tools_called that a transition routes on wins.
    assert run(workflow, spec, [packet(A, tools=["lookup", "to_bob", "to_carol"])])[0].current_speaker == B
    assert run(workflow, spec, [packet(A, tools=["to_carol", "to_bob"])])[0].current_speaker == C


def test_workflow_context_equals_null_matches_a_missing_key() -> None:
    knobs = {
        "context": {"draft": "v1"},
        "transitions": [
            {
                "condition": {"type": "context_equals", "key": "draft", "value": None},
                "target": {"type": "agent", "agent": C},
            },
            {"condition": {"type": "always"}, "target": {"type": "stay"}},
        ],
    }
    spec = wf_spec(knobs)
    assert run(workflow, spec, [packet(A)])[0].current_speaker == A  # draft is set
    assert run(workflow, spec, [packet(A, delete=["draft"])])[0].current_speaker == C  # deleted
    assert run(workflow, spec, [context_set(B, delete=["draft"]), packet(A)])[0].current_speaker == C
    assert run(workflow, spec, [packet(A, set_={"draft": None})])[0].current_speaker == C  # null itself


def test_workflow_terminate_target_names_its_close_reason() -> None:
    knobs = {"transitions": [{"condition": {"type": "always"}, "target": {"type": "terminate", "reason": "approved"}}]}
    spec = wf_spec(knobs)
    assert spec.knobs["transitions"][0]["target"] == {"type": "terminate", "reason": "approved"}
    state, reasons = run(workflow, spec, [packet(A)])
    assert reasons == ["approved"] and state.end_reason == "approved"
    assert workflow.state_json(state)["end_reason"] == "approved"
    # Without a reason: after_work, AG2's TerminateTarget default.
    plain = wf_spec({"transitions": [{"condition": {"type": "always"}, "target": {"type": "terminate"}}]})
    assert run(workflow, plain, [packet(A)])[1] == ["after_work"]
    for bad, message in (
        ({"type": "terminate", "reason": ""}, "non-empty"),
        ({"type": "terminate", "reason": "x" * 65}, "at most 64"),
        ({"type": "stay", "reason": "x"}, "does not take 'reason'"),
    ):
        with pytest.raises(InvalidArgument, match=message):
            wf_spec({"transitions": [{"condition": {"type": "always"}, "target": bad}]})


def test_workflow_finish_and_handoff_routing_decide_before_the_transitions() -> None:
    spec = wf_spec(TWO_ROUTES)
    state, reasons = run(
        workflow, spec, [typed(A, {"tool_called": "done", "kind": "finish", "close_reason": "shipped"})]
    )
    assert reasons == ["shipped"] and state.ended
    assert run(workflow, spec, [typed(A, {"tool_called": "done", "kind": "finish"})])[1] == ["finished"]
    # A handoff names the next speaker (id or name), whatever the transitions say.
    handoff = {"tool_called": "to_bob", "kind": "handoff", "target": "carol", "reason": "carol knows"}
    assert run(workflow, spec, [typed(A, handoff)])[0].current_speaker == C
    assert run(workflow, spec, [typed(A, {"kind": "handoff", "target": B})])[0].current_speaker == B
    state = workflow.initial_state(spec)
    for routing, message in (
        ({"kind": "handoff", "target": "mallory"}, "'mallory' is not a participant"),
        ({"kind": "handoff"}, "must name the next speaker"),
        ({"kind": "jump"}, "routing.kind is 'jump'"),
        ({"target": B}, "only for kind 'handoff'"),
        ({"kind": "finish", "close_reason": ""}, "non-empty"),
        ({"close_reason": "x"}, "only for kind 'finish'"),
        ({"reason": 3}, "routing.reason must be a string"),
    ):
        with pytest.raises(InvalidArgument, match=message):
            workflow.validate_send(spec, state, typed(A, routing))


def test_the_workflow_knobs_example_in_docs_means_what_the_doc_says() -> None:
    """docs/hub.md "Workflow knobs": approve (priority -10) is tried first; unmatched turns go round robin."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "hub.md").read_text()
    example = doc.split("Workflow knobs", 1)[1].split("```json\n", 1)[1].split("```", 1)[0]
    knobs = json.loads(example)
    user, writer, reviewer = "id-u", "id-w", "id-r"
    names = {user: "user", writer: "writer", reviewer: "reviewer"}
    raw = ChannelSpec(CID, "workflow", user, (user, writer, reviewer), names, knobs)
    spec = replace(raw, knobs=workflow.validate_create(raw))
    assert spec.knobs["default_target"] == {"type": "round_robin"}
    # The user's kick-off goes to the writer; approve beats from_speaker(user) and ends the workflow.
    assert run(workflow, spec, [packet(user)])[0].current_speaker == writer
    assert run(workflow, spec, [packet(user, tool="approve")])[1] == ["approved"]
    # The writer's turn matches nothing: round robin (the default target) gives the reviewer the turn.
    state, reasons = run(workflow, spec, [packet(user), packet(writer)])
    assert state.current_speaker == reviewer and reasons == [None, None]
    # The reviewer's turn: stage "review" sends it back to the reviewer; else round robin wraps to the user.
    in_review = [packet(user), packet(writer), packet(reviewer, set_={"stage": "review"})]
    assert run(workflow, spec, in_review)[0].current_speaker == reviewer
    assert run(workflow, spec, [packet(user), packet(writer), packet(reviewer)])[0].current_speaker == user
