"""The typed client layer of the hub: :class:`HubRpc` (every ``agentnet.v1.HubService`` RPC) and
:class:`OperatorRpc` (every ``agentnet.v1.OperatorService`` RPC), one typed method each, named after
the RPC in snake case. The plain methods are generated from the protos by ``make proto``
(:mod:`agentsdk._generated_rpc`); this module writes by hand only what is special: the ``Connect``
stream, the registration keys, the envelope idempotency key and the posting calls' backoff
(:class:`agentsdk.knowledge.rpc.KnowledgeRpc` is the knowledge service's).

Every method takes the RPC's request message and returns its response message (a streaming RPC
returns its stream), so mypy checks both; a failure raises the hub's domain exception
(:mod:`netkernel.errors`). A ``HubRpc`` acts as one identity: it sends the credential it was built
with (none for ``Register`` / ``RegisterHuman``; the operator token for the operator's calls). A unary
method takes ``timeout`` seconds (None: no deadline). The calls that post (``PostEnvelope``,
``OpenChannel``, ``CallTool``, ``InvokeAgent``, ``Delegate``, ``Say``) back off and retry on
RATE_LIMITED as the connection's ``rate_limit_backoff`` says (:mod:`agentsdk.backoff`).
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial

import grpc
from agentnet.v1 import connect_pb2, hub_pb2, operator_pb2_grpc

from agentsdk._generated_rpc import HubServiceMethods, OperatorServiceMethods
from agentsdk.backoff import RateLimitBackoff, retry_rate_limited
from agentsdk.transport import HubConnection, ResponseT, StreamCall, bearer, checked
from netkernel.errors import error_from_rpc

__all__ = ["ConnectStream", "HubRpc", "OperatorRpc", "StreamCall"]


class ConnectStream:
    """A running ``Connect`` call: iterate it for the hub's frames; :meth:`cancel` ends it."""

    def __init__(self, call: StreamCall) -> None:
        self._call = call

    async def __aiter__(self) -> AsyncIterator[connect_pb2.ConnectResponse]:
        """The hub's frames in order; a failed stream raises the hub's domain exception."""
        try:
            async for frame in self._call:
                yield checked(frame, connect_pb2.ConnectResponse)
        except grpc.aio.AioRpcError as err:
            raise error_from_rpc(err) from None

    def cancel(self) -> None:
        """End the call (a no-op once it ended)."""
        self._call.cancel()


