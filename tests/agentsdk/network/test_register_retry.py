"""A registration whose answer is lost is retried and yields one identity.

Real components: an embedded hub and the SDK dialling it through a TCP forwarder the test
holds. The forwarder keeps the hub's answer to Register / RegisterHuman from the client; once
the hub has committed the identity the test drops the connection, so the client's call fails
with no answer (UNAVAILABLE), as when a network or a hub fails between commit and reply. The
SDK's own retry sends the same request again, under the same idempotency key, and gets the
identity the first attempt created."""

from __future__ import annotations

import asyncio

import pytest

from agentsdk.agent import Agent
from agentsdk.config import ScriptedConfig
from agentsdk.network.clients import NetworkClient
from agentsdk.network.hub_client import Hub, HubClient
from agentsdk.operator import AgentView, OperatorClient
from netkernel.identity import Passport
from tests.eventually import assert_eventually
from tests.forwarder import TcpForwarder


@pytest.mark.parametrize("kind", ["human", "agent"])
async def test_a_register_whose_answer_is_lost_is_retried_and_yields_one_identity(kind: str) -> None:
    async with (
        Hub.open() as hub,
        OperatorClient(hub.target, hub.operator_token) as operator,
        TcpForwarder() as address,
        HubClient.connect(address.target) as hc,
    ):
        address.point_to(hub.target)
        await hc.connection.channel.channel_ready()
        before = {a.agent_id for a in await operator.agents()}
        address.hold_replies()

        async def register() -> NetworkClient:
            if kind == "human":
                return await hc.register_human(Passport(name="alice", kind="human"))
            return await hc.register(Agent("alice", config=ScriptedConfig([])), Passport(name="alice"))

        call = asyncio.create_task(register())

        async def committed() -> bool:
            names = [a.name for a in await operator.agents() if a.agent_id not in before]
            assert names == ["alice"], names
            return True

        await assert_eventually(committed)
        assert not call.done()  # the answer is held by the forwarder
        await address.cut()  # the answer is lost; the SDK retries on a new connection
        client = await asyncio.wait_for(call, 30)

        created = [a for a in await operator.agents() if a.agent_id not in before]
        assert [(a.agent_id, a.name) for a in created] == [(client.agent_id, "alice")]
        # The credential the retry returned is the identity's own: the client works.
        async with AgentView(hub.target, client.credential) as view:
            assert (await view.me()).passport.name == "alice"
