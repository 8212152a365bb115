"""KnowledgeRpc: the ``agentnet.v1.KnowledgeService`` RPCs, one typed method each.

Every method takes the RPC's request message and returns its response message, so
mypy checks both; a failure raises the service's domain exception
(:mod:`netkernel.errors`). Calls carry the bearer credential and the per-call
timeout the client was built with (``Watch`` streams have no timeout).
"""

from __future__ import annotations

from typing import Protocol

import grpc
from agentnet.v1 import knowledge_pb2, knowledge_pb2_grpc
from google.protobuf.message import Message

from agentsdk.transport import ResponseT, UnaryMethod, bearer, checked, unary
from netkernel.errors import error_from_rpc

__all__ = ["KnowledgeRpc", "WatchStream"]


class ReadableCall(Protocol):
    """What the SDK uses of a running ``grpc.aio`` server-streaming call."""

    async def read(self) -> object:
        """The next response, or ``grpc.aio.EOF`` once the stream ended."""
        ...

    def cancel(self) -> bool:
        """End the call."""
        ...


class WatchStream:
    """A running ``Watch``: :meth:`read` its frames one by one; :meth:`cancel` ends it."""

    def __init__(self, call: ReadableCall) -> None:
        self._call = call
        self.cancelled = False
        """True once a read failed because the call was cancelled (by either side, e.g. a closing channel)."""

    async def read(self) -> knowledge_pb2.WatchResponse | None:
        """The next frame; None once the service ended the stream. Failures raise the domain exception."""
        try:
            frame = await self._call.read()
        except grpc.aio.AioRpcError as err:
            self.cancelled = err.code() == grpc.StatusCode.CANCELLED
            raise error_from_rpc(err) from None
        if frame is grpc.aio.EOF:
            return None
        return checked(frame, knowledge_pb2.WatchResponse)

    def cancel(self) -> None:
        """End the call (a no-op once it ended)."""
        self._call.cancel()


class KnowledgeRpc:
    """The knowledge service's RPCs over one channel, as the holder of ``credential``."""

    def __init__(self, channel: grpc.aio.Channel, credential: str, *, timeout: float | None) -> None:
        self._stub = knowledge_pb2_grpc.KnowledgeServiceStub(channel)
        self._metadata = bearer(credential)
        self._timeout = timeout

    async def _unary(self, method: UnaryMethod, request: Message, response_type: type[ResponseT]) -> ResponseT:
        return await unary(method, request, response_type, metadata=self._metadata, timeout=self._timeout)

    async def read(self, request: knowledge_pb2.ReadRequest) -> knowledge_pb2.ReadResponse:
        """``Read``: a file's content, size and version."""
        return await self._unary(self._stub.Read, request, knowledge_pb2.ReadResponse)

    async def read_many(self, request: knowledge_pb2.ReadManyRequest) -> knowledge_pb2.ReadManyResponse:
        """``ReadMany``: several reads, each answered with its file or its own error."""
        return await self._unary(self._stub.ReadMany, request, knowledge_pb2.ReadManyResponse)

    async def write(self, request: knowledge_pb2.WriteRequest) -> knowledge_pb2.WriteResponse:
        """``Write``: create or replace a file."""
        return await self._unary(self._stub.Write, request, knowledge_pb2.WriteResponse)

    async def append(self, request: knowledge_pb2.AppendRequest) -> knowledge_pb2.AppendResponse:
        """``Append``: append text to a file (creating it)."""
        return await self._unary(self._stub.Append, request, knowledge_pb2.AppendResponse)

    async def list(self, request: knowledge_pb2.ListRequest) -> knowledge_pb2.ListResponse:
        """``List``: a directory's immediate children."""
        return await self._unary(self._stub.List, request, knowledge_pb2.ListResponse)

    async def delete(self, request: knowledge_pb2.DeleteRequest) -> knowledge_pb2.DeleteResponse:
        """``Delete``: remove a file."""
        return await self._unary(self._stub.Delete, request, knowledge_pb2.DeleteResponse)

    async def exists(self, request: knowledge_pb2.ExistsRequest) -> knowledge_pb2.ExistsResponse:
        """``Exists``: whether a file exists."""
        return await self._unary(self._stub.Exists, request, knowledge_pb2.ExistsResponse)

    async def read_range(self, request: knowledge_pb2.ReadRangeRequest) -> knowledge_pb2.ReadRangeResponse:
        """``ReadRange``: a file's content from a byte offset on."""
        return await self._unary(self._stub.ReadRange, request, knowledge_pb2.ReadRangeResponse)

    def watch(self, request: knowledge_pb2.WatchRequest) -> WatchStream:
        """``Watch``: start streaming changes at or under a prefix (the first frame confirms it)."""
        return WatchStream(self._stub.Watch(request, metadata=self._metadata))