class HubRpc(HubServiceMethods):
    """Every HubService RPC as one identity (``credential`` "" = anonymous, for registration; the
    operator token for the operator's calls: ``SetRule`` / ``GetRule`` of any identity, ``ListAudit``).
    The plain RPCs' methods come from :class:`agentsdk._generated_rpc.HubServiceMethods`."""

    def __init__(
        self, connection: HubConnection, credential: str = "", *, backoff: RateLimitBackoff | None = None
    ) -> None:
        self.connection = connection
        self.credential = credential
        self._stub = connection.stub
        self._metadata = bearer(credential) if credential else None
        self._backoff = backoff
        """Overrides the connection's ``rate_limit_backoff`` (the Connect stream's fallback retries itself)."""

    def as_identity(self, credential: str) -> HubRpc:
        """The same connection acting as the identity holding ``credential``."""
        return HubRpc(self.connection, credential)

    async def _posting(self, attempt: Callable[[], Awaitable[ResponseT]]) -> ResponseT:
        """A call that posts an envelope: retried on RATE_LIMITED (a refusal that changed nothing)."""
        policy = self._backoff or self.connection.rate_limit_backoff
        return await retry_rate_limited(attempt, policy)

    # -- live session ---------------------------------------------------------------------

    def connect(self, requests: AsyncIterator[connect_pb2.ConnectRequest]) -> ConnectStream:
        """``Connect``: open the live stream with the client's frames (the credential travels in their ``Hello``)."""
        return ConnectStream(self._stub.Connect(requests))

    # -- registration keys ---------------------------------------------------------------

    async def register(
        self, request: hub_pb2.RegisterRequest, *, timeout: float | None = None
    ) -> hub_pb2.RegisterResponse:
        """``Register``: create an agent identity and issue its credential. A request without an
        idempotency key gets a fresh random one here (kept on ``request``), so gRPC's retry after a lost
        answer (:data:`agentsdk.transport.RETRY_SERVICE_CONFIG`) returns the identity the first attempt
        created instead of ALREADY_EXISTS."""
        _key_registration(request)
        return await super().register(request, timeout=timeout)

    async def register_human(
        self, request: hub_pb2.RegisterHumanRequest, *, timeout: float | None = None
    ) -> hub_pb2.RegisterHumanResponse:
        """``RegisterHuman``: create a non-LLM participant and issue its credential (keyed as
        :meth:`register`)."""
        _key_registration(request)
        return await super().register_human(request, timeout=timeout)

    # -- the calls that post: retried on RATE_LIMITED ------------------------------------

    async def post_envelope(
        self, request: hub_pb2.PostEnvelopeRequest, *, timeout: float | None = None
    ) -> hub_pb2.PostEnvelopeResponse:
        """``PostEnvelope``: admit one envelope. An envelope without an idempotency key gets one here,
        so gRPC's retry after a lost answer (:data:`agentsdk.transport.RETRY_SERVICE_CONFIG`) never
        admits it twice."""
        if not request.envelope.HasField("idempotency_key"):
            request.envelope.idempotency_key = uuid.uuid4().hex
        return await self._posting(partial(super().post_envelope, request, timeout=timeout))

    async def open_channel(
        self, request: hub_pb2.OpenChannelRequest, *, timeout: float | None = None
    ) -> hub_pb2.OpenChannelResponse:
        """``OpenChannel``: create a channel and invite its targets (posts: retried on RATE_LIMITED)."""
        return await self._posting(partial(super().open_channel, request, timeout=timeout))

    async def call_tool(
        self, request: hub_pb2.CallToolRequest, *, timeout: float | None = None
    ) -> hub_pb2.CallToolResponse:
        """``CallTool``: run one network tool with JSON arguments (posts: retried on RATE_LIMITED)."""
        return await self._posting(partial(super().call_tool, request, timeout=timeout))

    async def delegate(
        self, request: hub_pb2.DelegateRequest, *, timeout: float | None = None
    ) -> hub_pb2.DelegateResponse:
        """``Delegate``: open a consulting channel to an agent and wait for its reply (posts: retried on
        RATE_LIMITED)."""
        return await self._posting(partial(super().delegate, request, timeout=timeout))

    async def say(self, request: hub_pb2.SayRequest, *, timeout: float | None = None) -> hub_pb2.SayResponse:
        """``Say``: post a text message into a channel (posts: retried on RATE_LIMITED)."""
        return await self._posting(partial(super().say, request, timeout=timeout))

    async def invoke_agent(
        self, request: hub_pb2.InvokeAgentRequest, *, timeout: float | None = None
    ) -> hub_pb2.InvokeAgentResponse:
        """``InvokeAgent``: call another agent and wait for its answer (posts: retried on RATE_LIMITED)."""
        return await self._posting(partial(super().invoke_agent, request, timeout=timeout))


class OperatorRpc(OperatorServiceMethods):
    """The ``agentnet.v1.OperatorService`` RPCs (served on the hub's port), one typed method each, as the
    holder of the operator ``token``: each takes the request message and returns the response message;
    a failure raises the hub's domain exception (``PermissionDenied`` for an agent credential). Every
    method comes from :class:`agentsdk._generated_rpc.OperatorServiceMethods`."""

    def __init__(self, connection: HubConnection, token: str) -> None:
        self.connection = connection
        self._stub = operator_pb2_grpc.OperatorServiceStub(connection.channel)
        self._metadata = bearer(token)


def _key_registration(request: hub_pb2.RegisterRequest | hub_pb2.RegisterHumanRequest) -> None:
    """Give a registration without an idempotency key one: 32 random hex characters (the hub
    derives the credential from the key, so it must be unguessable; the hub's minimum is 16)."""
    if not request.idempotency_key:
        request.idempotency_key = secrets.token_hex(16)
