"""LLM agents talking through a real hub; the real openai client speaks HTTP to a
local OpenAI-compatible server that returns scripted completions (incl. tool calls)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from agentsdk import Agent
from agentsdk.events import ToolCall
from agentsdk.network import (
    EV_CHANNEL_CLOSED,
    EV_CONTEXT_SET,
    EV_PACKET,
    EV_TEXT,
    ChannelInject,
    Envelope,
    Hub,
    Passport,
    Resume,
)
from agentsdk.testing import ScriptedOpenAIServer
from tests.agentsdk.network.llm import llm
from tests.eventually import assert_eventually

HUB_PATHS = ("grpc", "in-process")
"""Each test runs with the embedded hub's client over its port and in process (conftest.py)."""


def user_texts(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "user" and isinstance(m.get("content"), str)]


def last_user(request: dict[str, Any]) -> str:
    return user_texts(request)[-1]


async def texts_until_closed(user: Any, channel_id: str, timeout: float = 20) -> list[Envelope]:
    out = []
    while True:
        env = await user.next_envelope(predicate=lambda e: e.channel_id == channel_id, timeout=timeout)
        if env.event_type == EV_CHANNEL_CLOSED:
            return out
        if env.event_type in (EV_TEXT, EV_PACKET):
            out.append(env)


async def test_human_consults_an_llm_agent(hub: Hub, servers: list[ScriptedOpenAIServer]) -> None:
    server, config = llm(servers, "Our Q3 exposure is 4%.")
    analyst = Agent("analyst", prompt="You are a risk analyst.", config=config)
    await hub.register(analyst, Passport(name="analyst"), Resume(claimed_capabilities=["risk"]))
    user = await hub.register_human(Passport(name="user", kind="human"))
    ch = await user.open(type="consulting", target="analyst")
    question = await user.send(ch.channel_id, "What's our Q3 exposure?")
    replies = await texts_until_closed(user, ch.channel_id)
    assert [r.text for r in replies] == ["Our Q3 exposure is 4%."]
    assert replies[0].causation_id == question.envelope_id
    request = server.requests[0]
    assert request["messages"][0]["role"] == "system" and "risk analyst" in request["messages"][0]["content"]
    assert last_user(request) == "What's our Q3 exposure?"
    tool_names = {t["function"]["name"] for t in request["tools"]}
    assert {"peers", "channels", "tasks", "context", "delegate", "say"} <= tool_names


async def test_attach_plugin_false_keeps_say_but_drops_plugin_tools(
    hub: Hub, servers: list[ScriptedOpenAIServer]
) -> None:
    server, config = llm(servers, "ok")
    bare = Agent("bare", config=config)
    await hub.register(bare, Passport(name="bare"), attach_plugin=False)
    user = await hub.register_human(Passport(name="user", kind="human"))
    ch = await user.open(type="consulting", target="bare")
    await user.send(ch.channel_id, "hi")
    await texts_until_closed(user, ch.channel_id)
    assert {t["function"]["name"] for t in server.requests[0]["tools"]} == {"say"}


async def test_consulting_double_send_trips_the_strict_adapter(
    hub: Hub, servers: list[ScriptedOpenAIServer], caplog: pytest.LogCaptureFixture
) -> None:
    _, config = llm(servers, ToolCall.create("say", {"content": "said via say"}), "and a reply body")
    eager = Agent("eager", config=config)
    await hub.register(eager, Passport(name="eager"))
    user = await hub.register_human(Passport(name="user", kind="human"))
    ch = await user.open(type="consulting", target="eager")
    await user.send(ch.channel_id, "question")
    replies = await texts_until_closed(user, ch.channel_id)
    assert [r.text for r in replies] == ["said via say"]

    def refusal_logged() -> bool:
        return any(
            f"channel '{ch.channel_id}' is closed" in r.getMessage()
            or bool(r.exc_info and f"channel '{ch.channel_id}' is closed" in str(r.exc_info[1]))
            for r in caplog.records
        )

    await assert_eventually(refusal_logged)


