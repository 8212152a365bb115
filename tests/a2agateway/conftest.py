"""A real hub, a real gateway on loopback, hub agents answering with ScriptedConfig, and the
released a2a-sdk client talking to the gateway over JSON-RPC or gRPC."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import grpc
import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientCallContext, ClientConfig, ClientFactory
from a2a.client.auth import AuthInterceptor, CredentialService
from a2a.types import a2a_pb2 as a2a

from a2agateway.config import GatewayOptions
from a2agateway.server import Gateway, start_gateway
from agentsdk.network import Hub, Passport


class HubCredential(CredentialService):
    """Hands a2a-sdk's AuthInterceptor the caller's hub credential for the cards' bearer scheme."""

    def __init__(self, token: str) -> None:
        self.token = token

    async def get_credentials(self, security_scheme_name: str, context: ClientCallContext | None) -> str | None:
        """The one credential, whatever the scheme's name."""
        return self.token


@dataclass
class Net:
    """The hub, the gateway and a human caller's credential."""

    hub: Hub
    gateway: Gateway
    token: str

    async def card(self, name: str, token: str | None = None) -> a2a.AgentCard:
        """The agent's card, fetched the way a2a-sdk resolves cards."""
        headers = {"Authorization": f"Bearer {token or self.token}"}
        async with httpx.AsyncClient() as http:
            resolver = A2ACardResolver(http, f"{self.gateway.url}/agents/{name}")
            return await resolver.get_agent_card(http_kwargs={"headers": headers})

    async def client(self, name: str, binding: str, *, streaming: bool = False, token: str | None = None) -> Client:
        """An a2a-sdk client of the agent's card, over ``binding`` ("JSONRPC" or "GRPC")."""
        card = await self.card(name)
        config = ClientConfig(
            streaming=streaming,
            supported_protocol_bindings=[binding],
            grpc_channel_factory=grpc.aio.insecure_channel,
        )
        return ClientFactory(config).create(
            card, interceptors=[AuthInterceptor(HubCredential(self.token if token is None else token))]
        )


@pytest.fixture(params=["JSONRPC", "GRPC"])
def binding(request: pytest.FixtureRequest) -> str:
    """Each test runs over both of a2a-sdk's bindings."""
    return str(request.param)


@pytest.fixture
async def net() -> AsyncIterator[Net]:
    async with Hub.open() as hub:
        alice = await hub.register_human(Passport(name="alice", kind="human"))
        net = Net(hub, await start_gateway(GatewayOptions(port=0, grpc_port=0, hub=hub.target)), alice.credential)
        try:
            yield net
        finally:
            await net.gateway.stop()  # the one running now (a test may have replaced it)


def user_message(text: str, **fields: Any) -> a2a.Message:
    """A user message with one text part."""
    return a2a.Message(message_id=f"m-{abs(hash(text))}", role=a2a.ROLE_USER, parts=[a2a.Part(text=text)], **fields)


async def collect(client: Client, request: a2a.SendMessageRequest) -> list[a2a.StreamResponse]:
    """Every response of one send."""
    return [r async for r in client.send_message(request)]
