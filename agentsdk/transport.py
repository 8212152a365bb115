"""The gRPC side of the SDK: one channel to a hub, bearer credentials, and the
call helpers under the typed layer (:class:`agentsdk.rpc.HubRpc`, :class:`agentsdk.rpc.OperatorRpc`,
:class:`agentsdk.knowledge.rpc.KnowledgeRpc`).

Every helper checks the response's message type and raises the same domain
exception the server raised (:func:`netkernel.errors.error_from_rpc`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable
from types import TracebackType
from typing import Any, Protocol, Self, TypeVar

import grpc
from agentnet.v1 import hub_pb2_grpc
from google.protobuf.message import Message
from opentelemetry import trace

from agentsdk.backoff import RateLimitBackoff
from agentsdk.targets import HubTargets, hub_target
from agentsdk.tls import TlsSetting, open_channel, tls_config
from netkernel.errors import InternalError, InvalidArgument, error_from_rpc

ResponseT = TypeVar("ResponseT", bound=Message)

Metadata = tuple[tuple[str, str], ...]
"""gRPC call metadata (key, value) pairs."""

_RETRY_ON_UNAVAILABLE = {
    "maxAttempts": 5,
    "initialBackoff": "0.1s",
    "maxBackoff": "2s",
    "backoffMultiplier": 2,
    "retryableStatusCodes": ["UNAVAILABLE"],
}


def _service_config(wait_for_ready: bool) -> dict[str, Any]:
    """The SDK's gRPC service config (:data:`RETRY_SERVICE_CONFIG` says what it retries);
    ``wait_for_ready``: a post waits for its hub to be reachable."""
    return {
        "methodConfig": [
            {
                "name": [{"service": "agentnet.v1.HubService", "method": "PostEnvelope"}],
                "waitForReady": wait_for_ready,
                "timeout": "30s",
                "retryPolicy": _RETRY_ON_UNAVAILABLE,
            },
            {
                "name": [{"service": "agentnet.v1.HubService", "method": m} for m in ("Register", "RegisterHuman")],
                "retryPolicy": _RETRY_ON_UNAVAILABLE,
            },
        ]
    }


RETRY_SERVICE_CONFIG = _service_config(wait_for_ready=True)
"""gRPC's own retry of the calls the SDK sends with an idempotency key, so sending one again is safe:
``PostEnvelope`` (a retried post is admitted once) and ``Register`` / ``RegisterHuman`` (a retried
registration returns the identity and credential the first attempt created). A call whose hub died,
or whose connection broke, before answering is sent again on whichever of the targets answers
(docs/scale-out.md "Client failover"). A post also waits (at most 30 s unless the call's deadline is
shorter) for a hub to be reachable; a registration does not, so a client that reaches no hub at all
(wrong address, plaintext to a TLS hub) learns it within a few attempts (``UNAVAILABLE``)."""

PEER_SERVICE_CONFIG = _service_config(wait_for_ready=False)
"""The service config of a connection to one replica a Redirect named (:meth:`HubConnection.peer`): the
same retries, but a post does not wait for that replica to be reachable. Its caller goes back to the
addresses it was given instead (:class:`agentsdk.network._unary_post.UnaryPoster`): waiting there, a
post sent just as the replica died would wait its whole deadline for a replica that is not coming back."""

#: Options for long-lived agent connections: keepalive so dead peers are noticed; reconnect
#: attempts at most 2 s apart, so a standby hub that comes up is found within about 2 s;
#: the retry of idempotent calls above.
_COMMON_OPTIONS = (
    ("grpc.keepalive_time_ms", 20_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.max_receive_message_length", 16 * 1024 * 1024),
    ("grpc.max_send_message_length", 16 * 1024 * 1024),
    ("grpc.max_reconnect_backoff_ms", 2_000),
    ("grpc.enable_retries", 1),
)
CHANNEL_OPTIONS = (*_COMMON_OPTIONS, ("grpc.service_config", json.dumps(RETRY_SERVICE_CONFIG)))
"""The options of a connection to the hub addresses given."""
PEER_CHANNEL_OPTIONS = (*_COMMON_OPTIONS, ("grpc.service_config", json.dumps(PEER_SERVICE_CONFIG)))
"""The options of a connection to one replica a Redirect named (:data:`PEER_SERVICE_CONFIG`)."""


DEFAULT_MAX_QUEUED_DELIVERY_BYTES = 64 * 1024 * 1024
"""Default of ``HubConnection(max_queued_delivery_bytes=...)``: 64 MiB of deliveries waiting per stream."""


class ClosedOnExit:
    """``async with x:`` gives ``x`` itself and closes it (:meth:`close`) on the way out."""

    async def close(self) -> None:
        """Release what the object holds."""
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """:meth:`close`."""
        await self.close()


class HubConnection(ClosedOnExit):
    """A gRPC channel to a hub, shared by every identity of a client; ``target`` one address or
    several replicas to fail over between (:mod:`agentsdk.targets`); ``tls`` as in
    :mod:`agentsdk.tls` (None: plaintext); ``tracer_provider`` records the SDK's spans (None: the
    global OpenTelemetry provider, which records nothing until the application configures one).
    ``channel`` is an open channel to the hub at ``target`` to call through instead of dialling it
    (a hub in this process: :class:`servicekit.inprocess.InProcessChannel`); Redirects to other
    replicas still dial them."""

    def __init__(
        self,
        target: HubTargets,
        tls: TlsSetting = None,
        *,
        rate_limit_backoff: RateLimitBackoff | None = None,
        tracer_provider: trace.TracerProvider | None = None,
        max_queued_delivery_bytes: int = DEFAULT_MAX_QUEUED_DELIVERY_BYTES,
        follow_redirects: bool = True,
        channel: grpc.aio.Channel | None = None,
    ) -> None:
        if max_queued_delivery_bytes < 1:
            raise InvalidArgument(
                f"max_queued_delivery_bytes is {max_queued_delivery_bytes}; give a positive number of bytes "
                f"(default {DEFAULT_MAX_QUEUED_DELIVERY_BYTES})."
            )
        parsed = hub_target(target)
        config = tls_config(tls)
        if parsed.several and config is not None and not config.server_name:
            raise InvalidArgument(
                f"TLS with several hub addresses {list(parsed.addresses)!r} needs TlsConfig(server_name=...): "
                "the one name every replica's certificate carries (gRPC has no single host to verify otherwise)"
            )
        self.target = parsed.grpc_target
        """The gRPC target (``ipv4:a:p,b:q`` when several addresses were given)."""
        self.addresses = parsed.addresses
        """The hub addresses as given."""
        self.tls = tls
        """The TLS setting the channel was opened with (None: plaintext)."""
        self.rate_limit_backoff = rate_limit_backoff or RateLimitBackoff()
        """How calls that post retry on RATE_LIMITED (:mod:`agentsdk.backoff`)."""
        self.max_queued_delivery_bytes = max_queued_delivery_bytes
        """Most bytes of deliveries each identity's Connect stream holds waiting for its handlers; beyond
        it the stream stops reading until they catch up (:class:`agentsdk.network._delivery.DeliveryStream`)."""
        self.follow_redirects = follow_redirects
        """Whether Connect streams move to the replica a hub's Redirect names (docs/scale-out.md
        "Session steering"); False: every stream stays on ``target``."""
        self._peers: dict[str, HubConnection] = {}
        """Connections to the replicas Redirects named, by address (see :meth:`peer`)."""
        self.tracer = trace.get_tracer("agentsdk", tracer_provider=tracer_provider)
        """Where the SDK's spans go: each post and each handler turn (docs/operations.md "Tracing")."""
        self._tracer_provider = tracer_provider
        self._global_tracing = False
        if channel is None:
            channel = open_channel(self.target, tls, CHANNEL_OPTIONS, client_span_interceptors(tracer_provider))
        self.channel = channel
        self.stub = hub_pb2_grpc.HubServiceStub(self.channel)

    @property
    def tracing(self) -> bool:
        """Whether :attr:`tracer` may record spans: a provider was given (other than OpenTelemetry's
        no-op one), or none was and a global provider is set now. When False every span the SDK
        would start is a no-op, so the post and handler paths skip making them (they still pass on
        the trace context an envelope carries, exactly as the no-op spans would)."""
        provider = self._tracer_provider
        if provider is not None:
            return not isinstance(provider, trace.NoOpTracerProvider)
        if not self._global_tracing:
            self._global_tracing = global_tracer_provider_set()  # once set, it stays (set once)
        return self._global_tracing

    def peer(self, address: str) -> HubConnection:
        """A connection to the hub replica at ``address`` (one a Redirect named), with this one's TLS
        setting, backoff and tracing; made once per address and closed with this connection. A post
        sent there does not wait for the replica to be reachable (:data:`PEER_SERVICE_CONFIG`)."""
        peer = self._peers.get(address)
        if peer is None:
            peer = self._peers[address] = HubConnection(
                address,
                self.tls,
                rate_limit_backoff=self.rate_limit_backoff,
                tracer_provider=self._tracer_provider,
                max_queued_delivery_bytes=self.max_queued_delivery_bytes,
                follow_redirects=self.follow_redirects,
                channel=open_channel(
                    hub_target(address).grpc_target,
                    self.tls,
                    PEER_CHANNEL_OPTIONS,
                    client_span_interceptors(self._tracer_provider),
                ),
            )
        return peer

    async def close(self) -> None:
        """Close the channel and those to the replicas Redirects named (every stream on them ends)."""
        peers, self._peers = list(self._peers.values()), {}
        for peer in peers:
            await peer.close()
        await self.channel.close()


