"""The request seam of every KnowledgeService RPC: who is calling, what it may touch, how its errors leave.

Each RPC method of :class:`~knowledgesvc.servicer.KnowledgeServicer` declares its auth mode
(:data:`NAMESPACE` or :data:`PER_ITEM`) with :func:`unary_rpc` / :func:`stream_rpc`, as the hub's
methods do (``hubsvc/rpc.py``). The decorator runs the call under the error boundary of
:mod:`servicekit.boundary`, counts and times it as its operation (the method's name in snake case:
``ReadRange`` → ``read_range``, :mod:`knowledgesvc.metrics`), authenticates the bearer token once
(:meth:`~knowledgesvc.auth.TokenAuthority.authenticate`) and hands the handler what its mode gives:

* :data:`NAMESPACE`: the store of the request's namespace, once the namespace's name is valid, the
  token grants it and the request is within the field limits (:mod:`servicekit.limits`, with the
  service's overrides); any refusal ends the call.
* :data:`PER_ITEM`: the :class:`Caller` — for a call whose items each name their own namespace
  (``ReadMany``): :meth:`Caller.store` checks one item as :data:`NAMESPACE` checks a request, so an
  item is refused alone, a missing or unknown token included (looked up once for the call).
"""

from __future__ import annotations

import functools
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeAlias, TypeVar, cast

from agentnet.v1 import knowledge_pb2

from knowledgestore.base import StoreBase
from knowledgestore.paths import validate_namespace
from knowledgesvc.auth import Grant, TokenAuthority
from knowledgesvc.metrics import KnowledgeRecorder, measured, measured_stream
from netkernel.errors import AgentNetError
from servicekit.boundary import stream_boundary, unary_boundary
from servicekit.limits import RequestLimits

__all__ = ["DECLARED", "NAMESPACE", "PER_ITEM", "Auth", "Caller", "KnowledgeRequest", "stream_rpc", "unary_rpc"]

C = TypeVar("C")
Req = TypeVar("Req")
Resp = TypeVar("Resp")

#: Every request message that acts on one namespace.
KnowledgeRequest: TypeAlias = (
    knowledge_pb2.ReadRequest
    | knowledge_pb2.WriteRequest
    | knowledge_pb2.ListRequest
    | knowledge_pb2.DeleteRequest
    | knowledge_pb2.ExistsRequest
    | knowledge_pb2.AppendRequest
    | knowledge_pb2.ReadRangeRequest
    | knowledge_pb2.WatchRequest
)


@dataclass(frozen=True)
class Auth(Generic[C]):
    """An RPC's auth mode; ``C`` is what its handler receives."""

    name: str


NAMESPACE: Auth[StoreBase] = Auth("namespace")
"""The request names one namespace; the handler gets that namespace's store."""
PER_ITEM: Auth[Caller] = Auth("per-item")
"""The request's items name their namespaces; the handler gets the :class:`Caller` to check each."""


DECLARED: dict[str, Auth[Any]] = {}
"""Each declared RPC handler (``KnowledgeServicer.Read`` …) → its auth mode, so a test can check that
every RPC of the service passes the seam."""


class Seam(Protocol):
    """What the seam reads of a servicer: the token authority, the field limits, the root store and
    the recorder of its metrics."""

    authority: TokenAuthority
    limits: RequestLimits
    root: StoreBase
    recorder: KnowledgeRecorder


class Caller:
    """The caller of one call: its token's grant, or the refusal of its token (raised by :meth:`store`)."""

    def __init__(self, seam: Seam, grant: Grant | AgentNetError) -> None:
        self._seam = seam
        self._grant = grant

    def store(self, request: KnowledgeRequest) -> StoreBase:
        """The store of ``request``'s namespace: InvalidArgument for a malformed namespace name, the
        token's refusal (Unauthenticated), PermissionDenied when the token does not grant the
        namespace, then the request's field limits."""
        namespace = validate_namespace(request.namespace)
        if isinstance(self._grant, AgentNetError):
            raise self._grant
        self._grant.check(namespace)
        self._seam.limits.check(request)
        return self._seam.root.namespace(namespace)


def _caller(seam: Seam, context: Any) -> Caller:
    """Authenticate the call's token once; a refusal is kept for :meth:`Caller.store` to raise."""
    metadata: Iterable[tuple[str, str | bytes]] = [(i[0], i[1]) for i in context.invocation_metadata() or ()]
    try:
        return Caller(seam, seam.authority.authenticate(metadata))
    except AgentNetError as refusal:
        return Caller(seam, refusal)


def _given(auth: Auth[C], seam: Seam, request: object, context: Any) -> C:
    caller = _caller(seam, context)
    if auth is PER_ITEM:
        return cast(C, caller)
    return cast(C, caller.store(cast(KnowledgeRequest, request)))


def operation(rpc: str) -> str:
    """The metrics operation of an RPC: its name in snake case (``ReadMany`` → ``read_many``)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", rpc).lower()


S = TypeVar("S", bound=Seam)


def unary_rpc(
    auth: Auth[C],
) -> Callable[[Callable[[S, C, Req], Awaitable[Resp]]], Callable[[S, Req, Any], Awaitable[Resp]]]:
    """Declare a unary RPC's auth mode: the handler ``(self, given, request)`` runs measured,
    authenticated and checked as ``auth`` says, under the error boundary."""

    def decorate(handler: Callable[[S, C, Req], Awaitable[Resp]]) -> Callable[[S, Req, Any], Awaitable[Resp]]:
        DECLARED[handler.__qualname__] = auth

        @functools.wraps(handler)
        async def method(self: S, request: Req, context: Any) -> Resp:
            return await handler(self, _given(auth, self, request, context), request)

        return unary_boundary(measured(operation(handler.__name__))(method))

    return decorate


def stream_rpc(
    auth: Auth[C],
) -> Callable[[Callable[[S, C, Req], AsyncIterator[Resp]]], Callable[[S, Req, Any], AsyncIterator[Resp]]]:
    """Declare a server-streaming RPC's auth mode, like :func:`unary_rpc`."""

    def decorate(handler: Callable[[S, C, Req], AsyncIterator[Resp]]) -> Callable[[S, Req, Any], AsyncIterator[Resp]]:
        DECLARED[handler.__qualname__] = auth

        @functools.wraps(handler)
        async def method(self: S, request: Req, context: Any) -> AsyncIterator[Resp]:
            async for item in handler(self, _given(auth, self, request, context), request):
                yield item

        return stream_boundary(measured_stream(operation(handler.__name__))(method))

    return decorate
