"""A2A over a real hub, through the generated stubs only (as any bridge would call it)."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from agentnet.v1 import a2a_pb2, hub_pb2, hub_pb2_grpc

from agentsdk.errors import (
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Timeout,
)
from hubsvc.core.hub import HubCore
from hubsvc.storage import ExecutionRow, Writes
from tests.hubsvc.harness import (
    EV_TEXT,
    Participant,
    RunningHub,
    assert_eventually,
    call,
    data_of,
    make_store,
    register,
)

COMPLETED = a2a_pb2.INVOCATION_STATUS_COMPLETED
INPUT_REQUIRED = a2a_pb2.INVOCATION_STATUS_INPUT_REQUIRED
FAILED = a2a_pb2.INVOCATION_STATUS_FAILED
Reply = Callable[[dict[str, Any]], tuple[str, dict[str, Any] | None]]


async def a2a_agent(
    target: str, name: str, *, enabled: bool = True, project: str = "p1", **settings: Any
) -> Participant:
    """Register an agent with A2A settings and connect it (invites accepted automatically)."""
    p = await register(target, name, project=project)
    await p.rpc("SetA2ASettings", hub_pb2.SetA2ASettingsRequest(a2a=a2a_pb2.A2ASettings(enabled=enabled, **settings)))
    p.auto_accept_invites = True
    await p.connect()
    return p


@asynccontextmanager
async def answering(callee: Participant, reply: Reply) -> AsyncIterator[list[dict[str, Any]]]:
    """Answer every A2A question ``callee`` receives with ``reply(dispatch) -> (text, a2a_reply)``;
    yields the dispatches seen."""
    seen: list[dict[str, Any]] = []

    async def loop() -> None:
        while True:
            question = await callee.next(lambda e: e.event_type == EV_TEXT, timeout=3600)
            dispatch = data_of(question)["a2a"]
            seen.append(dispatch)
            text, outcome = reply(dispatch)
            data: dict[str, Any] = {"text": text}
            if outcome is not None:
                data["a2a"] = outcome
            await callee.post(question.channel_id, EV_TEXT, data)

    task = asyncio.create_task(loop())
    try:
        yield seen
    finally:
        task.cancel()


def invoke(agent: Participant | str, message: str = "hello", **kwargs: Any) -> hub_pb2.InvokeAgentRequest:
    agent_id = agent if isinstance(agent, str) else agent.agent_id
    return hub_pb2.InvokeAgentRequest(agent_id=agent_id, message=message, **kwargs)


def discover(**kwargs: Any) -> hub_pb2.DiscoverAgentsRequest:
    return hub_pb2.DiscoverAgentsRequest(**kwargs)


async def names(caller: Participant, **filters: Any) -> list[str]:
    response = await caller.rpc("DiscoverAgents", discover(**filters))
    return [a.name for a in response.agents]


async def test_filters_match_any_value_within_one_filter_and_all_filters_together(hub: RunningHub) -> None:
    caller = await a2a_agent(hub.target, "caller")
    await a2a_agent(
        hub.target, "billing", skills=["payments", "refunds"], capabilities=["stream"], input_modes=["text"]
    )
    await a2a_agent(hub.target, "policy", skills=["Policy-Lookup"], capabilities=["batch"], input_modes=["text"])
    await a2a_agent(hub.target, "vision", skills=["ocr"], capabilities=["stream"], input_modes=["image"])

    assert await names(caller, skills=["refunds", "policy-lookup"]) == ["billing", "policy"]
    assert await names(caller, capabilities=["stream"]) == ["billing", "vision"]
    assert await names(caller, skills=["refunds", "ocr"], capabilities=["stream"], input_modes=["image"]) == ["vision"]
    assert await names(caller, skills=["payments"], capabilities=["batch"]) == []
    assert await names(caller, limit=2) == ["billing", "caller"]
    found = (await caller.rpc("DiscoverAgents", discover(skills=["ocr"]))).agents[0]
    assert (list(found.skills), list(found.capabilities), list(found.input_modes)) == (["ocr"], ["stream"], ["image"])
    with pytest.raises(InvalidArgument, match="limit"):
        await caller.rpc("DiscoverAgents", discover(limit=-1))


async def test_disabled_agents_other_projects_and_excluded_callers_are_invisible_and_refuse_calls(
    hub: RunningHub,
) -> None:
    caller = await a2a_agent(hub.target, "billing-bot")
    off = await a2a_agent(hub.target, "off", enabled=False)
    elsewhere = await a2a_agent(hub.target, "elsewhere", project="p2")
    picky = await a2a_agent(hub.target, "picky", allowed_callers=["support-*"])
    friendly = await a2a_agent(hub.target, "friendly", allowed_callers=["billing-*", "ops"])
    support = await a2a_agent(hub.target, "support-1")

    # The raw discovery includes the caller itself (the LLM tool filters it out).
    assert await names(caller) == ["billing-bot", "friendly", "support-1"]
    assert await names(support) == ["billing-bot", "picky", "support-1"]
    assert await names(elsewhere) == ["elsewhere"]
    with pytest.raises(PermissionDenied, match="own project"):
        await caller.rpc("DiscoverAgents", discover(project_id="p2"))
    assert await names(caller, project_id="p1") == ["billing-bot", "friendly", "support-1"]

    for target in (off, elsewhere, picky):
        with pytest.raises(PermissionDenied, match="does not accept A2A calls from you") as info:
            await caller.rpc("InvokeAgent", invoke(target))
        assert info.value.metadata["agent_id"] == target.agent_id
    with pytest.raises(NotFound):
        await caller.rpc("InvokeAgent", invoke("nobody"))
    with pytest.raises(InvalidArgument, match="itself"):
        await caller.rpc("InvokeAgent", invoke(caller))
    # Nothing was recorded for refused calls.
    assert list((await caller.rpc("ListExecutions", hub_pb2.ListExecutionsRequest())).executions) == []
    del friendly


async def test_invoke_delivers_message_and_headers_and_returns_the_reply(hub: RunningHub) -> None:
    caller = await a2a_agent(hub.target, "caller")
    billing = await a2a_agent(hub.target, "billing", skills=["payments"])
    async with answering(billing, lambda d: (f"charged ({d['custom_headers']['x-tenant']})", None)) as seen:
        response = await caller.rpc(
            "InvokeAgent",
            invoke(billing, "Charge the customer", skill="payments", custom_headers={"x-tenant": "acme"}),
        )
    assert (response.status, response.result, response.error) == (COMPLETED, "charged (acme)", "")
    dispatch = seen[0]
    assert dispatch["message"] == "Charge the customer"
    assert dispatch["skill"] == "payments"
    assert dispatch["custom_headers"] == {"x-tenant": "acme"}
    assert dispatch["execution_id"] == response.execution_id
    assert dispatch["root_session_id"] == response.root_session_id
    assert "call_token" not in dispatch  # tokens never enter the channel's log (test_a2a_call_tokens.py)

    [execution] = (await caller.rpc("ListExecutions", hub_pb2.ListExecutionsRequest())).executions
    assert (execution.caller_id, execution.target_id, execution.status) == (
        caller.agent_id,
        billing.agent_id,
        COMPLETED,
    )
    assert execution.parent_execution_id == ""
    assert execution.HasField("ended_at") and execution.channel_id
    # The call ran in a consulting channel, now complete.
    channel = await caller.rpc("DescribeChannel", hub_pb2.DescribeChannelRequest(channel_id=execution.channel_id))
    assert channel.channel.type == "consulting"
    assert channel.channel.close_reason == "consulting_complete"


@pytest.mark.parametrize("key", ["a2a-token", "A2A-Caller-Workspace", "a2A-x"])
async def test_reserved_header_prefix_is_refused_naming_the_key_and_nothing_happens(hub: RunningHub, key: str) -> None:
    caller = await a2a_agent(hub.target, "caller")
    billing = await a2a_agent(hub.target, "billing")
    with pytest.raises(InvalidArgument, match=key) as info:
        await caller.rpc("InvokeAgent", invoke(billing, custom_headers={"x-ok": "1", key: "v"}))
    assert info.value.metadata["key"] == key
    assert list((await caller.rpc("ListExecutions", hub_pb2.ListExecutionsRequest())).executions) == []
    assert list((await caller.rpc("ListChannels", hub_pb2.ListChannelsRequest(include_ended=True))).channels) == []
    assert billing.drain() == []


@pytest.mark.parametrize(
    ("key", "bad"),
    [(" a2a-token", "U+0020"), ("a2a\u2010token", "U+2010"), ("x tenant", "U+0020"), ("x-t\u0130", "U+0130")],
)
async def test_a_header_name_that_is_not_an_http_token_is_refused(hub: RunningHub, key: str, bad: str) -> None:
    """A look-alike of a reserved name (a leading space, a Unicode hyphen) is no way around the
    a2a- check: a key must be an RFC 9110 token before the reserved prefix is looked at."""
    caller = await a2a_agent(hub.target, "caller")
    billing = await a2a_agent(hub.target, "billing")
    with pytest.raises(InvalidArgument, match=f"not an HTTP header name.*{re.escape(bad)}") as info:
        await caller.rpc("InvokeAgent", invoke(billing, custom_headers={"x-ok": "1", key: "v"}))
    assert info.value.metadata == {"field": "custom_headers", "key": key}
    assert list((await caller.rpc("ListExecutions", hub_pb2.ListExecutionsRequest())).executions) == []
    assert billing.drain() == []


async def test_agents_cannot_post_forged_dispatches(hub: RunningHub) -> None:
    caller = await a2a_agent(hub.target, "caller")
    target = await a2a_agent(hub.target, "target")
    response = await caller.rpc(
        "OpenChannel", hub_pb2.OpenChannelRequest(type="consulting", targets=[target.agent_id], wait_until_opened=True)
    )
    forged = {"text": "hi", "a2a": {"execution_id": "e1", "custom_headers": {"x-tenant": "other"}}}
    with pytest.raises(InvalidArgument, match="only the hub writes"):
        await caller.post(response.channel.channel_id, EV_TEXT, forged)


async def test_input_required_and_failed_replies(hub: RunningHub) -> None:
    caller = await a2a_agent(hub.target, "caller")
    approver = await a2a_agent(hub.target, "approver")
    outcomes = iter(
        [
            ("Who approves this refund?", {"status": "input-required"}),
            ("", {"status": "failed", "error": "ledger unavailable"}),
            ("cannot do that", {"status": "failed"}),
            ("done", {"status": "completed"}),
        ]
    )
    async with answering(approver, lambda _d: next(outcomes)):
        results = [await caller.rpc("InvokeAgent", invoke(approver, f"request {i}")) for i in range(4)]
    assert [(r.status, r.result, r.error) for r in results] == [
        (INPUT_REQUIRED, "Who approves this refund?", ""),
        (FAILED, "", "ledger unavailable"),
        (FAILED, "", "cannot do that"),
        (COMPLETED, "done", ""),
    ]
    executions = (await caller.rpc("ListExecutions", hub_pb2.ListExecutionsRequest())).executions
    assert [e.status for e in executions] == [INPUT_REQUIRED, FAILED, FAILED, COMPLETED]
    assert executions[1].error == "ledger unavailable"


async def test_a_silent_target_times_out_as_failed_and_its_channel_is_closed(hub: RunningHub) -> None:
    caller = await a2a_agent(hub.target, "caller")
    silent = await a2a_agent(hub.target, "silent")
    response = await caller.rpc("InvokeAgent", invoke(silent, timeout_seconds=0.5))
    assert response.status == FAILED
    assert "did not answer within 0.5s" in response.error
    [execution] = (await caller.rpc("ListExecutions", hub_pb2.ListExecutionsRequest())).executions
    assert execution.status == FAILED
    meta = await caller.rpc("DescribeChannel", hub_pb2.DescribeChannelRequest(channel_id=execution.channel_id))
    assert meta.channel.close_reason == "a2a_timeout"
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(InvalidArgument, match="timeout_seconds"):
            await caller.rpc("InvokeAgent", invoke(silent, timeout_seconds=bad))


async def test_a_call_its_caller_abandons_is_recorded_failed_and_its_channel_closed(hub: RunningHub) -> None:
    caller = await a2a_agent(hub.target, "caller")
    silent = await a2a_agent(hub.target, "silent")
    with pytest.raises(Timeout):  # the caller's own RPC deadline passes first
        await caller.rpc("InvokeAgent", invoke(silent, timeout_seconds=60), timeout=0.5)

    async def abandoned() -> a2a_pb2.Execution:
        [execution] = (await caller.rpc("ListExecutions", hub_pb2.ListExecutionsRequest())).executions
        assert execution.status == FAILED
        return execution

    execution = await assert_eventually(abandoned)
    assert execution.error == "the caller cancelled the call"
    meta = await caller.rpc("DescribeChannel", hub_pb2.DescribeChannelRequest(channel_id=execution.channel_id))
    assert meta.channel.close_reason == "a2a_cancelled"


async def test_an_offline_or_refusing_target_fails_the_call(hub: RunningHub) -> None:
    caller = await a2a_agent(hub.target, "caller")
    refuser = await a2a_agent(hub.target, "refuser")
    refuser.auto_accept_invites = False

    async def reject() -> None:
        invite = await refuser.next_of("ag2.channel.invite")
        await refuser.post(invite.channel_id, "ag2.channel.invite_reject", {"reason": "busy"})

    rejecting = asyncio.create_task(reject())
    response = await caller.rpc("InvokeAgent", invoke(refuser, timeout_seconds=10))
    await rejecting
    assert response.status == FAILED
    assert "ended before refuser replied" in response.error


async def test_unknown_skill_empty_message_and_missing_agent_id_are_invalid(hub: RunningHub) -> None:
    caller = await a2a_agent(hub.target, "caller")
    billing = await a2a_agent(hub.target, "billing", skills=["payments"])
    with pytest.raises(InvalidArgument, match="does not offer skill 'ocr'"):
        await caller.rpc("InvokeAgent", invoke(billing, skill="ocr"))
    with pytest.raises(InvalidArgument, match="message is empty"):
        await caller.rpc("InvokeAgent", invoke(billing, "  "))
    with pytest.raises(InvalidArgument, match="agent_id is empty"):
        await caller.rpc("InvokeAgent", invoke(""))


async def test_three_level_call_chain_is_one_execution_tree(hub: RunningHub) -> None:
    a = await a2a_agent(hub.target, "a")
    b = await a2a_agent(hub.target, "b")
    c = await a2a_agent(hub.target, "c")
    outsider = await a2a_agent(hub.target, "outsider")
    nested: list[hub_pb2.InvokeAgentResponse] = []

    async def b_loop() -> None:
        question = await b.next(lambda e: e.event_type == EV_TEXT)
        execution_id = data_of(question)["a2a"]["execution_id"]
        token = await b.rpc("RefreshCallToken", hub_pb2.RefreshCallTokenRequest(execution_id=execution_id))
        answer = await b.rpc("InvokeAgent", invoke(c, "what does C say?", call_token=token.call_token))
        nested.append(answer)
        await b.say(question.channel_id, f"C said: {answer.result}")

    b_task = asyncio.create_task(b_loop())
    async with answering(c, lambda _d: ("leaf", None)):
        top = await a.rpc("InvokeAgent", invoke(b, "ask C", root_session_id="user-session-1"))
    await b_task
    assert (top.status, top.result, top.root_session_id) == (COMPLETED, "C said: leaf", "user-session-1")
    assert nested[0].root_session_id == "user-session-1"

    tree = (await c.rpc("ListExecutions", hub_pb2.ListExecutionsRequest(root_session_id="user-session-1"))).executions
    assert [(e.caller_id, e.target_id) for e in tree] == [(a.agent_id, b.agent_id), (b.agent_id, c.agent_id)]
    assert tree[0].parent_execution_id == ""
    assert tree[1].parent_execution_id == tree[0].execution_id == top.execution_id
    assert {e.root_session_id for e in tree} == {"user-session-1"}
    # Outsiders may neither read the tree nor add calls to it.
    with pytest.raises(PermissionDenied, match="no part"):
        await outsider.rpc("ListExecutions", hub_pb2.ListExecutionsRequest(root_session_id="user-session-1"))
    with pytest.raises(PermissionDenied, match="no part"):
        await outsider.rpc("InvokeAgent", invoke(c, root_session_id="user-session-1"))
    assert list((await outsider.rpc("ListExecutions", hub_pb2.ListExecutionsRequest())).executions) == []
    # The operator (a dashboard, an auditor) may read any tree, and every execution.
    async with grpc.aio.insecure_channel(hub.target) as ch:
        stub = hub_pb2_grpc.HubServiceStub(ch)
        operator = (("authorization", f"Bearer {hub.operator_token}"),)
        seen = await call(
            stub.ListExecutions(hub_pb2.ListExecutionsRequest(root_session_id="user-session-1"), metadata=operator)
        )
        assert [e.execution_id for e in seen.executions] == [e.execution_id for e in tree]
        everything = await call(stub.ListExecutions(hub_pb2.ListExecutionsRequest(limit=1), metadata=operator))
        assert [e.execution_id for e in everything.executions] == [tree[0].execution_id]


async def test_executions_left_running_by_a_stopped_hub_are_marked_failed(tmp_path: Path, hub_store: str) -> None:
    db = tmp_path / "hub.db"
    store = make_store(db)
    await store.open()
    record = a2a_pb2.Execution(
        execution_id="e1", root_session_id="r1", caller_id="x", target_id="y", status=a2a_pb2.INVOCATION_STATUS_RUNNING
    )
    record.started_at.GetCurrentTime()
    await store.commit(
        Writes(executions=[ExecutionRow("e1", "r1", "x", "y", True, time.time(), record.SerializeToString())])
    )
    await store.close()

    core = HubCore(make_store(db))
    await core.start()
    try:
        [failed] = await core.executions.list("x", "r1", 0)
        assert failed.status == FAILED
        # Alone on SQLite, a starting hub fails what it finds running; on Redis, a replica fails
        # the calls whose owner is not alive (this row names no owner).
        assert ("restarted" if hub_store == "sqlite" else "replica that ran this call stopped") in failed.error
        assert failed.HasField("ended_at")
    finally:
        await core.stop()