_UNKNOWN = object()


def global_tracer_provider_set() -> bool:
    """Whether OpenTelemetry's global tracer provider is set (a proxy tracer then records through it).

    ``trace.get_tracer_provider()`` answers it too but reads the environment on every call while
    none is set (several microseconds, on every post); the provider it stands for is kept in
    ``opentelemetry.trace._TRACER_PROVIDER``, read directly when this OpenTelemetry has it."""
    provider = getattr(trace, "_TRACER_PROVIDER", _UNKNOWN)
    if provider is _UNKNOWN:  # another layout of the API package: ask the public way
        return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    return provider is not None


def client_span_interceptors(provider: trace.TracerProvider | None) -> list[grpc.aio.ClientInterceptor]:
    """A client span per unary RPC (OpenTelemetry's gRPC instrumentation: the call carries its
    ``traceparent``, so the service's RPC span is its child). Only when tracing is configured: a
    ``provider`` given, or a global one set before the connection opens (otherwise every call would pay
    for a span nobody records). Streams (``Connect``, ``ReadWal``) get none: a post in a stream
    carries its context in the envelope."""
    if provider is None and isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return []
    from opentelemetry.instrumentation.grpc import aio_client_interceptors

    every = aio_client_interceptors(tracer_provider=provider)  # type: ignore[no-untyped-call]
    return [i for i in every if isinstance(i, grpc.aio.UnaryUnaryClientInterceptor)]


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


class StreamCall(Protocol):
    """What the SDK uses of a running ``grpc.aio`` server-streaming call."""

    def __aiter__(self) -> AsyncIterator[object]:
        """The responses in order."""
        ...

    def cancel(self) -> bool:
        """End the call."""
        ...


class ServerStreamMethod(Protocol):
    """A unary-stream method of a ``grpc.aio`` stub."""

    def __call__(
        self, request: Message, *, metadata: Metadata | None = None, timeout: float | None = None
    ) -> StreamCall:
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
    """Run a server-streaming RPC; failures raise the server's domain exception class. The call is
    cancelled when the caller stops early (closes the iterator, e.g. leaves its ``async for``)."""
    call = method(request, metadata=metadata)
    try:
        async for item in call:
            yield checked(item, response_type)
    except grpc.aio.AioRpcError as err:
        raise error_from_rpc(err) from None
    finally:
        call.cancel()
