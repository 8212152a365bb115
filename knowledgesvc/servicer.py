"""The KnowledgeService gRPC servicer (thin: auth, namespaces, conversion).

Store behaviour lives in ``agentsdk.knowledge``; domain errors raised there
become gRPC statuses in the ``unary_boundary`` / ``stream_boundary`` wrappers.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, TypeAlias

from agentnet.v1 import knowledge_pb2, knowledge_pb2_grpc

from knowledgestore.base import StoreBase
from knowledgestore.convert import event_to_proto
from knowledgestore.paths import MAX_PATH_BYTES, validate_namespace
from knowledgestore.types import ChangeEvent
from knowledgesvc.auth import TokenAuthority
from netkernel.errors import InvalidArgument, PayloadTooLarge, Unavailable
from servicekit.boundary import stream_boundary, unary_boundary
from servicekit.budget import ByteBudget
from servicekit.limits import Bound, RequestLimits
from servicekit.runtime import DEFAULT_MAX_MESSAGE_BYTES

KNOWLEDGE_SERVICE = knowledge_pb2.DESCRIPTOR.services_by_name["KnowledgeService"]

#: Largest content a response may carry: the message limit minus room for the other fields.
MAX_RESPONSE_BYTES = DEFAULT_MAX_MESSAGE_BYTES - 64 * 1024

#: Every request message: each carries the namespace it acts on.
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


def knowledge_request_limits(max_write_bytes: int) -> RequestLimits:
    """The field limits of knowledge requests: file content up to ``max_write_bytes`` (PAYLOAD_TOO_LARGE),
    paths up to ``MAX_PATH_BYTES`` as sent, offsets within a signed 64-bit integer (OUT_OF_RANGE)."""
    content = Bound(max_write_bytes, PayloadTooLarge, "split the content into several appends (--max-write-bytes)")
    path = Bound(MAX_PATH_BYTES, InvalidArgument, "use a shorter path")
    overrides = {
        "agentnet.v1.WriteRequest.content": content,
        "agentnet.v1.AppendRequest.text": content,
        "agentnet.v1.WatchRequest.prefix": path,
    }
    for request in ("Read", "Write", "List", "Delete", "Exists", "Append", "ReadRange"):
        overrides[f"agentnet.v1.{request}Request.path"] = path
    return RequestLimits(overrides=overrides)


#: Changes a Watch may have queued for a slow client before the stream is ended.
WATCH_BACKLOG = 10_000

#: Bytes of files all concurrent Read / ReadRange calls may load at once (more wait their turn).
READ_BUDGET_BYTES = 64 * 1024 * 1024

#: Largest file (or range, for ReadRange) a read loads in one storage call, holding this much of
#: the read budget up front (at most 1/64 of the budget, so a small budget still admits many small
#: reads at once); anything bigger is sized first, then read holding exactly its size.
SMALL_READ_BYTES = 64 * 1024


class KnowledgeServicer(knowledge_pb2_grpc.KnowledgeServiceServicer):
    """Serves agentnet.v1.KnowledgeService over ``store``: each request uses ``store.namespace(request.namespace)``."""

    def __init__(
        self,
        store: StoreBase,
        authority: TokenAuthority,
        *,
        max_write_bytes: int,
        watch_backlog: int = WATCH_BACKLOG,
        read_budget_bytes: int = READ_BUDGET_BYTES,
    ) -> None:
        self._root = store
        self.read_budget = ByteBudget(read_budget_bytes)
        """What concurrent reads hold: N reads of big files load at most this many bytes at once."""
        self._authority = authority
        self._limits = knowledge_request_limits(max_write_bytes)
        self._watch_backlog = watch_backlog
        self._small_read_bytes = min(SMALL_READ_BYTES, read_budget_bytes // 64)

    def _store(self, request: KnowledgeRequest, context: Any) -> StoreBase:
        """Authenticate the caller, check the namespace name and its grant, then the request's field
        limits; return the namespace's store."""
        namespace = request.namespace
        metadata = [(item[0], item[1]) for item in context.invocation_metadata() or ()]
        self._authority.authorize(metadata, validate_namespace(namespace))
        self._limits.check(request)
        return self._root.namespace(namespace)

    @staticmethod
    def _check_response_size(path: str, size: int) -> None:
        if size > MAX_RESPONSE_BYTES:
            raise PayloadTooLarge(
                f"{path}: {size} bytes from this offset exceed the response limit of {MAX_RESPONSE_BYTES} bytes; "
                "read_range from a later offset",
                metadata={"path": path, "size": str(size), "limit": str(MAX_RESPONSE_BYTES)},
            )

    @unary_boundary
    async def Read(self, request: knowledge_pb2.ReadRequest, context: Any) -> knowledge_pb2.ReadResponse:
        """Return a file's content, size and version (an oversized file is refused before it is read).

        A small file is read in one storage call holding ``SMALL_READ_BYTES`` of the budget; a bigger one
        is sized first, then read holding its size."""
        store = self._store(request, context)
        async with self.read_budget.hold(self._small_read_bytes):
            small = await store.read_within(request.path, self._small_read_bytes)
        if not isinstance(small, int):
            content, info = small
            self._check_response_size(request.path, info.size)  # a fallback read_within may see it grow
            return knowledge_pb2.ReadResponse(content=content, version=info.version, size=info.size)
        size = small
        self._check_response_size(request.path, size)
        async with self.read_budget.hold(size):
            content, info = await store.read_info(request.path)
            self._check_response_size(request.path, info.size)  # it may have grown in between
            return knowledge_pb2.ReadResponse(content=content, version=info.version, size=info.size)

    @unary_boundary
    async def Write(self, request: knowledge_pb2.WriteRequest, context: Any) -> knowledge_pb2.WriteResponse:
        """Create or replace a file."""
        store = self._store(request, context)
        info = await store.write_info(request.path, request.content)
        return knowledge_pb2.WriteResponse(version=info.version, size=info.size)

    @unary_boundary
    async def List(self, request: knowledge_pb2.ListRequest, context: Any) -> knowledge_pb2.ListResponse:
        """Immediate children of a directory."""
        entries = await self._store(request, context).list(request.path)
        return knowledge_pb2.ListResponse(entries=entries)

    @unary_boundary
    async def Delete(self, request: knowledge_pb2.DeleteRequest, context: Any) -> knowledge_pb2.DeleteResponse:
        """Remove a file."""
        await self._store(request, context).delete(request.path)
        return knowledge_pb2.DeleteResponse()

    @unary_boundary
    async def Exists(self, request: knowledge_pb2.ExistsRequest, context: Any) -> knowledge_pb2.ExistsResponse:
        """Whether a file exists."""
        exists = await self._store(request, context).exists(request.path)
        return knowledge_pb2.ExistsResponse(exists=exists)

    @unary_boundary
    async def Append(self, request: knowledge_pb2.AppendRequest, context: Any) -> knowledge_pb2.AppendResponse:
        """Append text; report where it landed."""
        store = self._store(request, context)
        result = await store.append_info(request.path, request.text)
        return knowledge_pb2.AppendResponse(offset=result.offset, size=result.size, version=result.version)

    @unary_boundary
    async def ReadRange(self, request: knowledge_pb2.ReadRangeRequest, context: Any) -> knowledge_pb2.ReadRangeResponse:
        """Everything from a byte offset on, and the offset to continue from (oversized: refused before reading).

        Up to ``SMALL_READ_BYTES`` are read in one storage call, as in :meth:`Read`."""
        store = self._store(request, context)
        async with self.read_budget.hold(self._small_read_bytes):
            small = await store.read_range_within(request.path, request.offset, self._small_read_bytes)
        if isinstance(small, str):
            size = len(small.encode("utf-8"))
            self._check_response_size(request.path, size)  # a fallback read_range_within may see it grow
            return knowledge_pb2.ReadRangeResponse(content=small, next_offset=request.offset + size)
        wanted = small
        self._check_response_size(request.path, wanted)
        async with self.read_budget.hold(wanted):
            content = await store.read_range(request.path, request.offset)
            size = len(content.encode("utf-8"))
            self._check_response_size(request.path, size)
            return knowledge_pb2.ReadRangeResponse(content=content, next_offset=request.offset + size)

    @stream_boundary
    async def Watch(
        self, request: knowledge_pb2.WatchRequest, context: Any
    ) -> AsyncIterator[knowledge_pb2.WatchResponse]:
        """Confirm the subscription, then stream changes until the client cancels."""
        store = self._store(request, context)
        # None marks an overflow: the client fell watch_backlog changes behind.
        queue: asyncio.Queue[ChangeEvent | None] = asyncio.Queue()
        overflowed = False

        def enqueue(event: ChangeEvent) -> None:
            nonlocal overflowed
            if overflowed:
                return
            if queue.qsize() >= self._watch_backlog:
                overflowed = True
                queue.put_nowait(None)
            else:
                queue.put_nowait(event)

        subscription = await store.on_change(request.prefix, enqueue)
        try:
            yield knowledge_pb2.WatchResponse(subscribed=True)
            while True:
                event = await queue.get()
                if event is None:
                    raise Unavailable(
                        f"the watch fell {self._watch_backlog} changes behind and was ended; watch again and re-read",
                        metadata={"backlog": str(self._watch_backlog)},
                    )
                yield knowledge_pb2.WatchResponse(change=event_to_proto(event))
        finally:
            await subscription.cancel()
