"""The ReplicaService gRPC servicer: posts another replica forwards for one of its participants
(proto/agentnet/v1/replica.proto, docs/scale-out.md "Forwarding between replicas").

A call is authenticated by the store's replica key (:data:`REPLICA_KEY_HEADER`), never by an
agent credential: the forwarding replica authenticated the participant already. The posts are
then answered exactly as the participant's own Connect posts on this replica
(:meth:`HubServicer.answer_posts <hubsvc.servicer.HubServicer.answer_posts>`): the same
checks, field limits, idempotency and refusals, each answered once committed.
"""

from __future__ import annotations

import asyncio

from agentnet.v1 import connect_pb2, replica_pb2, replica_pb2_grpc

from hubsvc.core.sessions import MAX_PENDING_TURNS
from hubsvc.field_limits import post_batch_refusal
from hubsvc.replica_peers import REPLICA_KEY_HEADER
from hubsvc.rpc import Ctx
from hubsvc.servicer import HubServicer
from netkernel.errors import InvalidArgument, NotFound, Unauthenticated
from servicekit.boundary import unary_boundary

MAX_ID_CHARS = 128
"""Characters an id in a PendingTurns call may have at most."""
REPLICA_SERVICE = replica_pb2.DESCRIPTOR.services_by_name["ReplicaService"]


class _Results:
    """Collects the PostResults :meth:`HubServicer.answer_posts` gives, in any order, until each
    request id has its answer (the place of a Connect session for a forwarded call)."""

    def __init__(self, request_ids: list[str]) -> None:
        self._order = request_ids
        self._results: dict[int, connect_pb2.PostResult] = {}
        self._waiting: dict[str, list[int]] = {}
        for index, request_id in enumerate(request_ids):
            self._waiting.setdefault(request_id, []).append(index)
        self._done = asyncio.get_running_loop().create_future()
        if not request_ids:
            self._done.set_result(None)

    def control(self, frame: connect_pb2.ConnectResponse) -> None:
        """Take one post's result (posts sharing a request id are answered in their order)."""
        indexes = self._waiting.get(frame.post_result.request_id)
        if not indexes:
            return
        self._results[indexes.pop(0)] = frame.post_result
        if len(self._results) == len(self._order) and not self._done.done():
            self._done.set_result(None)

    async def all(self) -> list[connect_pb2.PostResult]:
        """Every post's result, in the request's order, once each is answered."""
        await self._done
        return [self._results[index] for index in range(len(self._order))]


class ReplicaServicer(replica_pb2_grpc.ReplicaServiceServicer):
    """Serves agentnet.v1.ReplicaService: forwarded posts, admitted through ``hub``'s post path, and
    the pending turns of the channels this replica holds."""

    def __init__(self, hub: HubServicer, replica_key: str) -> None:
        hub.auth.trust_replicas(replica_key)  # raises for an empty key
        self._hub = hub

    def _authenticate(self, context: Ctx) -> None:
        """Refuse a call without the store's replica key (UNAUTHENTICATED)."""
        if not self._hub.auth.from_replica(context):
            raise Unauthenticated(
                f"ReplicaService is spoken only between hub replicas sharing one store: send the store's "
                f"replica key as '{REPLICA_KEY_HEADER}' metadata (clients use HubService)."
            )

    @unary_boundary
    async def ForwardPosts(
        self, request: replica_pb2.ForwardPostsRequest, context: Ctx
    ) -> replica_pb2.ForwardPostsResponse:
        """Admit a participant's posts forwarded by another replica; one result per post."""
        self._authenticate(context)
        core = self._hub.core
        refusal = post_batch_refusal(
            len(request.posts), core.options.max_batch, field="posts", limit="--max-batch", per="ForwardPosts call"
        )
        if refusal is not None:
            raise refusal
        sender_id = request.sender_id
        if not sender_id or (sender_id not in core.registry and await core.registry.reload(sender_id)):
            raise NotFound(
                f"sender_id {sender_id!r} is not a registered agent on the store this replica shares; "
                "the forwarding replica must send the id it authenticated.",
                metadata={"field": "sender_id"},
            )
        results = _Results([post.request_id for post in request.posts])
        await self._hub.answer_posts(sender_id, results, request.posts)
        return replica_pb2.ForwardPostsResponse(results=await results.all())

    @unary_boundary
    async def PendingTurns(
        self, request: replica_pb2.PendingTurnsRequest, context: Ctx
    ) -> replica_pb2.PendingTurnsResponse:
        """The turns this replica's held channels among ``channel_ids`` await from ``agent_id``."""
        self._authenticate(context)
        ids = request.channel_ids
        if not ids or len(ids) > MAX_PENDING_TURNS:
            raise InvalidArgument(
                f"channel_ids holds {len(ids)} ids: ask for 1 to {MAX_PENDING_TURNS} channels per PendingTurns call.",
                metadata={"field": "channel_ids", "limit": str(MAX_PENDING_TURNS)},
            )
        if len(request.agent_id) > MAX_ID_CHARS or any(len(c) > MAX_ID_CHARS for c in ids):
            raise InvalidArgument(
                f"agent_id and every channel id must be at most {MAX_ID_CHARS} characters.",
                metadata={"field": "channel_ids", "limit": str(MAX_ID_CHARS)},
            )
        turns = self._hub.core.channels.held_turns(request.agent_id, dict.fromkeys(ids))
        return replica_pb2.PendingTurnsResponse(turns=turns)
