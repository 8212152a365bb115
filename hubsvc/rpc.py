"""The request seam of every HubService RPC: who is calling, and how its errors leave.

Each RPC method of :class:`~hubsvc.servicer.HubServicer` declares its auth mode
(:data:`REGISTER`, :data:`AGENT`, :data:`OPERATOR` or :data:`AGENT_OR_OPERATOR`) with
:func:`unary_rpc` / :func:`stream_rpc`; the decorator authenticates the call once
(an agent is marked as seen), hands the caller to the handler, and runs it under
the error boundary of :mod:`servicekit.boundary`. Before the handler runs, the request is
checked against the hub's field limits (:mod:`hubsvc.field_limits`). ``Connect`` authenticates its
Hello frame with :meth:`Authenticator.hello` under the same boundary; errors that
travel inside its stream (a refused post) are built by :func:`~servicekit.boundary.error_detail` from
the same exception classes.

Under identity binding (``--tls-bind-identity``, mTLS) the same authentication also checks
the connection's verified client certificate (:func:`servicekit.tls.certificate_agent`): an
agent credential is accepted only from the agent the certificate names, and ``Register`` /
``RegisterHuman`` (auth mode :data:`REGISTER`) only register that name — one check,
:meth:`Authenticator.check_certificate`, for unary RPCs, streams and the Connect Hello.
"""

from __future__ import annotations

import functools
import hmac
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeAlias, TypeVar, cast

import grpc
from agentnet.v1 import connect_pb2
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import Message

from hubsvc.core.hub import HubCore
from hubsvc.core.util import hash_secret
from hubsvc.field_limits import RefusalAudit
from hubsvc.forwarding import FORWARDED_HEADER, Forwarder
from hubsvc.replica_peers import presented_key
from netkernel.errors import PartitionMoved, PermissionDenied, ProtocolError, Unauthenticated
from servicekit.auth import bearer_token
from servicekit.boundary import stream_boundary, unary_boundary
from servicekit.limits import RequestLimits
from servicekit.tls import AGENT_URI_PREFIX, certificate_agent

C = TypeVar("C")
Req = TypeVar("Req")
Resp = TypeVar("Resp")
Metadata = Iterable[tuple[str, str | bytes]]
Ctx: TypeAlias = grpc.aio.ServicerContext[Any, Any]
PeerAuth = Mapping[str, Sequence[bytes]]
"""A connection's auth context (``ServicerContext.auth_context()``): the verified client certificate's names."""


@dataclass(frozen=True)
class Auth(Generic[C]):
    """An RPC's auth mode; ``C`` is what its handler receives as the caller."""

    name: str


REGISTER: Auth[bool] = Auth("register")
"""Register, RegisterHuman: no credential needed. The handler gets whether the call carried the
operator token, which the policy's ``registration`` rules require when registration is closed
(docs/governance.md). Without it, under identity binding, the request's ``passport.name`` must be
the agent the client certificate names."""
AGENT: Auth[str] = Auth("agent")
"""An agent's credential; the handler gets the agent id."""
OPERATOR: Auth[None] = Auth("operator")
"""The operator token; the handler gets None (an agent credential is PERMISSION_DENIED)."""
AGENT_OR_OPERATOR: Auth[str | None] = Auth("agent-or-operator")
"""Either; the handler gets the agent id, or None for the operator."""