async def test_discussion_round_robin_with_two_agents_and_a_human(
    hub: Hub, servers: list[ScriptedOpenAIServer]
) -> None:
    _, c1 = llm(servers, rule=lambda req: f"alpha says: {last_user(req)}")
    _, c2 = llm(servers, rule=lambda req: f"beta says: {last_user(req)}")
    await hub.register(Agent("alpha", config=c1), Passport(name="alpha"))
    await hub.register(Agent("beta", config=c2), Passport(name="beta"))
    moderator = await hub.register_human(Passport(name="mod", kind="human"))
    ch = await moderator.open(type="discussion", target=["alpha", "beta"], knobs={"max_turns": 3})
    await moderator.send(ch.channel_id, "topic")
    texts = [(hub.name_for(e.sender_id), e.text) for e in await texts_until_closed(moderator, ch.channel_id)]
    assert texts == [("alpha", "alpha says: [mod]: topic"), ("beta", "beta says: [alpha]: alpha says: [mod]: topic")]


async def test_conversation_history_reaches_the_model(hub: Hub, servers: list[ScriptedOpenAIServer]) -> None:
    server, config = llm(servers, rule=lambda req: f"echo {len(user_texts(req))}")
    await hub.register(Agent("echo", config=config), Passport(name="echo"))
    user = await hub.register_human(Passport(name="user", kind="human"))
    ch = await user.open(type="conversation", target="echo", knobs={"max_turns": 4})
    await user.send(ch.channel_id, "one")
    first = await user.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=20)
    await user.send(ch.channel_id, "two")
    second = await user.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=20)
    assert (first.text, second.text) == ("echo 1", "echo 2")
    roles = [m["role"] for m in server.requests[1]["messages"] if m["role"] != "system"]
    assert roles == ["user", "assistant", "user"]


async def test_workflow_routes_by_tool_called(hub: Hub, servers: list[ScriptedOpenAIServer]) -> None:
    _, cw = llm(servers, "draft v1")
    _, cr = llm(servers, ToolCall.create("approve", {}), "approved")
    writer = Agent("writer", config=cw)

    from agentsdk import tool

    @tool
    def approve() -> str:
        """Approve the draft."""
        return "approved"

    reviewer = Agent("reviewer", config=cr, tools=[approve])
    await hub.register(writer, Passport(name="writer"))
    await hub.register(reviewer, Passport(name="reviewer"))
    user = await hub.register_human(Passport(name="user", kind="human"))
    knobs = {
        "transitions": [
            {"condition": {"type": "from_speaker", "speaker": "user"}, "target": {"type": "agent", "agent": "writer"}},
            {
                "condition": {"type": "from_speaker", "speaker": "writer"},
                "target": {"type": "agent", "agent": "reviewer"},
            },
            {"condition": {"type": "tool_called", "tool": "approve"}, "target": {"type": "terminate"}, "priority": -5},
            {"condition": {"type": "always"}, "target": {"type": "revert_to_initiator"}},
        ]
    }
    ch = await user.open(type="workflow", target=["writer", "reviewer"], knobs=knobs, message="write a haiku")
    packets = await texts_until_closed(user, ch.channel_id)
    assert [(hub.name_for(p.sender_id), p.event_type) for p in packets] == [
        ("writer", EV_PACKET),
        ("reviewer", EV_PACKET),
    ]
    assert packets[0].event_data["body"] == "draft v1"
    assert packets[1].event_data["routing"]["tool_called"] == "approve"


