"""The gRPC side of the SDK: one channel to a hub, per-identity credentials, and
calls that raise the same domain exception the hub raised."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, TypeVar

import grpc
from agentnet.v1 import hub_pb2_grpc

from netkernel.errors import error_from_rpc

T = TypeVar("T")

#: Options for long-lived agent connections: keepalive so dead peers are noticed.
CHANNEL_OPTIONS = (
    ("grpc.keepalive_time_ms", 20_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.max_receive_message_length", 16 * 1024 * 1024),
    ("grpc.max_send_message_length", 16 * 1024 * 1024),
)


class HubConnection:
    """A gRPC channel to one hub, shared by every identity of a client."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.channel = grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS)
        self.stub = hub_pb2_grpc.HubServiceStub(self.channel)

    async def close(self) -> None:
        """Close the channel (every stream on it ends)."""
        await self.channel.close()


def bearer(credential: str) -> tuple[tuple[str, str], ...]:
    """Call metadata carrying ``credential``."""
    return (("authorization", f"Bearer {credential}"),)


async def call(method: Any, request: Any, *, credential: str = "", timeout: float | None = None) -> Any:
    """Run a unary RPC; failures raise the hub's domain exception class."""
    try:
        return await method(request, metadata=bearer(credential) if credential else None, timeout=timeout)
    except grpc.aio.AioRpcError as err:
        raise error_from_rpc(err) from None


async def stream(method: Any, request: Any, *, credential: str = "") -> AsyncIterator[Any]:
    """Run a server-streaming RPC; failures raise the hub's domain exception class."""
    try:
        async for item in method(request, metadata=bearer(credential) if credential else None):
            yield item
    except grpc.aio.AioRpcError as err:
        raise error_from_rpc(err) from None