class Authenticator:
    """Turns a call's bearer credential into its caller.

    ``operator_token`` is the secret operator calls must present as their bearer
    credential; "" disables them. With ``bind_identity`` an agent is only accepted on a
    connection whose verified client certificate names it (the server must require client
    certificates: ``--tls-client-ca``)."""

    def __init__(self, core: HubCore, operator_token: str = "", *, bind_identity: bool = False) -> None:
        self._core = core
        self._operator_digest = hash_secret(operator_token) if operator_token else ""
        self.bind_identity = bind_identity
        self._replica_digest = ""
        """The digest of the store's replica key when replicas share the store (:meth:`trust_replicas`)."""

    async def caller(self, auth: Auth[C], context: Ctx, request: object = None) -> C:
        """The caller of a call on ``context`` under ``auth`` (Unauthenticated / PermissionDenied otherwise);
        ``request`` is read for the name a :data:`REGISTER` call registers."""
        credential = bearer_token(context.invocation_metadata() or ()) or ""
        if auth is REGISTER:
            if self._is_operator(credential):
                return cast(C, True)
            passport = getattr(request, "passport", None)
            self.check_certificate(getattr(passport, "name", ""), context, registering=True)
            return cast(C, False)
        if auth is not AGENT and self._is_operator(credential):
            return cast(C, None)
        agent_id = await self.agent(credential, context)  # Unauthenticated for a missing or unknown credential
        if auth is OPERATOR:
            raise PermissionDenied(
                "this call is for the hub's operator: send the operator token as 'authorization: Bearer <token>' "
                "(python -m hubsvc keeps it in <data-dir>/hub-operator.token), not an agent credential."
            )
        return cast(C, agent_id)

    async def agent(self, credential: str, context: Ctx) -> str:
        """The agent a credential presented on ``context`` belongs to, marked as seen now. An identity this
        replica has not learnt of yet (registered through another replica a moment ago) is loaded from the
        store first (:meth:`Registry.learn_owner <hubsvc.core.registry.Registry.learn_owner>`)."""
        if not credential:
            raise Unauthenticated(
                "this call needs your credential: send 'authorization: Bearer <credential>' metadata "
                "(the credential is returned by Register)."
            )
        await self._core.registry.learn_owner(credential)
        if not self.bind_identity or self.from_replica(context):
            return self._core.authenticate(credential)
        agent_id = self._core.registry.authenticate(credential)
        self.check_certificate(self._core.registry.name_for(agent_id), context, agent_id=agent_id)
        return self._core.authenticate(credential)  # marked as seen only once the certificate matched

    def trust_replicas(self, replica_key: str) -> None:
        """Accept calls that present ``replica_key``, the store's replica key, as coming from another
        replica sharing the store (:meth:`from_replica`)."""
        if not replica_key:
            raise ValueError("calls from other replicas are known by the store's replica key")
        self._replica_digest = hash_secret(replica_key)

    def from_replica(self, context: Ctx) -> bool:
        """Whether the call came from another replica sharing the store: it presents the store's replica
        key (ReplicaService calls, and calls forwarded to this replica as their holder; under identity
        binding the forwarding replica checked the caller's certificate, and the connection here carries
        that replica's certificate, not the caller's)."""
        key = presented_key(context.invocation_metadata() or ())
        return bool(self._replica_digest and key) and hmac.compare_digest(hash_secret(key), self._replica_digest)

    def check_certificate(self, name: str, context: Ctx, *, agent_id: str = "", registering: bool = False) -> None:
        """Under identity binding, refuse unless the connection's verified client certificate names
        agent ``name`` (``agent_id`` when it is registered): Unauthenticated without a certificate
        naming an agent, PermissionDenied when it names another; each refusal is audited as
        ``identity_refused``. Nothing to check without binding."""
        if not self.bind_identity:
            return
        named = certificate_agent(cast(PeerAuth, context.auth_context() or {}))
        if named != name:
            check = "register" if registering else "credential"
            detail = {"agent": name, "certificate_agent": named or "", "check": check, "peer": context.peer()}
            self._core.audit("identity_refused", agent_id, named or "", detail)
        if named is None:
            raise Unauthenticated(
                "this hub binds agent identities to client certificates: connect with a client certificate "
                f"that names your agent (subject alternative name URI '{AGENT_URI_PREFIX}<name>', or subject "
                "CN '<name>'), issued by the CA the hub trusts."
            )
        if named != name:
            what = f"register {name!r}" if registering else f"use the credential of {name!r}"
            raise PermissionDenied(
                f"your client certificate names agent {named!r}, so this connection may not {what}: "
                f"connect with the certificate issued for {name!r}"
                + (f", or register {named!r}." if registering else "."),
                metadata={"certificate_agent": named, "agent": name},
            )

    async def hello(
        self, frames: AsyncIterator[connect_pb2.ConnectRequest], context: Ctx
    ) -> tuple[str, connect_pb2.Hello] | None:
        """Read Connect's first frame, which must be Hello; returns (agent id, hello), or None for an empty stream.

        Hello.credential authenticates the stream (the bearer metadata when it is empty)."""
        try:
            first = await anext(aiter(frames))
        except StopAsyncIteration:
            return None
        if first.WhichOneof("frame") != "hello":
            raise ProtocolError("the first Connect frame must be Hello{credential, cursors}.")
        credential = first.hello.credential or bearer_token(context.invocation_metadata() or ()) or ""
        if not credential:
            raise Unauthenticated("Hello.credential is empty; send the credential returned by Register.")
        return await self.agent(credential, context), first.hello

    def _is_operator(self, credential: str) -> bool:
        digest = self._operator_digest
        return bool(digest) and hmac.compare_digest(hash_secret(credential), digest)


