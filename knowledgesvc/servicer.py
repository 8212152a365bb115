"""The KnowledgeService gRPC servicer (thin: conversion and the read budget).

Each method declares its auth mode (:mod:`knowledgesvc.rpc`, the request seam: the token
authenticated once, the namespace granted, the field limits, metrics and the error boundary) and
gets the namespace's store; store behaviour lives in :mod:`knowledgestore`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from agentnet.v1 import knowledge_pb2, knowledge_pb2_grpc

from knowledgestore.base import ReadWithin, StoreBase
from knowledgestore.convert import event_to_proto
from knowledgestore.paths import MAX_PATH_BYTES
from knowledgestore.types import ChangeEvent, FileInfo
from knowledgesvc.auth import TokenAuthority
from knowledgesvc.metrics import KnowledgeRecorder
from knowledgesvc.rpc import NAMESPACE, PER_ITEM, Caller, KnowledgeRequest, stream_rpc, unary_rpc

__all__ = ["KNOWLEDGE_SERVICE", "KnowledgeRequest", "KnowledgeServicer", "knowledge_request_limits"]
from netkernel.errors import AgentNetError, InvalidArgument, PayloadTooLarge, Unavailable
from servicekit.boundary import domain_error, error_detail
from servicekit.budget import ByteBudget
from servicekit.limits import Bound, RequestLimits
from servicekit.runtime import DEFAULT_MAX_MESSAGE_BYTES

KNOWLEDGE_SERVICE = knowledge_pb2.DESCRIPTOR.services_by_name["KnowledgeService"]

#: Largest content a response may carry: the message limit minus room for the other fields.
MAX_RESPONSE_BYTES = DEFAULT_MAX_MESSAGE_BYTES - 64 * 1024


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

#: Most reads one ReadMany call may carry (more: INVALID_ARGUMENT naming ``reads``).
READ_MANY_MAX_ITEMS = 256

#: Most file content one ReadMany response carries; an item past it is refused on its own (read it alone).
READ_MANY_MAX_BYTES = 4 * 1024 * 1024


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
        read_many_max_items: int = READ_MANY_MAX_ITEMS,
        read_many_max_bytes: int = READ_MANY_MAX_BYTES,
        recorder: KnowledgeRecorder | None = None,
    ) -> None:
        self.root = store
        """The store whose namespaces the requests act on."""
        self.recorder = recorder if recorder is not None else KnowledgeRecorder()
        """Told each call's operation, outcome and time (knowledgesvc/metrics.py)."""
        self.read_budget = ByteBudget(read_budget_bytes)
        """What concurrent reads hold: N reads of big files load at most this many bytes at once."""
        self.authority = authority
        """Who may use which namespace (each call's token is authenticated once, by the seam)."""
        self.limits = knowledge_request_limits(max_write_bytes)
        """The request field limits the seam checks."""
        self._watch_backlog = watch_backlog
        self._small_read_bytes = min(SMALL_READ_BYTES, read_budget_bytes // 64)
        self._read_many_max_items = read_many_max_items
        self._read_many_max_bytes = min(read_many_max_bytes, MAX_RESPONSE_BYTES)

    @staticmethod
    def _check_response_size(path: str, size: int) -> None:
        if size > MAX_RESPONSE_BYTES:
            raise PayloadTooLarge(
                f"{path}: {size} bytes from this offset exceed the response limit of {MAX_RESPONSE_BYTES} bytes; "
                "read_range from a later offset",
                metadata={"path": path, "size": str(size), "limit": str(MAX_RESPONSE_BYTES)},
            )

    @unary_rpc(NAMESPACE)
    async def Read(self, store: StoreBase, request: knowledge_pb2.ReadRequest) -> knowledge_pb2.ReadResponse:
        """Return a file's content, size and version (an oversized file is refused before it is read).

        A small file is read in one storage call holding ``SMALL_READ_BYTES`` of the budget; a bigger one
        is sized first, then read holding its size."""
        async with self.read_budget.hold(self._small_read_bytes):
            small = await store.read_within(request.path, self._small_read_bytes)
        return await self._read_response(store, request.path, small)

    async def _read_response(
        self, store: StoreBase, path: str, small: tuple[str, FileInfo] | int
    ) -> knowledge_pb2.ReadResponse:
        """Read's answer from ``read_within``'s outcome: a small file as it came, a bigger one read now
        holding its size of the budget (refused first when no response could carry it)."""
        if not isinstance(small, int):
            content, info = small
            self._check_response_size(path, info.size)  # a fallback read_within may see it grow
            return knowledge_pb2.ReadResponse(content=content, version=info.version, size=info.size)
        size = small
        self._check_response_size(path, size)
        async with self.read_budget.hold(size):
            content, info = await store.read_info(path)
            self._check_response_size(path, info.size)  # it may have grown in between
            return knowledge_pb2.ReadResponse(content=content, version=info.version, size=info.size)

    @unary_rpc(PER_ITEM)
    async def ReadMany(self, caller: Caller, request: knowledge_pb2.ReadManyRequest) -> knowledge_pb2.ReadManyResponse:
        """Several Reads in one call, each authorised and checked as :meth:`Read` and answered with its own
        file or error; the small files of one namespace come from one storage call.

        The whole call is refused only for too many items; an item whose content would take the response
        past ``read_many_max_bytes`` is refused alone (PAYLOAD_TOO_LARGE, metadata ``field=reads``)."""
        reads = request.reads
        if len(reads) > self._read_many_max_items:
            raise InvalidArgument(
                f"reads has {len(reads)} items, over the limit of {self._read_many_max_items}; "
                "split them over several ReadMany calls (--read-many-max-items)",
                metadata={"field": "reads", "items": str(len(reads)), "limit": str(self._read_many_max_items)},
            )
        outcomes: list[ReadWithin] = [0] * len(reads)
        by_store: dict[StoreBase, list[int]] = {}
        for i, item in enumerate(reads):
            try:
                store = caller.store(item)
            except Exception as exc:  # the item's refusal, exactly as Read would end its call
                outcomes[i] = domain_error(exc, "KnowledgeServicer.ReadMany")
            else:
                by_store.setdefault(store, []).append(i)
        store_of = {i: store for store, indexes in by_store.items() for i in indexes}
        async with self.read_budget.hold(self._small_read_bytes * len(store_of)):
            for store, indexes in by_store.items():
                found = await store.read_many_within([reads[i].path for i in indexes], self._small_read_bytes)
                for i, outcome in zip(indexes, found, strict=True):
                    outcomes[i] = outcome
        response = knowledge_pb2.ReadManyResponse()
        left = self._read_many_max_bytes
        for i, outcome in enumerate(outcomes):
            result = response.results.add()
            if isinstance(outcome, AgentNetError):
                result.error.CopyFrom(error_detail(outcome))
                continue
            path = reads[i].path
            try:
                size = outcome if isinstance(outcome, int) else outcome[1].size
                self._check_response_size(path, size)  # what Read would refuse, refused as Read does
                self._check_batch_room(path, size, left)
                file = await self._read_response(store_of[i], path, outcome)
                self._check_batch_room(path, file.size, left)  # it may have grown in between
            except Exception as exc:
                result.error.CopyFrom(error_detail(domain_error(exc, "KnowledgeServicer.ReadMany")))
            else:
                left -= file.size
                result.file.CopyFrom(file)
        return response

    def _check_batch_room(self, path: str, size: int, left: int) -> None:
        """Refuse one ReadMany item whose ``size`` bytes do not fit the ``left`` bytes of the response."""
        if size > left:
            raise PayloadTooLarge(
                f"{path}: {size} bytes do not fit this ReadMany response ({left} of its "
                f"{self._read_many_max_bytes} bytes left, --read-many-max-bytes); read it alone with Read",
                metadata={"field": "reads", "path": path, "size": str(size), "limit": str(self._read_many_max_bytes)},
            )

    @unary_rpc(NAMESPACE)
    async def Write(self, store: StoreBase, request: knowledge_pb2.WriteRequest) -> knowledge_pb2.WriteResponse:
        """Create or replace a file."""
        info = await store.write_info(request.path, request.content)
        return knowledge_pb2.WriteResponse(version=info.version, size=info.size)

    @unary_rpc(NAMESPACE)
    async def List(self, store: StoreBase, request: knowledge_pb2.ListRequest) -> knowledge_pb2.ListResponse:
        """Immediate children of a directory."""
        entries = await store.list(request.path)
        return knowledge_pb2.ListResponse(entries=entries)

    @unary_rpc(NAMESPACE)
    async def Delete(self, store: StoreBase, request: knowledge_pb2.DeleteRequest) -> knowledge_pb2.DeleteResponse:
        """Remove a file."""
        await store.delete(request.path)
        return knowledge_pb2.DeleteResponse()

    @unary_rpc(NAMESPACE)
    async def Exists(self, store: StoreBase, request: knowledge_pb2.ExistsRequest) -> knowledge_pb2.ExistsResponse:
        """Whether a file exists."""
        exists = await store.exists(request.path)
        return knowledge_pb2.ExistsResponse(exists=exists)

    @unary_rpc(NAMESPACE)
    async def Append(self, store: StoreBase, request: knowledge_pb2.AppendRequest) -> knowledge_pb2.AppendResponse:
        """Append text; report where it landed."""
        result = await store.append_info(request.path, request.text)
        return knowledge_pb2.AppendResponse(offset=result.offset, size=result.size, version=result.version)

    @unary_rpc(NAMESPACE)
    async def ReadRange(
        self, store: StoreBase, request: knowledge_pb2.ReadRangeRequest
    ) -> knowledge_pb2.ReadRangeResponse:
        """Everything from a byte offset on, and the offset to continue from (oversized: refused before reading).

        Up to ``SMALL_READ_BYTES`` are read in one storage call, as in :meth:`Read`."""
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

    @stream_rpc(NAMESPACE)
    async def Watch(
        self, store: StoreBase, request: knowledge_pb2.WatchRequest
    ) -> AsyncIterator[knowledge_pb2.WatchResponse]:
        """Confirm the subscription, then stream changes until the client cancels."""
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
