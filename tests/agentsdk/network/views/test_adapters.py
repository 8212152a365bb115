"""SDK adapters: the hub's default view and offered tools, rendering, round-end envelopes and the say tool."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import pytest
from agentnet.v1 import hub_pb2

from agentsdk.agent import Reply
from agentsdk.errors import InvalidArgument
from agentsdk.events import BaseEvent, ModelMessage, ToolCallEvent, ToolResultEvent
from agentsdk.network.adapters import (
    ADAPTERS,
    PENDING_CONTEXT_UPDATES_KEY,
    ConsultingSdkAdapter,
    SdkAdapter,
    adapter_for,
    make_say_tool,
    queue_context_updates,
    register_adapter,
    routing_from_events,
    routing_tools,
)
from agentsdk.network.agent_client import resolve_view_policy
from agentsdk.network.channel import ChannelMetadata, DefaultView
from agentsdk.network.deps import (
    AGENT_CLIENT_DEP,
    CHANNEL_DEP,
    CHANNEL_STATE_DEP,
    HUB_DEP,
    TASK_DEP,
    AgentClientInject,
    ChannelInject,
    ChannelStateInject,
)
from agentsdk.network.views import (
    FullTranscript,
    NamedTranscript,
    NamedWindowedSummary,
    ViewPolicy,
    WindowedSummary,
)
from agentsdk.stream import Stream
from agentsdk.tools import Tool, tool
from hubsvc.adapters import get_adapter
from hubsvc.adapters.base import ChannelSpec
from hubsvc.adapters.payloads import parse_packet
from netkernel.envelope import EV_CHANNEL_INVITE, EV_PACKET, EV_TEXT, Envelope
from tests.agentsdk.network.views.support import NAMES, FakeClient, env, meta, text

TYPES = ("consulting", "conversation", "discussion", "workflow")


def reply(body: str, events: list[BaseEvent] | None = None, *, halted: bool = False) -> Reply:
    return Reply(body=body, events=list(events or []), stream=Stream(), halted=halted)


def spec(channel_type: str, ids: tuple[str, ...], knobs: dict[str, Any] | None = None) -> ChannelSpec:
    """A hub ChannelSpec with normalised knobs (as the hub would hold it)."""
    raw = ChannelSpec("ch1", channel_type, ids[0], ids, {i: NAMES[i] for i in ids}, knobs or {})
    hub = get_adapter(channel_type)
    return ChannelSpec("ch1", channel_type, ids[0], ids, raw.names, hub.validate_create(raw))


def call(name: str, call_id: str) -> ToolCallEvent:
    return ToolCallEvent(call_id=call_id, name=name)


def result(name: str, call_id: str, *, error: bool = False) -> ToolResultEvent:
    return ToolResultEvent(call_id=call_id, name=name, content="x", is_error=error)


# ------------------------------------------------------------------------------------------ registry / views


def test_adapter_for_each_type() -> None:
    for t in TYPES:
        assert adapter_for(t).type == t
        assert adapter_for(t) is adapter_for(t)
    with pytest.raises(InvalidArgument, match=r"no SDK adapter for channel type 'nope'.*consulting"):
        adapter_for("nope")


def test_register_custom_adapter() -> None:
    class Echo(SdkAdapter):
        type = "echo"

    register_adapter(Echo())
    try:
        assert isinstance(adapter_for("echo"), Echo)
    finally:
        ADAPTERS.pop("echo")
    with pytest.raises(ValueError, match="no channel type name"):
        register_adapter(SdkAdapter())


@pytest.mark.parametrize(
    ("hub_view", "view_type", "recent_n"),
    [
        (DefaultView("full_transcript"), FullTranscript, None),
        (DefaultView("windowed_summary", 10), WindowedSummary, 10),
        (DefaultView("named_windowed_summary", 6), NamedWindowedSummary, 6),
    ],
)
@pytest.mark.parametrize("channel_type", TYPES)
def test_default_view_is_the_one_the_hub_named(
    channel_type: str, hub_view: DefaultView, view_type: type, recent_n: int | None
) -> None:
    view = adapter_for(channel_type).default_view(meta(channel_type, default_view=hub_view))
    assert type(view) is view_type
    assert getattr(view, "recent_n", None) == recent_n


def test_default_view_from_the_wire() -> None:
    assert DefaultView.from_wire(hub_pb2.DefaultView(policy="named_windowed_summary", recent_n=8)) == DefaultView(
        "named_windowed_summary", 8
    )
    assert DefaultView.from_wire(hub_pb2.DefaultView(policy="full_transcript", recent_n=0)) == DefaultView()
    assert DefaultView.from_wire(hub_pb2.DefaultView()) == DefaultView("full_transcript", None)  # the hub said nothing


@pytest.mark.parametrize("channel_type", [*TYPES, "echo"])
def test_metadata_without_the_hubs_answer_gets_the_full_transcript(channel_type: str) -> None:
    class Echo(SdkAdapter):
        type = "echo"

    adapter = Echo() if channel_type == "echo" else adapter_for(channel_type)
    assert type(adapter.default_view(meta(channel_type, ("a1", "b2", "c3")))) is FullTranscript


def test_custom_adapter_may_override_the_default_view_and_tools() -> None:
    class Echo(SdkAdapter):
        type = "echo"

        def default_view(self, metadata: ChannelMetadata) -> ViewPolicy:
            return NamedTranscript()

        def tools_for(
            self, client: Any, metadata: ChannelMetadata, state: Mapping[str, Any] | None, participant_id: str
        ) -> list[Tool]:
            return [make_say_tool(client)]

    register_adapter(Echo())
    try:
        m = meta("echo", default_view=DefaultView("windowed_summary", 3))
        assert type(resolve_view_policy(cast(Any, FakeClient()), m)) is NamedTranscript
        assert [t.name for t in adapter_for("echo").tools_for(FakeClient(), m, {}, "a1")] == ["say"]
    finally:
        ADAPTERS.pop("echo")


# ------------------------------------------------------------------------------------------ rendering


@pytest.mark.parametrize("channel_type", TYPES)
def test_render_and_turn_input(channel_type: str) -> None:
    adapter = adapter_for(channel_type)
    packet = env("b2", EV_PACKET, {"routing": {"tool_called": "x"}, "body": "packet body"})
    assert adapter.render_envelope(text("a1", "hello")) == "hello"
    assert adapter.render_envelope(packet) == "packet body"
    assert adapter.render_envelope(text("a1", "")) is None
    assert adapter.render_envelope(env("b2", EV_PACKET, {"routing": {}})) is None
    assert adapter.render_envelope(env("hub", EV_CHANNEL_INVITE)) is None
    assert adapter.render_envelope(env("b2", "myapp.note", {"text": "custom"})) is None
    assert adapter.extract_turn_input(text("a1", "hello")) == "hello"
    assert adapter.extract_turn_input(packet) == "packet body"
    assert adapter.extract_turn_input(env("b2", "myapp.note", {"text": "custom"})) == ""


def test_build_text_envelope() -> None:
    out = adapter_for("conversation").build_text_envelope(
        channel_id="ch9", sender_id="a1", text="hi", audience=["b2"], causation_id="e1"
    )
    assert (out.channel_id, out.sender_id, out.event_type, out.event_data) == ("ch9", "a1", EV_TEXT, {"text": "hi"})
    assert out.audience == ["b2"] and out.causation_id == "e1"
    plain = adapter_for("consulting").build_text_envelope(channel_id="ch9", sender_id="a1", text="hi")
    assert plain.audience is None and plain.causation_id is None


# ------------------------------------------------------------------------------------------ round envelopes


@pytest.mark.parametrize("channel_type", ["consulting", "conversation", "discussion"])
def test_round_envelope_is_text_or_none(channel_type: str) -> None:
    adapter = adapter_for(channel_type)
    m = meta(channel_type, ("a1", "b2", "c3") if channel_type == "discussion" else ("a1", "b2"))
    events: list[BaseEvent] = [call("approve", "c1")]
    out = adapter.build_round_envelope(
        metadata=m, sender_id="a1", reply=reply("answer", events), events=events, state={}
    )
    assert out is not None
    assert (out.event_type, out.event_data, out.sender_id, out.channel_id) == (EV_TEXT, {"text": "answer"}, "a1", "ch1")
    assert out.audience is None
    assert adapter.build_round_envelope(metadata=m, sender_id="a1", reply=reply(""), events=[], state={}) is None
    halted = reply("partial", halted=True)
    assert adapter.build_round_envelope(metadata=m, sender_id="a1", reply=halted, events=[], state={}) is None


WORKFLOW_KNOBS = {
    "transitions": [
        {"condition": {"type": "tool_called", "tool": "approve"}, "target": {"type": "agent", "agent": "carol"}},
        {
            "condition": {"type": "always", "and": [{"type": "tool_called", "tool": "reject"}]},
            "target": {"type": "revert_to_initiator"},
        },
        {"condition": {"type": "always"}, "target": {"type": "round_robin"}},
    ]
}


def test_routing_tools_from_knobs() -> None:
    assert routing_tools(WORKFLOW_KNOBS) == {"approve", "reject"}
    assert routing_tools({}) is None
    assert routing_tools({"transitions": [{"condition": {"type": "always"}}]}) == set()


def test_routing_from_events() -> None:
    events: list[BaseEvent] = [
        call("approve", "c1"),
        result("approve", "c1"),
        call("lookup", "c2"),
        result("lookup", "c2"),
        call("reject", "c3"),
        result("reject", "c3", error=True),  # a failed call does not route
        call("lookup", "c4"),
    ]
    assert routing_from_events(events, {"approve", "reject"}) == {
        "tool_called": "approve",
        "tools_called": ["approve", "lookup"],
    }
    # Any tool may route when the knobs name none: the first call that ran wins.
    assert routing_from_events(events) == {"tool_called": "approve", "tools_called": ["approve", "lookup"]}
    assert routing_from_events(events, set()) == {"tool_called": None, "tools_called": ["approve", "lookup"]}
    assert routing_from_events([]) == {"tool_called": None, "tools_called": []}


def test_workflow_round_envelope_is_a_packet_the_hub_routes() -> None:
    adapter = adapter_for("workflow")
    ids = ("a1", "b2", "c3")
    hub_spec = spec("workflow", ids, WORKFLOW_KNOBS)
    m = meta("workflow", ids, knobs=dict(hub_spec.knobs))
    events: list[BaseEvent] = [ModelMessage("", tool_calls=[]), call("approve", "c1"), result("approve", "c1")]
    state: dict[str, Any] = {"current_speaker": "a1"}
    queue_context_updates(state, set={"approved": True, "draft": "v1"})
    queue_context_updates(state, delete=["draft", "stale"])
    out = adapter.build_round_envelope(
        metadata=m, sender_id="a1", reply=reply("LGTM", events), events=events, state=state
    )
    assert out is not None and out.event_type == EV_PACKET and out.sender_id == "a1"
    assert out.event_data == {
        "routing": {"tool_called": "approve", "tools_called": ["approve"]},
        "context_updates": {"set": {"approved": True}, "delete": ["draft", "stale"]},
        "body": "LGTM",
    }
    # The hub half accepts and routes it: approve → carol.
    hub = get_adapter("workflow")
    hub_state = hub.initial_state(hub_spec)
    hub.validate_send(hub_spec, hub_state, out)
    after = hub.fold(hub_spec, hub_state, out)
    assert after.current_speaker == "c3"
    assert after.context == {"approved": True}


def test_workflow_round_envelope_defaults() -> None:
    adapter = adapter_for("workflow")
    m = meta("workflow", ("a1", "b2"))
    # Empty body still posts (routing is the point); events default to reply.events; no state → no updates.
    events: list[BaseEvent] = [call("handoff", "c1")]
    out = adapter.build_round_envelope(metadata=m, sender_id="a1", reply=reply("", events))
    assert out is not None
    assert out.event_data == {
        "routing": {"tool_called": "handoff", "tools_called": ["handoff"]},
        "context_updates": {"set": {}, "delete": []},
        "body": "",
    }
    assert adapter.build_round_envelope(metadata=m, sender_id="a1", reply=reply("x", halted=True)) is None


def test_workflow_silent_round_posts_nothing() -> None:
    """No body, no routing call and nothing queued: no packet (as AG2), so the turn stays with the speaker."""
    adapter = adapter_for("workflow")
    knobs = {"transitions": [{"condition": {"type": "tool_called", "tool": "approve"}, "target": {"type": "stay"}}]}
    m = meta("workflow", ("a1", "b2"), knobs=knobs)
    assert adapter.build_round_envelope(metadata=m, sender_id="a1", reply=reply("", []), state={}) is None
    # A tool ran but it does not route: still silent.
    ran: list[BaseEvent] = [call("lookup", "c1"), result("lookup", "c1")]
    assert adapter.build_round_envelope(metadata=m, sender_id="a1", reply=reply("", ran), state={}) is None
    # Queued context updates are posted (they ride on the packet and would be lost otherwise).
    state: dict[str, Any] = {}
    queue_context_updates(state, set={"k": 1})
    queued = adapter.build_round_envelope(metadata=m, sender_id="a1", reply=reply("", ran), state=state)
    assert queued is not None and queued.event_data["context_updates"] == {"set": {"k": 1}, "delete": []}
    assert queued.event_data["body"] == ""


def test_build_packet_envelope() -> None:
    adapter = adapter_for("workflow")
    out = adapter.build_packet_envelope(
        channel_id="ch1",
        sender_id="u1",
        body="kick off",
        tool_called="start",
        context_set={"k": 1},
        context_delete=["z"],
    )
    assert out.event_type == EV_PACKET and out.audience is None and out.channel_id == "ch1"
    assert out.event_data == {
        "routing": {"tool_called": "start", "tools_called": ["start"]},
        "context_updates": {"set": {"k": 1}, "delete": ["z"]},
        "body": "kick off",
    }
    bare = adapter.build_packet_envelope(channel_id="ch1", sender_id="u1", body="go")
    assert bare.event_data["routing"] == {"tool_called": None, "tools_called": []}
    assert bare.text == "go"
    packet = parse_packet(out, spec=spec("workflow", ("a1", "b2", "c3"), WORKFLOW_KNOBS))
    assert packet.routing.called("start") and packet.updates.apply({"z": 0}) == {"k": 1}


def test_queue_context_updates_last_write_wins() -> None:
    state: dict[str, Any] = {}
    queue_context_updates(state, delete=["a"])
    queue_context_updates(state, set={"a": 1})
    assert state[PENDING_CONTEXT_UPDATES_KEY] == {"set": {"a": 1}, "delete": []}


# ------------------------------------------------------------------------------------------ offered tools


def offered(channel_type: str, m: ChannelMetadata, who: str, client: Any = None) -> list[str]:
    return [t.name for t in adapter_for(channel_type).tools_for(client or FakeClient(), m, {}, who)]


@pytest.mark.parametrize("channel_type", TYPES)
def test_tools_for_builds_what_the_hub_offered(channel_type: str) -> None:
    """The SDK decides nothing: say exactly when DescribeChannel named it for this participant
    (tests/agentsdk/network/test_hub_decides.py checks this against a real hub)."""
    said = meta(channel_type, offered=("a1", ("say",)))
    assert offered(channel_type, said, "a1") == ["say"]
    assert offered(channel_type, said, "b2") == []  # the answer was about a1, not b2
    assert offered(channel_type, meta(channel_type, offered=("a1", ())), "a1") == []
    assert offered(channel_type, meta(channel_type, offered=("a1", ("dance",))), "a1") == []  # not an SDK tool
    assert offered(channel_type, meta(channel_type), "a1") == []  # the hub was not asked


def test_tools_are_cached_per_adapter_and_client() -> None:
    m = meta("conversation", offered=("a1", ("say",)))
    alice, bob = FakeClient("a1"), FakeClient("b2")
    conv = adapter_for("conversation")
    first = conv.tools_for(alice, m, {}, "a1")
    again = conv.tools_for(alice, m, {}, "a1")
    assert first[0] is again[0] and first is not again  # same Tool, fresh list
    assert conv.tools_for(bob, meta("conversation", offered=("b2", ("say",))), {}, "b2")[0] is not first[0]
    consult = ConsultingSdkAdapter()
    assert consult.tools_for(alice, meta("consulting", offered=("a1", ("say",))), {}, "a1")[0] is not first[0]


# ------------------------------------------------------------------------------------------ the say tool


def test_say_schema_hides_injected_params() -> None:
    say = make_say_tool()
    assert isinstance(say, Tool) and say.name == "say"
    params = say.parameters
    assert set(params["properties"]) == {"content", "audience", "channel_id"}
    assert params["required"] == ["content"]
    assert say.injected == {"channel": CHANNEL_DEP, "agent_client": AGENT_CLIENT_DEP}
    assert "channel" not in str(params["properties"].keys() - {"channel_id"})
    assert say.schema()["function"]["description"].startswith("Post an extra message")


async def test_say_posts_through_the_injected_client() -> None:
    injected, fallback = FakeClient("a1"), FakeClient("a1")
    say = adapter_for("conversation").tools_for(fallback, meta("conversation", offered=("a1", ("say",))), {}, "a1")[0]
    channel = meta("conversation", channel_id="ch7")  # anything with a channel_id
    out = await say.invoke({"content": "hi", "audience": ["bob"]}, {CHANNEL_DEP: channel, AGENT_CLIENT_DEP: injected})
    assert not out.is_error and "ch7" in out.content and "bob" in out.content
    assert injected.sent == [("ch7", "hi", ["bob"])] and fallback.sent == []
    out = await say.invoke({"content": "elsewhere", "channel_id": "ch8"}, {CHANNEL_DEP: channel})
    assert not out.is_error
    assert fallback.sent == [("ch8", "elsewhere", None)]  # no injected client: the cached client posts
    out = await say.invoke({"content": "x"}, {CHANNEL_DEP: "ch9"})
    assert fallback.sent[-1] == ("ch9", "x", None)


async def test_say_errors_are_tool_errors() -> None:
    say = make_say_tool()
    out = await say.invoke({"content": "hi"}, {CHANNEL_DEP: meta()})
    assert out.is_error and "network client" in out.content
    out = await say.invoke({"content": "hi"}, {AGENT_CLIENT_DEP: FakeClient()})
    assert out.is_error and "channel_id" in out.content
    out = await say.invoke({"text": "wrong"}, {AGENT_CLIENT_DEP: FakeClient(), CHANNEL_DEP: meta()})
    assert out.is_error and "content" in out.content


# ------------------------------------------------------------------------------------------ deps


def test_dep_keys_and_injects_hide_params() -> None:
    assert (AGENT_CLIENT_DEP, CHANNEL_DEP, CHANNEL_STATE_DEP, HUB_DEP, TASK_DEP) == (
        "agent_client",
        "channel",
        "channel_state",
        "hub",
        "task",
    )

    @tool
    def approve(note: str, channel: ChannelInject, client: AgentClientInject, state: ChannelStateInject) -> str:
        """Approve the draft."""
        queue_context_updates(state, set={"approved": note})
        return f"{channel.channel_id}:{client.agent_id}"

    assert set(approve.parameters["properties"]) == {"note"}
    assert approve.injected == {"channel": CHANNEL_DEP, "client": AGENT_CLIENT_DEP, "state": CHANNEL_STATE_DEP}


async def test_injected_tool_queues_updates_for_the_packet() -> None:
    @tool
    def approve(state: ChannelStateInject) -> str:
        """Approve."""
        queue_context_updates(state, set={"approved": True})
        return "ok"

    state: dict[str, Any] = {"current_speaker": "a1"}
    out = await approve.invoke({}, {CHANNEL_STATE_DEP: state})
    assert out.content == "ok"
    events: list[BaseEvent] = [call("approve", "c1"), result("approve", "c1")]
    packet = adapter_for("workflow").build_round_envelope(
        metadata=meta("workflow"), sender_id="a1", reply=reply("done", events), state=state
    )
    assert isinstance(packet, Envelope)
    assert packet.event_data["context_updates"] == {"set": {"approved": True}, "delete": []}
    assert packet.event_data["routing"]["tool_called"] == "approve"


# ------------------------------------------------------------------------------------------ routing: first wins


def test_two_routing_calls_in_one_turn_the_first_routes() -> None:
    """The LLM called approve then reject: approve routes (with its reason); reject ran but does not route."""
    events: list[BaseEvent] = [
        ToolCallEvent(call_id="c1", name="approve", arguments={"reason": "looks good"}),
        result("approve", "c1"),
        ToolCallEvent(call_id="c2", name="reject", arguments={"reason": "changed my mind"}),
        result("reject", "c2"),
    ]
    routing = routing_from_events(events, {"approve", "reject"})
    assert routing == {"tool_called": "approve", "tools_called": ["approve", "reject"], "reason": "looks good"}
    adapter = adapter_for("workflow")
    ids = ("a1", "b2", "c3")
    hub_spec = spec("workflow", ids, WORKFLOW_KNOBS)
    m = meta("workflow", ids, knobs=dict(hub_spec.knobs))
    out = adapter.build_round_envelope(metadata=m, sender_id="a1", reply=reply("", events), events=events)
    assert out is not None and out.event_data["routing"] == routing
    hub = get_adapter("workflow")
    state = hub.initial_state(hub_spec)
    hub.validate_send(hub_spec, state, out)
    assert hub.fold(hub_spec, state, out).current_speaker == "c3"  # approve → carol, not reject → initiator


def test_typed_handoff_and_finish_route_the_packet() -> None:
    from agentsdk.network import Finish, Handoff

    handoff = ToolResultEvent(call_id="c1", name="route", content="x", routing=Handoff("carol", reason="she knows"))
    finish = ToolResultEvent(call_id="c2", name="done", content="x", routing=Finish("all done", reason="shipped"))
    events: list[BaseEvent] = [call("route", "c1"), handoff, call("done", "c2"), finish]
    assert routing_from_events(events, set()) == {
        "tool_called": "route",
        "tools_called": ["route", "done"],
        "kind": "handoff",
        "target": "carol",
        "reason": "she knows",
    }
    assert routing_from_events(events[2:], set()) == {
        "tool_called": "done",
        "tools_called": ["done"],
        "kind": "finish",
        "close_reason": "shipped",
        "summary": "all done",
    }
    # With the hub's name directory a known name is sent as its id; the hub routes it either way.
    ids = ("a1", "b2", "c3")
    hub_spec = spec("workflow", ids, WORKFLOW_KNOBS)
    m = meta("workflow", ids, knobs=dict(hub_spec.knobs))

    class Names:
        def id_for(self, name_or_id: str) -> str:
            return {"carol": "c3"}.get(name_or_id, name_or_id)

    adapter = adapter_for("workflow")
    out = adapter.build_round_envelope(metadata=m, sender_id="a1", reply=reply("", events), hub=Names())
    assert out is not None and out.event_data["routing"]["target"] == "c3"
    hub = get_adapter("workflow")
    state = hub.initial_state(hub_spec)
    assert hub.fold(hub_spec, state, out).current_speaker == "c3"
    done = adapter.build_packet_envelope(channel_id="ch1", sender_id="a1", body="", finish=Finish(reason="shipped"))
    assert done.event_data["routing"] == {
        "tool_called": None,
        "tools_called": [],
        "kind": "finish",
        "close_reason": "shipped",
    }
    after = hub.fold(hub_spec, state, done)
    assert after.end_reason == "shipped" and hub.on_accepted(hub_spec, after, done).close_reason == "shipped"
    with pytest.raises(ValueError, match="not both"):
        adapter.build_packet_envelope(channel_id="c", sender_id="a", body="", handoff=Handoff("b"), finish=Finish())
    with pytest.raises(ValueError, match="close reason"):
        Finish(reason="")
    with pytest.raises(ValueError, match="target"):
        Handoff("")


def test_a_tool_returning_handoff_keeps_it_on_its_result_event() -> None:
    """The agent loop keeps the typed value on the ToolResultEvent (and it survives the event log)."""
    from agentsdk.events import event_from_dict
    from agentsdk.network import Handoff

    event = ToolResultEvent(call_id="c1", name="route", content="{}", routing=Handoff("bob", "why"))
    again = event_from_dict(event.to_dict())
    assert isinstance(again, ToolResultEvent) and again.routing == Handoff("bob", "why")


def test_transition_values_build_the_hub_knobs() -> None:
    from agentsdk.network import (
        AgentTarget,
        Always,
        ContextEquals,
        FromSpeaker,
        RevertToInitiatorTarget,
        RoundRobinTarget,
        StayTarget,
        TerminateTarget,
        ToolCalled,
        Transition,
        TransitionGraph,
    )

    graph = TransitionGraph(
        initial_speaker="alice",
        transitions=[
            Transition(FromSpeaker("alice"), AgentTarget("bob")),
            Transition(ToolCalled("approve"), TerminateTarget(reason="approved"), priority=10),
            Transition(
                ContextEquals("draft", None, also=(ToolCalled("redo"),)), RevertToInitiatorTarget(), priority=-1
            ),
            Transition(ToolCalled("again"), StayTarget(), priority=-1),
        ],
        default_target=RoundRobinTarget(),
        max_turns=9,
        context={"draft": "v1"},
    )
    knobs = graph.to_knobs()
    assert knobs["transitions"][1] == {
        "condition": {"type": "tool_called", "tool": "approve"},
        "target": {"type": "terminate", "reason": "approved"},
        "priority": 10,
    }
    assert knobs["transitions"][2]["condition"] == {
        "type": "context_equals", "key": "draft", "value": None, "and": [{"type": "tool_called", "tool": "redo"}],
    }  # fmt: skip
    assert len(knobs["transitions"]) == 4  # the default target is its own knob, not a transition
    assert knobs["default_target"] == {"type": "round_robin"}
    assert Always().to_json() == {"type": "always"}
    hub_spec = spec("workflow", ("a1", "b2", "c3"), knobs)  # the hub accepts and normalises it
    assert hub_spec.knobs["initial_speaker"] == "a1" and hub_spec.knobs["max_turns"] == 9
    hub = get_adapter("workflow")
    state = hub.initial_state(hub_spec)
    after = hub.fold(hub_spec, state, Envelope("ch", "a1", None, EV_TEXT, {"text": "go"}))
    assert after.current_speaker == "b2"
    # AG2's keyword names and factories.
    assert FromSpeaker(agent_id="x").to_json() == {"type": "from_speaker", "speaker": "x"}
    assert ToolCalled(tool_name="t").to_json() == {"type": "tool_called", "tool": "t"}
    assert AgentTarget(agent_id="y").to_json() == {"type": "agent", "agent": "y"}
    pipeline = TransitionGraph.sequence(["alice", "bob", "carol"]).to_knobs()
    pipe_spec = spec("workflow", ("a1", "b2", "c3"), pipeline)
    reasons = []
    pipe_state = hub.initial_state(pipe_spec)
    for sender in ("a1", "b2", "c3"):
        pipe_state = hub.fold(pipe_spec, pipe_state, Envelope("ch", sender, None, EV_TEXT, {"text": "x"}))
        reasons.append(pipe_state.end_reason)
    assert reasons == [None, None, "sequence_complete"]
    rr = spec("workflow", ("a1", "b2"), TransitionGraph.round_robin(["bob", "alice"], max_turns=3).to_knobs())
    assert rr.knobs["initial_speaker"] == "b2" and rr.knobs["max_turns"] == 3
    rr_state = hub.initial_state(rr)
    for sender in ("b2", "a1", "b2"):
        rr_state = hub.fold(rr, rr_state, Envelope("ch", sender, None, EV_TEXT, {"text": "x"}))
    assert rr_state.end_reason == "max_turns"  # as AG2: the round robin never terminates by itself


def test_transition_graph_has_ag2s_priority_order_and_default_target() -> None:
    """Lower priority is tried first; an unmatched turn takes default_target, TerminateTarget() by default."""
    from agentsdk.network import AgentTarget, Always, TerminateTarget, ToolCalled, Transition, TransitionGraph

    hub = get_adapter("workflow")
    ids = ("a1", "b2", "c3")

    def after(graph: TransitionGraph, routing: dict[str, Any] | None = None) -> Any:
        hub_spec = spec("workflow", ids, graph.to_knobs())
        data = {"routing": routing or {}, "body": "x"}
        return hub.fold(hub_spec, hub.initial_state(hub_spec), Envelope("ch", "a1", None, EV_PACKET, data))

    ordered = TransitionGraph(
        transitions=[
            Transition(Always(), AgentTarget("b2"), priority=10),
            Transition(Always(), AgentTarget("c3"), priority=1),
            Transition(Always(), AgentTarget("a1"), priority=1),
        ]
    )
    assert after(ordered).current_speaker == "c3"
    assert TerminateTarget().reason == "after_work"
    assert TerminateTarget().to_json() == {"type": "terminate", "reason": "after_work"}
    unmatched = TransitionGraph(transitions=[Transition(ToolCalled("next"), AgentTarget("b2"))])
    assert unmatched.to_knobs()["default_target"] == {"type": "terminate", "reason": "after_work"}
    assert after(unmatched).end_reason == "after_work"
    assert after(unmatched, {"tool_called": "next"}).current_speaker == "b2"
    assert after(TransitionGraph()).end_reason == "after_work"  # no transitions at all: AG2's default graph
    # The default target is tried after every transition, whatever their priorities.
    late = TransitionGraph(
        transitions=[Transition(Always(), AgentTarget("c3"), priority=99)], default_target=AgentTarget("b2")
    )
    assert after(late).current_speaker == "c3"
    for bad in ("", " ", "x" * 65):
        with pytest.raises(ValueError, match="close reason"):
            TerminateTarget(reason=bad)


def test_the_next_speaker_reads_why_the_turn_came_to_it() -> None:
    """A packet's routing reason / Handoff / Finish shows as a first line of what the LLM reads."""
    adapter = adapter_for("workflow")

    def packet(routing: dict[str, Any], body: str = "the draft") -> Envelope:
        return Envelope("ch1", "a1", None, EV_PACKET, {"routing": routing, "body": body})

    reasoned = packet({"tool_called": "to_editor", "reason": "needs polish"})
    assert adapter.render_envelope(reasoned) == "[handed off via to_editor] needs polish\nthe draft"
    assert adapter.extract_turn_input(reasoned) == "[handed off via to_editor] needs polish\nthe draft"
    handoff = packet({"tool_called": "pick", "kind": "handoff", "target": "b2"}, body="")
    assert adapter.render_envelope(handoff) == "[handed off via pick]"
    done = packet({"tool_called": "done", "kind": "finish", "close_reason": "shipped", "summary": "ok"})
    assert adapter.render_envelope(done) == "[finished via done: shipped] ok\nthe draft"
    plain = packet({"tool_called": "approve", "tools_called": ["approve"]})
    assert adapter.render_envelope(plain) == "the draft" and adapter.extract_turn_input(plain) == "the draft"
    assert adapter.render_envelope(packet({}, body="")) is None