class Authenticated(Protocol):
    """A servicer whose RPCs authenticate through an :class:`Authenticator` and check their
    requests against :class:`~servicekit.limits.RequestLimits`."""

    auth: Authenticator
    limits: RequestLimits
    audit_refusal: RefusalAudit
    """Audits a request the field limits refused."""
    forwarder: Forwarder | None
    """Sends a call about a channel another replica holds to that replica (None: every channel is here)."""
    SERVICE: ServiceDescriptor
    """The gRPC service the servicer serves (what a forwarded call is sent as)."""


def check_limits(servicer: Authenticated, caller: object, rpc: str, request: Message) -> None:
    """Refuse ``request`` when a field is over its limit, auditing the refusal."""
    refusal = servicer.limits.refusal(request)
    if refusal is not None:
        servicer.audit_refusal(caller, rpc, request, refusal)
        try:
            raise refusal
        finally:
            # The raised error's traceback holds this frame: without this, the frame would hold the
            # error in turn, a cycle keeping the refused request alive until the cyclic GC runs.
            refusal = None


S = TypeVar("S", bound=Authenticated)


def unary_rpc(
    auth: Auth[C],
) -> Callable[[Callable[[S, C, Req], Awaitable[Resp]]], Callable[[S, Req, Ctx], Awaitable[Resp]]]:
    """Declare a unary RPC's auth mode: the handler ``(self, caller, request)`` runs authenticated, with
    the request within the field limits, in the boundary."""

    def decorate(handler: Callable[[S, C, Req], Awaitable[Resp]]) -> Callable[[S, Req, Ctx], Awaitable[Resp]]:
        @functools.wraps(handler)
        async def method(self: S, request: Req, context: Ctx) -> Resp:
            caller = await self.auth.caller(auth, context, request)
            check_limits(self, caller, handler.__name__, cast(Message, request))
            try:
                return await handler(self, caller, request)
            except PartitionMoved as moved:
                # A channel another replica holds: that replica answers the call as it came (unless
                # this call was itself forwarded, or this replica holds the channel by now).
                metadata = context.invocation_metadata() or ()
                channel_id = moved.metadata.get("channel_id", "")
                if self.forwarder is None or not channel_id or any(k == FORWARDED_HEADER for k, _ in metadata):
                    raise
                answer = await self.forwarder.call(
                    self.SERVICE, handler.__name__, request, list(metadata), channel_id, context.time_remaining()
                )
                if answer is None:
                    return await handler(self, caller, request)
                return cast(Resp, answer)

        return unary_boundary(method)

    return decorate


def stream_rpc(
    auth: Auth[C],
) -> Callable[[Callable[[S, C, Req], AsyncIterator[Resp]]], Callable[[S, Req, Ctx], AsyncIterator[Resp]]]:
    """Declare a server-streaming RPC's auth mode, like :func:`unary_rpc`."""

    def decorate(handler: Callable[[S, C, Req], AsyncIterator[Resp]]) -> Callable[[S, Req, Ctx], AsyncIterator[Resp]]:
        @functools.wraps(handler)
        async def method(self: S, request: Req, context: Ctx) -> AsyncIterator[Resp]:
            caller = await self.auth.caller(auth, context, request)
            check_limits(self, caller, handler.__name__, cast(Message, request))
            async for item in handler(self, caller, request):
                yield item

        return stream_boundary(method)

    return decorate
