"""The A2A task RPCs an outside gateway builds on: detached calls, GetExecution, CancelExecution
and answering an input-required call (stub-level, on a real hub)."""

from __future__ import annotations

import asyncio

import pytest
from agentnet.v1 import a2a_pb2, hub_pb2

from agentsdk.errors import FailedPrecondition, InvalidArgument, NotFound, PermissionDenied
from tests.hubsvc.harness import EV_TEXT, RunningHub, assert_eventually, data_of
from tests.hubsvc.test_a2a import a2a_agent, answering, invoke

RUNNING = a2a_pb2.INVOCATION_STATUS_RUNNING
COMPLETED = a2a_pb2.INVOCATION_STATUS_COMPLETED
INPUT_REQUIRED = a2a_pb2.INVOCATION_STATUS_INPUT_REQUIRED
CANCELED = a2a_pb2.INVOCATION_STATUS_CANCELED


async def test_a_detached_call_returns_running_and_records_its_outcome(hub: RunningHub) -> None:
    caller = await a2a_agent(hub.target, "caller")
    callee = await a2a_agent(hub.target, "callee")
    started = await caller.rpc("InvokeAgent", invoke(callee, "ping", detach=True))
    assert started.status == RUNNING and started.execution_id and started.root_session_id
    got = (await caller.rpc("GetExecution", hub_pb2.GetExecutionRequest(execution_id=started.execution_id))).execution
    assert got.status == RUNNING and got.channel_id  # the running record names its channel
    async with answering(callee, lambda d: ("pong: " + d["message"], None)):

        async def ended() -> a2a_pb2.Execution:
            req = hub_pb2.GetExecutionRequest(execution_id=started.execution_id)
            record = (await caller.rpc("GetExecution", req)).execution
            assert record.status == COMPLETED
            return record

        record = await assert_eventually(ended)
    assert record.result == "pong: ping"


async def test_get_execution_is_refused_to_agents_outside_the_call_tree(hub: RunningHub) -> None:
    caller = await a2a_agent(hub.target, "caller")
    callee = await a2a_agent(hub.target, "callee")
    stranger = await a2a_agent(hub.target, "stranger")
    started = await caller.rpc("InvokeAgent", invoke(callee, "ping", detach=True))
    req = hub_pb2.GetExecutionRequest(execution_id=started.execution_id)
    assert (await callee.rpc("GetExecution", req)).execution.execution_id == started.execution_id
    with pytest.raises(NotFound):
        await stranger.rpc("GetExecution", req)
    with pytest.raises(NotFound):
        await caller.rpc("GetExecution", hub_pb2.GetExecutionRequest(execution_id="nope"))


async def test_cancel_execution_closes_the_channel_and_records_canceled(hub: RunningHub) -> None:
    caller = await a2a_agent(hub.target, "caller")
    callee = await a2a_agent(hub.target, "callee")
    started = await caller.rpc("InvokeAgent", invoke(callee, "take your time", detach=True))
    question = await callee.next(lambda e: e.event_type == EV_TEXT)
    assert data_of(question)["a2a"]["execution_id"] == started.execution_id
    with pytest.raises(PermissionDenied):
        await callee.rpc("CancelExecution", hub_pb2.CancelExecutionRequest(execution_id=started.execution_id))
    done = await caller.rpc("CancelExecution", hub_pb2.CancelExecutionRequest(execution_id=started.execution_id))
    assert done.execution.status == CANCELED
    with pytest.raises(FailedPrecondition):
        await caller.rpc("CancelExecution", hub_pb2.CancelExecutionRequest(execution_id=started.execution_id))
    channel = (
        await caller.rpc("DescribeChannel", hub_pb2.DescribeChannelRequest(channel_id=done.execution.channel_id))
    ).channel
    assert channel.close_reason == "a2a_canceled"


async def test_a_blocking_call_cancelled_by_its_caller_returns_canceled(hub: RunningHub) -> None:
    caller = await a2a_agent(hub.target, "caller")
    callee = await a2a_agent(hub.target, "callee")
    pending = asyncio.create_task(caller.rpc("InvokeAgent", invoke(callee, "slow")))
    question = await callee.next(lambda e: e.event_type == EV_TEXT)
    execution_id = data_of(question)["a2a"]["execution_id"]
    await caller.rpc("CancelExecution", hub_pb2.CancelExecutionRequest(execution_id=execution_id))
    response = await pending
    assert response.status == CANCELED and response.error


async def test_an_input_required_call_is_continued_in_the_same_root_session(hub: RunningHub) -> None:
    caller = await a2a_agent(hub.target, "caller")
    callee = await a2a_agent(hub.target, "callee")
    other = await a2a_agent(hub.target, "other")
    replies = iter([("Which account?", {"status": "input-required"}), ("Refunded ACC-9.", None)])
    async with answering(callee, lambda _d: next(replies)):
        first = await caller.rpc("InvokeAgent", invoke(callee, "refund me"))
        assert first.status == INPUT_REQUIRED
        with pytest.raises(PermissionDenied):
            await other.rpc("InvokeAgent", invoke("", "ACC-9", continues_execution_id=first.execution_id))
        second = await caller.rpc("InvokeAgent", invoke("", "ACC-9", continues_execution_id=first.execution_id))
    assert (second.status, second.result, second.root_session_id) == (
        COMPLETED,
        "Refunded ACC-9.",
        first.root_session_id,
    )
    record = (await caller.rpc("GetExecution", hub_pb2.GetExecutionRequest(execution_id=second.execution_id))).execution
    assert record.continues_execution_id == first.execution_id and record.target_id == callee.agent_id
    with pytest.raises(FailedPrecondition):  # answered already
        await caller.rpc("InvokeAgent", invoke("", "again", continues_execution_id=first.execution_id))
    with pytest.raises(FailedPrecondition):  # completed, not input-required
        await caller.rpc("InvokeAgent", invoke("", "again", continues_execution_id=second.execution_id))


async def test_cancel_and_get_refuse_an_empty_id(hub: RunningHub) -> None:
    caller = await a2a_agent(hub.target, "caller")
    for method, request in (
        ("CancelExecution", hub_pb2.CancelExecutionRequest()),
        ("GetExecution", hub_pb2.GetExecutionRequest()),
    ):
        with pytest.raises(InvalidArgument):
            await caller.rpc(method, request)


async def test_a_continuation_naming_another_agent_is_refused(hub: RunningHub) -> None:
    caller = await a2a_agent(hub.target, "caller")
    callee = await a2a_agent(hub.target, "callee")
    other = await a2a_agent(hub.target, "other")
    async with answering(callee, lambda _d: ("Which account?", {"status": "input-required"})):
        first = await caller.rpc("InvokeAgent", invoke(callee, "refund me"))
    with pytest.raises(InvalidArgument, match="names another agent"):
        await caller.rpc("InvokeAgent", invoke(other, "ACC-9", continues_execution_id=first.execution_id))
    with pytest.raises(NotFound):
        await caller.rpc("InvokeAgent", invoke("", "ACC-9", continues_execution_id="no-such-execution"))
