"""RemoteKnowledgeStore: the KnowledgeStore protocol over gRPC, against ``knowledgesvc``.

Errors come back as the same exception classes the server raised (NotFound,
OutOfRange, InvalidArgument, Unauthenticated, PermissionDenied,
PayloadTooLarge, …) through :func:`agentsdk.errors.error_from_rpc`.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc
from agentnet.v1 import knowledge_pb2, knowledge_pb2_grpc

from agentsdk.errors import OutOfRange, Unavailable, error_from_rpc
from agentsdk.knowledge.base import StoreBase
from agentsdk.knowledge.convert import event_from_proto
from agentsdk.knowledge.feed import deliver, stop_task
from agentsdk.knowledge.types import AppendResult, ChangeCallback, FileInfo, Subscription

log = logging.getLogger("agentnet.knowledge")

R = TypeVar("R")

#: Message size limit in both directions; matches the service's default.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


class RemoteKnowledgeStore(StoreBase):
    """A knowledge-service namespace, used like a local store.

    ``target`` is ``host:port``; ``credential`` is a bearer token the service
    grants ``namespace``. ``channel_credentials`` switches to TLS. ``timeout``
    bounds each call (not ``on_change`` streams). Use ``async with`` or call
    :meth:`close`.
    """

    def __init__(
        self,
        target: str,
        *,
        namespace: str,
        credential: str,
        channel_credentials: grpc.ChannelCredentials | None = None,
        timeout: float | None = 60.0,
    ) -> None:
        super().__init__()
        self._target = target
        self._namespace = namespace
        self._credential = credential
        self._channel_credentials = channel_credentials
        self._metadata = (("authorization", f"Bearer {credential}"),)
        self._timeout = timeout
        self._channel: Any = None
        self._stub_instance: Any = None
        self._subscriptions: set[Subscription] = set()

    @property
    def target(self) -> str:
        """The service address."""
        return self._target

    def _make_view(self, name: str) -> RemoteKnowledgeStore:
        """The same service and credential, another namespace (sharing the connection)."""
        return RemoteKnowledgeStore(
            self._target,
            namespace=name,
            credential=self._credential,
            channel_credentials=self._channel_credentials,
            timeout=self._timeout,
        )

    def _check_namespace(self, name: str) -> None:
        """Accept any name here: the service validates it (InvalidArgument on first use)."""
        return None

    def _stub(self) -> Any:
        # The channel is created on first use, inside the event loop that will use it.
        owner = self._view_root or self
        if owner._stub_instance is None:
            options = [
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ]
            if owner._channel_credentials is None:
                owner._channel = grpc.aio.insecure_channel(owner._target, options=options)
            else:
                owner._channel = grpc.aio.secure_channel(owner._target, owner._channel_credentials, options=options)
            owner._stub_instance = knowledge_pb2_grpc.KnowledgeServiceStub(owner._channel)
        return owner._stub_instance

    async def _call(self, method: Callable[..., Awaitable[R]], request: Any) -> R:
        try:
            return await method(request, metadata=self._metadata, timeout=self._timeout)
        except grpc.aio.AioRpcError as err:
            raise error_from_rpc(err) from None

    async def write_info(self, path: str, content: str) -> FileInfo:
        """Create or replace a file; return its new size and version."""
        request = knowledge_pb2.WriteRequest(namespace=self._namespace, path=path, content=content)
        response: knowledge_pb2.WriteResponse = await self._call(self._stub().Write, request)
        return FileInfo(response.size, response.version)

    async def read_info(self, path: str) -> tuple[str, FileInfo]:
        """Return a file's content with its size and version (NotFound if missing)."""
        request = knowledge_pb2.ReadRequest(namespace=self._namespace, path=path)
        response: knowledge_pb2.ReadResponse = await self._call(self._stub().Read, request)
        return response.content, FileInfo(response.size, response.version)

    async def append_info(self, path: str, text: str) -> AppendResult:
        """Append text (creating the file); return where it landed and the new size and version."""
        request = knowledge_pb2.AppendRequest(namespace=self._namespace, path=path, text=text)
        response: knowledge_pb2.AppendResponse = await self._call(self._stub().Append, request)
        return AppendResult(response.offset, response.size, response.version)

    async def list(self, path: str) -> builtins.list[str]:
        """Immediate children of directory ``path``, sorted; directories end in "/"."""
        request = knowledge_pb2.ListRequest(namespace=self._namespace, path=path)
        response: knowledge_pb2.ListResponse = await self._call(self._stub().List, request)
        return builtins.list(response.entries)

    async def delete(self, path: str) -> None:
        """Remove a file (NotFound if missing)."""
        request = knowledge_pb2.DeleteRequest(namespace=self._namespace, path=path)
        await self._call(self._stub().Delete, request)

    async def exists(self, path: str) -> bool:
        """Whether a file exists at ``path``."""
        request = knowledge_pb2.ExistsRequest(namespace=self._namespace, path=path)
        response: knowledge_pb2.ExistsResponse = await self._call(self._stub().Exists, request)
        return response.exists

    async def read_range(self, path: str, offset: int) -> str:
        """Everything from byte ``offset`` on (OutOfRange if negative, past the end or inside a character)."""
        if offset < 0:  # the wire field is unsigned, so the server cannot be asked
            raise OutOfRange(f"offset {offset} is negative", metadata={"path": path, "offset": str(offset)})
        request = knowledge_pb2.ReadRangeRequest(namespace=self._namespace, path=path, offset=offset)
        response: knowledge_pb2.ReadRangeResponse = await self._call(self._stub().ReadRange, request)
        return response.content

    async def on_change(self, prefix: str, callback: ChangeCallback) -> Subscription:
        """Stream changes at or under ``prefix``; returns once the service confirms the watch is live."""
        request = knowledge_pb2.WatchRequest(namespace=self._namespace, prefix=prefix)
        call = self._stub().Watch(request, metadata=self._metadata)
        try:
            first = await call.read()
        except grpc.aio.AioRpcError as err:
            raise error_from_rpc(err) from None
        except BaseException:
            call.cancel()
            raise
        if first is grpc.aio.EOF or not first.subscribed:
            call.cancel()
            raise Unavailable(f"the knowledge service at {self._target} ended the watch before confirming it")
        task = asyncio.get_running_loop().create_task(self._pump(call, callback), name=f"watch {prefix}")

        async def cancel() -> None:
            self._subscriptions.discard(subscription)
            call.cancel()
            await stop_task(task)

        subscription = Subscription(cancel)
        self._subscriptions.add(subscription)
        return subscription

    async def _pump(self, call: Any, callback: ChangeCallback) -> None:
        try:
            while True:
                frame = await call.read()
                if frame is grpc.aio.EOF:
                    log.warning("the knowledge service at %s ended a watch", self._target)
                    return
                if frame.HasField("change"):
                    await deliver(callback, event_from_proto(frame.change))
        except grpc.aio.AioRpcError as err:
            if err.code() != grpc.StatusCode.CANCELLED:
                log.warning("a watch on %s ended: %s", self._target, error_from_rpc(err))

    async def close(self) -> None:
        """Cancel watches (also of namespace views) and close the connection (views: nothing to do)."""
        if self._view_root is not None:
            return
        stores: builtins.list[RemoteKnowledgeStore] = [*self._views.values(), self]
        for store in stores:
            for subscription in builtins.list(store._subscriptions):
                await subscription.cancel()
        channel, self._channel, self._stub_instance = self._channel, None, None
        if channel is not None:
            await channel.close()