async def test_workflow_typed_handoff_and_finish(hub: Hub, servers: list[ScriptedOpenAIServer]) -> None:
    """Tools return Handoff / Finish; the graph is built from transition values; Finish names the close reason."""
    from agentsdk import tool
    from agentsdk.network import (
        AgentTarget,
        Finish,
        FromSpeaker,
        Handoff,
        TerminateTarget,
        Transition,
        TransitionGraph,
    )

    @tool
    def pick(reason: str) -> Handoff:
        """Hand the draft to whoever should read it next."""
        return Handoff("reviewer", reason=reason)

    @tool
    def done(summary: str) -> Finish:
        """End the workflow."""
        return Finish(summary=summary, reason="haiku_done")

    _, cw = llm(servers, ToolCall.create("pick", {"reason": "needs a review"}), "draft v1")
    _, cr = llm(servers, ToolCall.create("done", {"summary": "good haiku"}), "approved")
    await hub.register(Agent("writer", config=cw, tools=[pick]), Passport(name="writer"))
    await hub.register(Agent("reviewer", config=cr, tools=[done]), Passport(name="reviewer"))
    user = await hub.register_human(Passport(name="user", kind="human"))
    graph = TransitionGraph(
        transitions=[Transition(FromSpeaker("user"), AgentTarget("writer"))],
        default_target=TerminateTarget(reason="unrouted"),
    )
    ch = await user.open(type="workflow", target=["writer", "reviewer"], knobs=graph.to_knobs(), message="a haiku")
    packets = await texts_until_closed(user, ch.channel_id)
    assert [hub.name_for(p.sender_id) for p in packets] == ["writer", "reviewer"]
    handoff, finish = (p.event_data["routing"] for p in packets)
    reviewer_id = packets[1].sender_id
    assert handoff == {
        "tool_called": "pick", "tools_called": ["pick"], "kind": "handoff", "target": reviewer_id,
        "reason": "needs a review",
    }  # fmt: skip
    assert finish == {
        "tool_called": "done", "tools_called": ["done"], "kind": "finish", "close_reason": "haiku_done",
        "summary": "good haiku",
    }  # fmt: skip
    meta, state, _ = await user.channel_info(ch.channel_id)
    assert meta.close_reason == "haiku_done" and state["end_reason"] == "haiku_done"


async def test_workflow_helpers_set_and_delete_context_from_a_tool_body(
    hub: Hub, servers: list[ScriptedOpenAIServer]
) -> None:
    """AG2's set_context / delete_context post ag2.context.set on the tool's own workflow channel at once,
    so a ContextEquals transition sees the value when the turn's packet is folded."""
    from agentsdk import tool
    from agentsdk.network import (
        AgentTarget,
        ContextEquals,
        FromSpeaker,
        TerminateTarget,
        Transition,
        TransitionGraph,
    )
    from agentsdk.network.workflow_helpers import delete_context, set_context

    @tool
    async def classify(category: str, channel: ChannelInject) -> str:
        """File the request under a category."""
        await set_context(channel, "category", category)
        await delete_context(channel, "draft")
        return "ok"

    _, cw = llm(servers, ToolCall.create("classify", {"category": "billing"}), "filed")
    _, cb = llm(servers, "refund issued")
    await hub.register(Agent("triage", config=cw, tools=[classify]), Passport(name="triage"))
    await hub.register(Agent("billing", config=cb), Passport(name="billing"))
    user = await hub.register_human(Passport(name="user", kind="human"))
    graph = TransitionGraph(
        transitions=[
            Transition(FromSpeaker("user"), AgentTarget("triage")),
            Transition(ContextEquals("category", "billing"), AgentTarget("billing"), priority=-1),
            Transition(FromSpeaker("billing"), TerminateTarget(reason="resolved"), priority=-2),
        ],
        context={"draft": "v0"},
    )
    ch = await user.open(type="workflow", target=["triage", "billing"], knobs=graph.to_knobs(), message="refund?")
    packets = await texts_until_closed(user, ch.channel_id)
    assert [(hub.name_for(p.sender_id), p.event_data["body"]) for p in packets] == [
        ("triage", "filed"),
        ("billing", "refund issued"),
    ]
    meta, state, _ = await user.channel_info(ch.channel_id)
    assert meta.close_reason == "resolved" and state["context"] == {"category": "billing"}
    sets = [e for e in await user.read_wal(ch.channel_id) if e.event_type == EV_CONTEXT_SET]
    assert [(hub.name_for(e.sender_id), e.event_data) for e in sets] == [
        ("triage", {"set": {"category": "billing"}}),
        ("triage", {"delete": ["draft"]}),
    ]


async def test_workflow_helpers_refuse_a_channel_that_is_not_a_workflow(hub: Hub) -> None:
    from agentsdk.errors import FailedPrecondition
    from agentsdk.network.workflow_helpers import delete_context, set_context

    user = await hub.register_human(Passport(name="user", kind="human"))
    await hub.register_human(Passport(name="peer", kind="human"))
    ch = await user.open(type="conversation", target="peer")
    with pytest.raises(FailedPrecondition, match=r"set_context\(\) needs a workflow channel.*'conversation'"):
        await set_context(ch, "k", 1)
    with pytest.raises(FailedPrecondition, match=r"delete_context\(\) needs a workflow channel"):
        await delete_context(ch, "k")
    assert not [e for e in await user.read_wal(ch.channel_id) if e.event_type == EV_CONTEXT_SET]


