"""The gateway in front of a hub agent that is itself an outside A2A agent (a remote_agent identity): the
hub makes the call, the call has no consulting channel, and the gateway follows its execution record.
Both sides are the released a2a-sdk: its client calls the gateway, its server is the outside agent."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from a2a.types import a2a_pb2 as a2a

from a2agateway.config import GatewayOptions
from a2agateway.server import start_gateway
from agentsdk.network import Hub, Passport
from tests.a2agateway.conftest import Net, collect, user_message
from tests.agentsdk.a2a.remote_agent import serve_remote_agent
from tests.agentsdk.a2a.test_outbound import LOOPBACK


@pytest.fixture
async def outside_net() -> AsyncIterator[Net]:
    """A hub that may call loopback A2A agents, one registered as "outside", the gateway, and alice."""
    async with serve_remote_agent("JSONRPC") as remote, Hub.open(options=LOOPBACK) as hub:
        await hub.register_remote_a2a_agent(remote.card_url, Passport(name="outside"))
        alice = await hub.register_human(Passport(name="alice", kind="human"))
        gateway = await start_gateway(GatewayOptions(port=0, grpc_port=0, hub=hub.target))
        try:
            yield Net(hub, gateway, alice.credential)
        finally:
            await gateway.stop()


async def test_a_send_to_an_outside_agent_completes_through_the_gateway(outside_net: Net, binding: str) -> None:
    client = await outside_net.client("outside", binding)
    [response] = await collect(client, a2a.SendMessageRequest(message=user_message("ping")))
    assert response.task.status.state == a2a.TASK_STATE_COMPLETED
    assert [p.text for a in response.task.artifacts for p in a.parts] == ["echo: ping"]

    streaming = await outside_net.client("outside", binding, streaming=True)
    events = await collect(streaming, a2a.SendMessageRequest(message=user_message("pong")))
    assert events[0].task.status.state == a2a.TASK_STATE_WORKING
    assert events[-1].status_update.status.state == a2a.TASK_STATE_COMPLETED
    [artifact] = [e.artifact_update.artifact for e in events if e.HasField("artifact_update")]
    assert artifact.parts[0].text == "echo: pong"


async def test_an_outside_agents_question_is_answered_through_the_gateway(outside_net: Net, binding: str) -> None:
    client = await outside_net.client("outside", binding)
    asked = (await collect(client, a2a.SendMessageRequest(message=user_message("ask"))))[0].task
    assert asked.status.state == a2a.TASK_STATE_INPUT_REQUIRED
    assert asked.status.message.parts[0].text == "which policy?"
    follow_up = user_message("POL-123", task_id=asked.id, context_id=asked.context_id)
    done = (await collect(client, a2a.SendMessageRequest(message=follow_up)))[0].task
    assert (done.id, done.status.state) == (asked.id, a2a.TASK_STATE_COMPLETED)
    assert done.artifacts[-1].parts[0].text == "got: POL-123"
