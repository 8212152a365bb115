"""The gRPC side of the SDK: one channel to a hub, bearer credentials, and the typed
call helpers under :class:`agentsdk.rpc.HubRpc` and :class:`agentsdk.knowledge.rpc.KnowledgeRpc`.

Every helper checks the response's message type and raises the same domain
exception the server raised (:func:`netkernel.errors.error_from_rpc`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from types import TracebackType
from typing import Protocol, Self, TypeVar

import grpc
from agentnet.v1 import hub_pb2_grpc
from google.protobuf.message import Message

from agentsdk.tls import TlsSetting, open_channel
from netkernel.errors import InternalError, error_from_rpc

ResponseT = TypeVar("ResponseT", bound=Message)

Metadata = tuple[tuple[str, str], ...]
"""gRPC call metadata (key, value) pairs."""

#: Options for long-lived agent connections: keepalive so dead peers are noticed.
CHANNEL_OPTIONS = (
    ("grpc.keepalive_time_ms", 20_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.max_receive_message_length", 16 * 1024 * 1024),
    ("grpc.max_send_message_length", 16 * 1024 * 1024),
)


class HubConnection:
    """A gRPC channel to one hub, shared by every identity of a client; ``tls`` as in
    :mod:`agentsdk.tls` (None: plaintext)."""

    def __init__(self, target: str, tls: TlsSetting = None) -> None:
        self.target = target
        self.tls = tls
        """The TLS setting the channel was opened with (None: plaintext)."""
        self.channel = open_channel(target, tls, CHANNEL_OPTIONS)
        self.stub = hub_pb2_grpc.HubServiceStub(self.channel)

    async def close(self) -> None:
        """Close the channel (every stream on it ends)."""
        await self.channel.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


def bearer(credential: str) -> Metadata:
    """Call metadata carrying ``credential``."""
    return (("authorization", f"Bearer {credential}"),)


class UnaryMethod(Protocol):
    """A unary-unary method of a ``grpc.aio`` stub."""

    def __call__(
        self, request: Message, *, metadata: Metadata | None = None, timeout: float | None = None
    ) -> Awaitable[object]:
        """Start the call."""
        ...


class ServerStreamMethod(Protocol):
    """A unary-stream method of a ``grpc.aio`` stub."""

    def __call__(
        self, request: Message, *, metadata: Metadata | None = None, timeout: float | None = None
    ) -> AsyncIterator[object]:
        """Start the call; iterate it for the responses."""
        ...


def checked(response: object, response_type: type[ResponseT]) -> ResponseT:
    """``response`` as ``response_type``; InternalError when the server sent another message type."""
    if not isinstance(response, response_type):
        raise InternalError(f"expected a {response_type.__name__}, got {type(response).__name__}")
    return response


async def unary(
    method: UnaryMethod,
    request: Message,
    response_type: type[ResponseT],
    *,
    metadata: Metadata | None = None,
    timeout: float | None = None,
) -> ResponseT:
    """Run a unary RPC; failures raise the server's domain exception class."""
    try:
        response = await method(request, metadata=metadata, timeout=timeout)
    except grpc.aio.AioRpcError as err:
        raise error_from_rpc(err) from None
    return checked(response, response_type)


async def server_stream(
    method: ServerStreamMethod,
    request: Message,
    response_type: type[ResponseT],
    *,
    metadata: Metadata | None = None,
) -> AsyncIterator[ResponseT]:
    """Run a server-streaming RPC; failures raise the server's domain exception class."""
    try:
        async for item in method(request, metadata=metadata):
            yield checked(item, response_type)
    except grpc.aio.AioRpcError as err:
        raise error_from_rpc(err) from None