async def test_delegate_and_peers_tools_run_on_the_hub(hub: Hub, servers: list[ScriptedOpenAIServer]) -> None:
    _, expert_cfg = llm(servers, rule=lambda req: f"expert answer to: {last_user(req)}")
    boss_server, boss_cfg = llm(
        servers,
        ToolCall.create("peers", {"action": "find", "capability": "modeling"}),
        ToolCall.create("delegate", {"target": "expert", "prompt": "How to model X?"}),
        lambda req: "final: " + json.loads(req["messages"][-1]["content"])["text"],
    )
    await hub.register(
        Agent("expert", config=expert_cfg), Passport(name="expert"), Resume(claimed_capabilities=["modeling"])
    )
    await hub.register(Agent("boss", config=boss_cfg), Passport(name="boss"))
    user = await hub.register_human(Passport(name="user", kind="human"))
    ch = await user.open(type="consulting", target="boss")
    await user.send(ch.channel_id, "please find out")
    replies = await texts_until_closed(user, ch.channel_id, timeout=30)
    assert [r.text for r in replies] == ["final: expert answer to: How to model X?"]
    peers_result = json.loads(boss_server.requests[1]["messages"][-1]["content"])
    assert [p["name"] for p in peers_result["peers"]] == ["expert"]


async def test_custom_handler_replaces_and_restores_the_default(hub: Hub, servers: list[ScriptedOpenAIServer]) -> None:
    _, config = llm(servers, "from the LLM")
    worker = Agent("worker", config=config)
    client = await hub.register(worker, Passport(name="worker"))
    seen: list[str] = []

    async def gateway_handler(envelope: Envelope) -> None:
        from agentsdk.network import default_handler

        if envelope.event_type != EV_TEXT:
            await default_handler(envelope, client)
            return
        seen.append(envelope.text)

    client.on_envelope(gateway_handler)
    user = await hub.register_human(Passport(name="user", kind="human"))
    ch = await user.open(type="conversation", target="worker")
    await user.send(ch.channel_id, "to the gateway")
    await assert_eventually(lambda: seen)
    assert seen == ["to the gateway"]
    client.on_envelope(client._run_default_handler)
    await user.send(ch.channel_id, "to the LLM")
    reply = await user.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=20)
    assert reply.text == "from the LLM"


async def test_agent_task_context_manager(hub: Hub, servers: list[ScriptedOpenAIServer]) -> None:
    _, config = llm(servers)
    agent = Agent("owner", config=config)
    client = await hub.register(agent, Passport(name="owner"))
    async with agent.task("crunch") as task:
        await task.progress({"pct": 50})
    status = await client.call_tool("tasks", {"action": "status", "task_id": task.task_id})
    assert status["state"] == "TASK_STATE_COMPLETED"
    with pytest.raises(ValueError):
        async with agent.task("fails") as failing:
            raise ValueError("nope")
    status = await client.call_tool("tasks", {"action": "status", "task_id": failing.task_id})
    assert status["state"] == "TASK_STATE_FAILED" and "nope" in status["error"]
    logging.getLogger(__name__).debug("done")


async def test_a_plain_function_is_an_agent_handler(
    hub: Hub, servers: list[ScriptedOpenAIServer], caplog: pytest.LogCaptureFixture
) -> None:
    # on_envelope takes plain functions as well as coroutine functions (each delivery reaches it).
    _, config = llm(servers)
    client = await hub.register(Agent("plain", config=config), Passport(name="plain"))
    user = await hub.register_human(Passport(name="user", kind="human"))
    ch = await user.open(type="conversation", target="plain")  # the default handler acks the invite
    seen: list[Envelope] = []
    client.on_envelope(seen.append)
    await user.send(ch.channel_id, "hello")
    await assert_eventually(lambda: [e.text for e in seen if e.event_type == EV_TEXT] == ["hello"])
    await user.send(ch.channel_id, "again")  # handled after the first one returned
    await assert_eventually(lambda: [e.text for e in seen if e.event_type == EV_TEXT] == ["hello", "again"])
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], "a delivery failed"
