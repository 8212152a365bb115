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
from collections.abc import Iterable, Sequence
from typing import Any

import grpc
from agentnet.v1 import connect_pb2, replica_pb2, replica_pb2_grpc
from grpc_status import rpc_status

from netkernel.errors import PARTITION_MOVED, AgentNetError, PartitionMoved, Unavailable, error_from_rpc
from servicekit.runtime import DEFAULT_MAX_MESSAGE_BYTES

REPLICA_KEY_HEADER = "x-agentnet-replica-key"
"""The metadata that carries the store's replica key on every ReplicaService call."""
REPLICA_UNREACHABLE = "replica_unreachable"
"""The ``cause`` of an UNAVAILABLE when the replica a call was sent to did not answer."""
_TRANSPORT_FAILURES = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED}
)
"""Codes that, without the serving replica's ErrorInfo, mean the call did not get through or back."""


def presented_key(metadata: Iterable[tuple[str, str | bytes]]) -> str:
    """The replica key a call's ``metadata`` presents ("" when none)."""
    for name, value in metadata:
        if name == REPLICA_KEY_HEADER:
            return value if isinstance(value, str) else value.decode("utf-8", "replace")
    return ""


class ReplicaPeers:
    """Calls to the other replicas sharing this replica's store.

    ``replica_key`` is the store's replica key; ``timeout`` bounds each call (a forwarded post
    waits for its commit there); ``credentials`` are the channel credentials to dial replicas
    with (None: plaintext, as the replicas' own port serves); ``server_name`` is the name their
    certificates are checked against ("": the host of each address)."""

    def __init__(
        self,
        replica_key: str,
        *,
        timeout: float,
        credentials: grpc.ChannelCredentials | None = None,
        server_name: str = "",
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
            *([("grpc.ssl_target_name_override", server_name)] if server_name else []),
        ]
        self._stubs: dict[str, tuple[grpc.aio.Channel, replica_pb2_grpc.ReplicaServiceStub]] = {}

    def _peer(self, address: str) -> tuple[grpc.aio.Channel, replica_pb2_grpc.ReplicaServiceStub]:
        """The channel to ``address`` (``host:port``) and its ReplicaService stub, opened on first use."""
        known = self._stubs.get(address)
        if known is None:
            if self._credentials is not None:
                channel = grpc.aio.secure_channel(address, self._credentials, options=self._options)
            else:
                channel = grpc.aio.insecure_channel(address, options=self._options)
            known = self._stubs[address] = (channel, replica_pb2_grpc.ReplicaServiceStub(channel))
        return known

    async def forward(
        self, address: str, sender_id: str, posts: Sequence[connect_pb2.Post]
    ) -> list[connect_pb2.PostResult]:
        """Have the replica at ``address`` admit ``posts`` for ``sender_id``; one result per post, in order.

        Raises what stopped the call itself as :func:`_failure` does."""
        request = replica_pb2.ForwardPostsRequest(sender_id=sender_id, posts=posts)
        try:
            response = await self._peer(address)[1].ForwardPosts(
                request, metadata=self._metadata, timeout=self._timeout, wait_for_ready=False
            )
        except grpc.aio.AioRpcError as err:
            raise _failure(err, address) from err
        return list(response.results)

    async def pending_turns(
        self, address: str, agent_id: str, channel_ids: Sequence[str], timeout: float
    ) -> list[connect_pb2.PendingTurn]:
        """The turns the replica at ``address`` holds of ``channel_ids`` for ``agent_id``, asked within
        ``timeout`` seconds; what stopped the call as :func:`_failure` raises it."""
        request = replica_pb2.PendingTurnsRequest(agent_id=agent_id, channel_ids=channel_ids)
        try:
            response = await self._peer(address)[1].PendingTurns(
                request, metadata=self._metadata, timeout=timeout, wait_for_ready=False
            )
        except grpc.aio.AioRpcError as err:
            raise _failure(err, address) from err
        return list(response.turns)

    async def call_unary(
        self,
        address: str,
        path: str,
        request: Any,
        output: type[Any],
        metadata: Sequence[tuple[str, str | bytes]],
        timeout: float | None,
    ) -> Any:
        """Send the unary call ``path`` (``/agentnet.v1.HubService/Say``) to the replica at ``address``
        with ``metadata`` (the caller's own, plus the replica key: the holder then knows a replica
        authenticated the caller, which matters under identity binding) and ``timeout`` (the caller's
        remaining deadline, None for none: a dead replica is then found by the channel's keepalive);
        its response, or what stopped it as :func:`_failure` raises it."""
        call = self._peer(address)[0].unary_unary(
            path,
            request_serializer=type(request).SerializeToString,
            response_deserializer=output.FromString,
        )
        try:
            return await call(request, metadata=(*metadata, *self._metadata), timeout=timeout)
        except grpc.aio.AioRpcError as err:
            raise _failure(err, address) from err

    async def close(self) -> None:
        """Close every channel (the replica is stopping)."""
        channels = [channel for channel, _ in self._stubs.values()]
        self._stubs.clear()
        await asyncio.gather(*(channel.close() for channel in channels), return_exceptions=True)


def _failure(err: grpc.aio.AioRpcError, address: str) -> AgentNetError:
    """What a failed call to the replica at ``address`` means to the participant: UNAVAILABLE
    ``replica_unreachable`` when the replica did not answer (no agentnet status came back), its
    refusal as the same domain error otherwise — :class:`PartitionMoved` when that replica does not
    hold the channel either (the forwarder then asks the next holder)."""
    if err.code() in _TRANSPORT_FAILURES and rpc_status.from_call(err) is None:
        return Unavailable(
            f"the hub replica at {address} that holds this channel did not answer ({err.code().name}: "
            f"{err.details()}); the call may or may not have taken effect: retry it (a post retried with the "
            "same idempotency key is answered as the duplicate if it was admitted).",
            metadata={"cause": REPLICA_UNREACHABLE, "replica": address},
        )
    refusal = error_from_rpc(err)
    if refusal.metadata.get("cause") == PARTITION_MOVED:
        return PartitionMoved(refusal.message, metadata=refusal.metadata)
    return refusal
