"""The other replicas, as this replica calls them: posts forwarded to the replica that holds a
channel (proto/agentnet/v1/replica.proto, docs/scale-out.md "Forwarding between replicas").

One gRPC channel per replica address, opened on first use and kept (a forwarded post must not
pay a connection set-up), each call carrying the store's replica key. What the serving replica
refused comes back as its PostResults; what stopped the call itself comes back as the exception
a participant would get from one hub: the serving replica's own refusal of the call (rebuilt as
the same class), or UNAVAILABLE with ``cause: replica_unreachable`` when the replica did not
answer in time, so the participant retries (with its idempotency key: a post that was in fact
admitted is then answered as the duplicate).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import grpc
from agentnet.v1 import connect_pb2, replica_pb2, replica_pb2_grpc

from netkernel.errors import ERROR_DOMAIN, PARTITION_MOVED, PartitionMoved, Unavailable, error_from_rpc
from servicekit.runtime import DEFAULT_MAX_MESSAGE_BYTES

REPLICA_KEY_HEADER = "x-agentnet-replica-key"
"""The metadata that carries the store's replica key on every ReplicaService call."""
_TRANSPORT_FAILURES = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED}
)
"""Codes that, without the serving replica's ErrorInfo, mean the call did not get through or back."""


class ReplicaPeers:
    """Calls to the other replicas sharing this replica's store.

    ``replica_key`` is the store's replica key; ``timeout`` bounds each call (a forwarded post
    waits for its commit there); ``credentials`` are the channel credentials to dial replicas
    with (None: plaintext, as the replicas' own port serves)."""

    def __init__(
        self,
        replica_key: str,
        *,
        timeout: float,
        credentials: grpc.ChannelCredentials | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        if not replica_key:
            raise ValueError("calls to other replicas need the store's replica key")
        self._metadata = ((REPLICA_KEY_HEADER, replica_key),)
        self._timeout = timeout
        self._credentials = credentials
        self._options = [
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", max_message_bytes),
            ("grpc.keepalive_time_ms", 20_000),
            ("grpc.keepalive_timeout_ms", 10_000),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.max_reconnect_backoff_ms", 2_000),
        ]
        self._stubs: dict[str, tuple[grpc.aio.Channel, replica_pb2_grpc.ReplicaServiceStub]] = {}

    def _stub(self, address: str) -> replica_pb2_grpc.ReplicaServiceStub:
        """The stub for ``address`` (``host:port``), its channel opened on first use."""
        known = self._stubs.get(address)
        if known is None:
            if self._credentials is not None:
                channel = grpc.aio.secure_channel(address, self._credentials, options=self._options)
            else:
                channel = grpc.aio.insecure_channel(address, options=self._options)
            known = self._stubs[address] = (channel, replica_pb2_grpc.ReplicaServiceStub(channel))
        return known[1]

    async def forward(
        self, address: str, sender_id: str, posts: Sequence[connect_pb2.Post]
    ) -> list[connect_pb2.PostResult]:
        """Have the replica at ``address`` admit ``posts`` for ``sender_id``; one result per post, in order.

        Raises the serving replica's refusal of the whole call as its domain exception, or
        :class:`Unavailable` (``cause: replica_unreachable``) when it did not answer in time."""
        request = replica_pb2.ForwardPostsRequest(sender_id=sender_id, posts=posts)
        try:
            response = await self._stub(address).ForwardPosts(
                request, metadata=self._metadata, timeout=self._timeout, wait_for_ready=False
            )
        except grpc.aio.AioRpcError as err:
            if err.code() in _TRANSPORT_FAILURES and not _carries_error_info(err):
                raise Unavailable(
                    f"the hub replica at {address} that holds this channel did not answer ({err.code().name}: "
                    f"{err.details()}); the post may or may not have been admitted: retry it with the same "
                    "idempotency key (a post that was admitted is then answered as the duplicate).",
                    metadata={"cause": "replica_unreachable", "replica": address},
                ) from err
            raise error_from_rpc(err) from err
        return list(response.results)

    async def call_hub(
        self, address: str, method: str, request: Any, output: type[Any], metadata: Sequence[tuple[str, str | bytes]]
    ) -> Any:
        """Send the unary ``HubService`` call ``method`` to the replica at ``address`` with ``metadata``
        (the caller's own); its response, or its refusal as the domain error (PartitionMoved when that
        replica does not hold the channel either; UNAVAILABLE ``replica_unreachable`` when it did not answer)."""
        self._stub(address)
        channel = self._stubs[address][0]
        call = channel.unary_unary(
            f"/agentnet.v1.HubService/{method}",
            request_serializer=type(request).SerializeToString,
            response_deserializer=output.FromString,
        )
        try:
            return await call(request, metadata=tuple(metadata), timeout=self._timeout)
        except grpc.aio.AioRpcError as err:
            if err.code() in _TRANSPORT_FAILURES and not _carries_error_info(err):
                raise Unavailable(
                    f"the hub replica at {address} that holds this channel did not answer ({err.code().name}: "
                    f"{err.details()}); retry (a post with the same idempotency key is answered once).",
                    metadata={"cause": "replica_unreachable", "replica": address},
                ) from err
            refusal = error_from_rpc(err)
            if refusal.metadata.get("cause") == PARTITION_MOVED:
                raise PartitionMoved(refusal.message, metadata=refusal.metadata) from err
            raise refusal from err

    async def close(self) -> None:
        """Close every channel (the replica is stopping)."""
        channels = [channel for channel, _ in self._stubs.values()]
        self._stubs.clear()
        await asyncio.gather(*(channel.close() for channel in channels), return_exceptions=True)


def _carries_error_info(err: grpc.aio.AioRpcError) -> bool:
    """Whether the status came from a replica's error boundary (it has agentnet's ErrorInfo)."""
    return any(
        key == "grpc-status-details-bin" and ERROR_DOMAIN.encode() in value
        for key, value in (err.trailing_metadata() or ())
        if isinstance(value, bytes)
    )
