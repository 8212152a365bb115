"""The gateway's one gRPC connection to the hub; every call goes through agentsdk's typed layer
(:class:`agentsdk.rpc.HubRpc`), as the identity whose credential it holds."""

from __future__ import annotations

import grpc

from agentsdk.rpc import HubRpc
from agentsdk.tls import TlsConfig
from agentsdk.transport import HubConnection


class HubLink:
    """One gRPC channel to the hub (one address or several replicas); ``rpc(credential)`` acts as one identity.
    ``channel``: an open channel to call the hub through instead of dialling ``target`` (the in-process one
    of ``python -m ag2embedded``)."""

    def __init__(self, target: str, tls: TlsConfig | None, channel: grpc.aio.Channel | None = None) -> None:
        self.connection = HubConnection(target, tls, channel=channel)

    def rpc(self, credential: str = "") -> HubRpc:
        """The typed hub RPCs as the identity holding ``credential`` ("" = anonymous, for Register)."""
        return HubRpc(self.connection, credential)

    async def close(self) -> None:
        """Close the channel (every stream on it ends)."""
        await self.connection.close()
