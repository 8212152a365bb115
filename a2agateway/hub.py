"""The gateway's one connection to the hub: every call made as the A2A client's hub identity,
through the SDK's typed layer (:class:`agentsdk.rpc.HubRpc`)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from agentnet.v1 import a2a_pb2, envelope_pb2, hub_pb2

from agentsdk.backoff import NO_RETRY
from agentsdk.rpc import HubRpc
from agentsdk.tls import TlsConfig
from agentsdk.transport import HubConnection

RPC_TIMEOUT = 30.0
"""Seconds a hub call may take (every unary one: a detached invocation returns once started; WAL follows have none)."""


class HubLink:
    """One gRPC channel to the hub; :meth:`rpc` makes calls as the holder of a hub credential.

    A RATE_LIMITED refusal is not retried here: it goes back to the A2A client, which decides."""

    def __init__(self, target: str, tls: TlsConfig | None) -> None:
        self.connection = HubConnection(target, tls, rate_limit_backoff=NO_RETRY)

    async def close(self) -> None:
        """Close the channel."""
        await self.connection.close()

    def rpc(self, token: str) -> HubRpc:
        """The hub's RPCs as ``token``'s identity (a refusal raises its agentnet error class)."""
        return HubRpc(self.connection, token)

    async def discover(self, token: str, limit: int) -> list[a2a_pb2.DiscoveredAgent]:
        """The A2A agents ``token``'s identity may see and call."""
        request = hub_pb2.DiscoverAgentsRequest(limit=limit)
        return list((await self.rpc(token).discover_agents(request, timeout=RPC_TIMEOUT)).agents)

    async def execution(self, token: str, execution_id: str) -> a2a_pb2.Execution:
        """One execution of a call tree the identity took part in."""
        request = hub_pb2.GetExecutionRequest(execution_id=execution_id)
        return (await self.rpc(token).get_execution(request, timeout=RPC_TIMEOUT)).execution

    async def executions(self, token: str, root_session_id: str, limit: int) -> list[a2a_pb2.Execution]:
        """The executions of one root session (or of all the identity took part in), in start order."""
        request = hub_pb2.ListExecutionsRequest(root_session_id=root_session_id, limit=limit)
        return list((await self.rpc(token).list_executions(request, timeout=RPC_TIMEOUT)).executions)

    async def follow_wal(self, token: str, channel_id: str, from_seq: int) -> AsyncIterator[envelope_pb2.Envelope]:
        """The channel's envelopes from ``from_seq`` on, then as they are admitted, until it ends."""
        request = hub_pb2.ReadWalRequest(channel_id=channel_id, from_seq=from_seq, follow=True)
        async for response in self.rpc(token).read_wal(request):
            yield response.envelope
