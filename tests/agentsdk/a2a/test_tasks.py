"""The A2A task RPCs (detach, GetExecution, CancelExecution, continues_execution_id) when the callee is an
outside A2A agent: the hub makes the call in the background, continues the remote task, cancels locally."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from agentnet.v1 import a2a_pb2, hub_pb2

from agentsdk.network import Hub, Passport
from tests.agentsdk.a2a.remote_agent import RemoteAgent, serve_remote_agent
from tests.agentsdk.a2a.test_outbound import LOOPBACK
from tests.hubsvc.harness import Participant, assert_eventually, register

RUNNING = a2a_pb2.INVOCATION_STATUS_RUNNING
COMPLETED = a2a_pb2.INVOCATION_STATUS_COMPLETED
INPUT_REQUIRED = a2a_pb2.INVOCATION_STATUS_INPUT_REQUIRED
CANCELED = a2a_pb2.INVOCATION_STATUS_CANCELED


@pytest.fixture(params=["JSONRPC", "GRPC"])
async def remote(request: pytest.FixtureRequest) -> AsyncIterator[RemoteAgent]:
    async with serve_remote_agent(request.param) as agent:
        yield agent


async def get(caller: Participant, execution_id: str) -> a2a_pb2.Execution:
    req = hub_pb2.GetExecutionRequest(execution_id=execution_id)
    return (await caller.rpc("GetExecution", req)).execution  # type: ignore[no-any-return]


async def test_a_detached_call_to_an_outside_agent_runs_in_the_background(remote: RemoteAgent) -> None:
    async with Hub.open(options=LOOPBACK) as hub:
        outside = await hub.register_remote_a2a_agent(remote.card_url, Passport(name="outside", project="claims"))
        caller = await register(hub.target, "router", project="claims")
        req = hub_pb2.InvokeAgentRequest(agent_id=outside.agent_id, message="ping", detach=True)
        started = await caller.rpc("InvokeAgent", req)
        assert started.status == RUNNING and started.execution_id

        async def completed() -> a2a_pb2.Execution:
            record = await get(caller, started.execution_id)
            assert record.status == COMPLETED
            return record

        record = await assert_eventually(completed)
        assert record.result == "echo: ping" and record.remote_task_id and not record.channel_id


async def test_continues_execution_id_continues_the_remote_task(remote: RemoteAgent) -> None:
    async with Hub.open(options=LOOPBACK) as hub:
        outside = await hub.register_remote_a2a_agent(remote.card_url, Passport(name="outside", project="claims"))
        caller = await register(hub.target, "router", project="claims")
        first = await caller.rpc("InvokeAgent", hub_pb2.InvokeAgentRequest(agent_id=outside.agent_id, message="ask"))
        assert (first.status, first.result) == (INPUT_REQUIRED, "which policy?")
        answer = hub_pb2.InvokeAgentRequest(message="POL-123", continues_execution_id=first.execution_id)
        second = await caller.rpc("InvokeAgent", answer)
        assert (second.status, second.result) == (COMPLETED, "got: POL-123")
        assert second.root_session_id == first.root_session_id
        sent = remote.executor.messages
        assert len(sent) == 2 and sent[1].task_id == sent[0].task_id != ""
        record = await get(caller, second.execution_id)
        assert record.continues_execution_id == first.execution_id
        assert record.remote_task_id == (await get(caller, first.execution_id)).remote_task_id


async def test_cancel_execution_ends_an_outside_call_canceled(remote: RemoteAgent) -> None:
    async with Hub.open(options=LOOPBACK) as hub:
        outside = await hub.register_remote_a2a_agent(remote.card_url, Passport(name="outside", project="claims"))
        caller = await register(hub.target, "router", project="claims")
        req = hub_pb2.InvokeAgentRequest(agent_id=outside.agent_id, message="slow", detach=True)
        started = await caller.rpc("InvokeAgent", req)

        async def sent() -> bool:
            return len(remote.executor.messages) == 1

        await assert_eventually(sent)  # the outside agent is working on it
        try:
            cancel = hub_pb2.CancelExecutionRequest(execution_id=started.execution_id)
            done = (await caller.rpc("CancelExecution", cancel)).execution
            assert done.status == CANCELED and done.error == "the caller cancelled the call"
            assert (await get(caller, started.execution_id)).status == CANCELED
        finally:
            remote.executor.release.set()
