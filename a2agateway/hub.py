"""The gateway's one connection to the hub: every call made as the A2A client's hub identity."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
from agentnet.v1 import a2a_pb2, envelope_pb2, hub_pb2, hub_pb2_grpc

from agentsdk.errors import error_from_rpc
from agentsdk.tls import TlsConfig, open_channel

RPC_TIMEOUT = 30.0
"""Seconds a short hub call (not an invocation, not a WAL follow) may take."""


class HubLink:
    """One gRPC channel to the hub; each method takes the caller's hub credential."""

    def __init__(self, target: str, tls: TlsConfig | None) -> None:
        self.channel = open_channel(target, tls)
        self.stub = hub_pb2_grpc.HubServiceStub(self.channel)

    async def close(self) -> None:
        """Close the channel."""
        await self.channel.close()

    @staticmethod
    def _auth(token: str) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {token}"),)

    async def call(self, token: str, method: str, request: Any, *, timeout: float | None = RPC_TIMEOUT) -> Any:
        """A unary hub RPC as ``token``'s identity; a refusal raises its agentnet error class."""
        try:
            return await getattr(self.stub, method)(request, metadata=self._auth(token), timeout=timeout)
        except grpc.aio.AioRpcError as err:
            raise error_from_rpc(err) from None

    async def discover(self, token: str, limit: int) -> list[a2a_pb2.DiscoveredAgent]:
        """The A2A agents ``token``'s identity may see and call."""
        response = await self.call(token, "DiscoverAgents", hub_pb2.DiscoverAgentsRequest(limit=limit))
        return list(response.agents)

    async def execution(self, token: str, execution_id: str) -> a2a_pb2.Execution:
        """One execution of a call tree the identity took part in."""
        request = hub_pb2.GetExecutionRequest(execution_id=execution_id)
        return (await self.call(token, "GetExecution", request)).execution  # type: ignore[no-any-return]

    async def executions(self, token: str, root_session_id: str, limit: int) -> list[a2a_pb2.Execution]:
        """The executions of one root session (or of all the identity took part in), in start order."""
        request = hub_pb2.ListExecutionsRequest(root_session_id=root_session_id, limit=limit)
        return list((await self.call(token, "ListExecutions", request)).executions)

    async def follow_wal(self, token: str, channel_id: str, from_seq: int) -> AsyncIterator[envelope_pb2.Envelope]:
        """The channel's envelopes from ``from_seq`` on, then as they are admitted, until it ends."""
        request = hub_pb2.ReadWalRequest(channel_id=channel_id, from_seq=from_seq, follow=True)
        call = self.stub.ReadWal(request, metadata=self._auth(token))
        try:
            async for response in call:
                yield response.envelope
        except grpc.aio.AioRpcError as err:
            raise error_from_rpc(err) from None
        finally:
            call.cancel()
