"""The gateway's one gRPC connection to the hub, and the RPCs it calls.

Calls go through agentsdk's typed layer (:class:`agentsdk.rpc.HubRpc`). The RPCs HubRpc does not
have yet are called on the generated stub HERE ONLY (:class:`MissingRpcs`), so they move onto the
typed layer in one place once it has them.
"""

from __future__ import annotations

from agentnet.v1 import hub_pb2

from agentsdk.rpc import HubRpc
from agentsdk.tls import TlsConfig
from agentsdk.transport import HubConnection, bearer, unary


class HubLink:
    """One gRPC channel to the hub (one address or several replicas); ``rpc(credential)`` acts as one identity."""

    def __init__(self, target: str, tls: TlsConfig | None) -> None:
        self.connection = HubConnection(target, tls)

    def rpc(self, credential: str = "") -> HubRpc:
        """The typed hub RPCs as the identity holding ``credential`` ("" = anonymous, for Register)."""
        return HubRpc(self.connection, credential)

    def missing(self, credential: str) -> MissingRpcs:
        """The RPCs HubRpc lacks, as the identity holding ``credential``."""
        return MissingRpcs(self.connection, credential)

    async def close(self) -> None:
        """Close the channel (every stream on it ends)."""
        await self.connection.close()


class MissingRpcs:
    """NOTE for the lead: the HubService RPCs agentsdk.rpc.HubRpc did not have when this gateway was
    written, called on the generated stub. Move each onto HubRpc once the typed layer has it."""

    def __init__(self, connection: HubConnection, credential: str) -> None:
        self._stub = connection.stub
        self._metadata = bearer(credential)

    async def list_channels(self, request: hub_pb2.ListChannelsRequest) -> hub_pb2.ListChannelsResponse:
        """``ListChannels``: the caller's channels."""
        return await unary(self._stub.ListChannels, request, hub_pb2.ListChannelsResponse, metadata=self._metadata)

    async def get_task(self, request: hub_pb2.GetTaskRequest) -> hub_pb2.GetTaskResponse:
        """``GetTask``: one task the caller may see."""
        return await unary(self._stub.GetTask, request, hub_pb2.GetTaskResponse, metadata=self._metadata)

    async def list_tasks(self, request: hub_pb2.ListTasksRequest) -> hub_pb2.ListTasksResponse:
        """``ListTasks``: tasks the caller may see."""
        return await unary(self._stub.ListTasks, request, hub_pb2.ListTasksResponse, metadata=self._metadata)
