"""Calls from the same process without the network: :class:`InProcessChannel` runs a served
service's handlers directly, for a client that lives in the server's process and event loop (the AG2
gateway of ``python -m ag2embedded``, the client of ``Hub.open(in_process=True)``).

It stands in for a ``grpc.aio.Channel`` under the generated stubs, so the client code is unchanged, and
keeps a call's meaning as gRPC gives it:

* requests and responses are serialized and parsed again (the server never shares a message object
  with the client), through the same request parser as the port (:mod:`servicekit.parse_guard`) and
  the same size limits (RESOURCE_EXHAUSTED beyond them);
* the server's interceptors run (metrics, tracing); the handler runs in its own task with its own
  context variables, and sees the caller's metadata, deadline and cancellation; its peer is
  ``unix:in-process`` and it has no TLS identity (``auth_context()`` is empty);
* a failed call raises ``grpc.aio.AioRpcError`` with the status, message and trailing metadata the
  handler set; a call after the server stopped is UNAVAILABLE;
* a streamed answer waits in a buffer of at most :data:`STREAM_WINDOW_BYTES` (at least one message);
  a handler whose caller does not read blocks on its next message, as on gRPC's flow control.

What it saves is gRPC's transport: per message, the HTTP/2 framing, the completion-queue round trip
and the event-loop turns between them (bench/README.md: ``inprocess_bench``, ``ag2_bench --embedded``)."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, cast

import grpc

log = logging.getLogger(__name__)

STREAM_WINDOW_BYTES = 1024 * 1024
"""Most bytes of a stream's answers waiting for the caller to read them (at least one message waits)."""

PEER = "unix:in-process"
"""What ``context.peer()`` says of an in-process caller: written as a local socket's peer, so tools that
read gRPC peer strings (OpenTelemetry's server spans) treat it as local instead of failing to parse it."""


class Metadatum(NamedTuple):
    """One metadata item as gRPC gives a handler: a (key, value) pair with named fields."""

    key: str
    value: str | bytes


Serializer = Callable[[Any], bytes] | None
Deserializer = Callable[[bytes], Any] | None
MetadataPairs = tuple[Metadatum, ...]
Trailing = tuple[tuple[str, str | bytes], ...]


class ServedHandlers:
    """The method handlers a server registered, its interceptors and its message limit: what an
    :class:`InProcessChannel` calls. Filled while the services register (:meth:`recording`)."""

    def __init__(self, interceptors: Sequence[grpc.aio.ServerInterceptor], max_message_bytes: int) -> None:
        self.interceptors = list(interceptors)
        self.max_message_bytes = max_message_bytes
        self._generic: list[grpc.GenericRpcHandler] = []
        self._registered: dict[str, grpc.RpcMethodHandler] = {}
        self._calls: set[asyncio.Task[Any]] = set()
        self.stopped = False
        """Set once the server stopped: new calls are UNAVAILABLE."""

    def recording(self, server: grpc.aio.Server) -> grpc.aio.Server:
        """``server`` as a service's registration function sees it: what it registers is also kept here."""
        return cast(grpc.aio.Server, _Recorder(server, self))

    async def handler(self, method: str, metadata: MetadataPairs) -> grpc.RpcMethodHandler | None:
        """The handler of ``method`` (``/package.Service/Method``) after the interceptors, or None."""
        details = _CallDetails(method, metadata)
        if not self.interceptors:
            return self._find(details)

        async def at(index: int, call: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
            if index == len(self.interceptors):
                return self._find(call)
            return cast(
                grpc.RpcMethodHandler | None,
                await self.interceptors[index].intercept_service(lambda d: at(index + 1, d), call),
            )

        return await at(0, details)

    def _find(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        found = self._registered.get(cast(Any, details).method)
        if found is not None:
            return found
        for generic in self._generic:
            found = generic.service(details)
            if found is not None:
                return found
        return None

    @property
    def running(self) -> int:
        """Calls whose handler is still running."""
        return len(self._calls)

    def track(self, task: asyncio.Task[Any]) -> None:
        """Keep ``task`` (one call's handler) until it ends, so :meth:`stop` can cancel it."""
        self._calls.add(task)
        task.add_done_callback(self._calls.discard)

    def stop(self) -> None:
        """Refuse new calls and cancel those still running (after the server's own grace period)."""
        self.stopped = True
        for task in list(self._calls):
            task.cancel()


class _Recorder:
    """Stands in for a ``grpc.aio.Server`` while generated ``add_*Servicer_to_server`` code registers."""

    def __init__(self, server: grpc.aio.Server, table: ServedHandlers) -> None:
        self._server = server
        self._table = table

    def add_generic_rpc_handlers(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        self._table._generic.extend(handlers)
        self._server.add_generic_rpc_handlers(handlers)

    def add_registered_method_handlers(self, service: str, handlers: Mapping[str, grpc.RpcMethodHandler]) -> None:
        self._table._registered.update({f"/{service}/{name}": h for name, h in handlers.items()})
        self._server.add_registered_method_handlers(service, handlers)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._server, name)


class _CallDetails(grpc.HandlerCallDetails):  # type: ignore[misc]  # grpc has no stubs
    def __init__(self, method: str, metadata: MetadataPairs) -> None:
        self.method = method
        self.invocation_metadata = metadata


class _Status(Exception):
    """A call's end other than OK, on its way to the caller as an ``AioRpcError``."""

    def __init__(self, code: grpc.StatusCode, details: str, trailing: Trailing = ()) -> None:
        super().__init__(details)
        self.code = code
        self.details = details
        self.trailing = trailing

    def rpc_error(self) -> grpc.aio.AioRpcError:
        return grpc.aio.AioRpcError(
            self.code, grpc.aio.Metadata(), grpc.aio.Metadata(*self.trailing), self.details, None
        )


class _Context:
    """The ``grpc.aio.ServicerContext`` a handler gets: the caller's metadata and deadline, the status
    the handler sets, and (for a streamed answer written with ``write``) where its messages go."""

    def __init__(self, metadata: MetadataPairs, deadline: float | None) -> None:
        self._metadata = metadata
        self._deadline = deadline
        self._code = grpc.StatusCode.OK
        self._details = ""
        self._trailing: Trailing = ()
        self.writer: Callable[[Any], Awaitable[None]] | None = None

    def invocation_metadata(self) -> MetadataPairs:
        return self._metadata

    def peer(self) -> str:
        return PEER

    def auth_context(self) -> dict[str, list[bytes]]:
        return {}

    def time_remaining(self) -> float | None:
        return None if self._deadline is None else max(0.0, self._deadline - asyncio.get_running_loop().time())

    def set_code(self, code: grpc.StatusCode) -> None:
        self._code = code

    def set_details(self, details: str) -> None:
        self._details = details

    def set_trailing_metadata(self, metadata: Iterable[tuple[str, str | bytes]]) -> None:
        self._trailing = tuple(metadata)

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> Trailing:
        return self._trailing

    async def send_initial_metadata(self, metadata: Iterable[tuple[str, str | bytes]]) -> None:
        """Initial metadata does not reach an in-process caller."""

    async def abort(
        self, code: grpc.StatusCode, details: str = "", trailing_metadata: Iterable[tuple[str, str | bytes]] = ()
    ) -> None:
        self._code, self._details, self._trailing = code, details, tuple(trailing_metadata)
        raise grpc.aio.AbortError()

    async def abort_with_status(self, status: grpc.Status) -> None:
        await self.abort(status.code, status.details, status.trailing_metadata)

    async def write(self, message: Any) -> None:
        if self.writer is None:
            raise RuntimeError("write() is for a handler that streams its answer")
        await self.writer(message)

    def status(self) -> _Status | None:
        """The call's end as the handler set it (None: OK)."""
        if self._code == grpc.StatusCode.OK:
            return None
        return _Status(self._code, self._details, self._trailing)


def _unexpected(exc: BaseException) -> _Status:
    log.exception("in-process call failed", exc_info=exc)
    return _Status(grpc.StatusCode.UNKNOWN, f"Unexpected {type(exc).__name__}: {exc}")


def _encode(serializer: Serializer, message: Any, limit: int, what: str) -> bytes:
    body = message if serializer is None else serializer(message)
    if len(body) > limit:
        raise _Status(grpc.StatusCode.RESOURCE_EXHAUSTED, f"{what} message larger than max ({len(body)} vs. {limit})")
    return cast(bytes, body)


def _decode(deserializer: Deserializer, body: bytes) -> Any:
    return body if deserializer is None else deserializer(body)


class _Window:
    """A streamed answer's messages on their way to the caller: at most ``limit`` bytes wait."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._items: deque[bytes] = deque()
        self._bytes = 0
        self._readable = asyncio.Event()
        self._writable = asyncio.Event()
        self._ended = False

    async def put(self, body: bytes) -> None:
        while self._items and self._bytes + len(body) > self._limit:
            self._writable.clear()
            await self._writable.wait()
        self._items.append(body)
        self._bytes += len(body)
        self._readable.set()

    def end(self) -> None:
        self._ended = True
        self._readable.set()

    async def get(self) -> bytes | None:
        """The next message; None once the stream ended and every message was read."""
        while not self._items:
            if self._ended:
                return None
            self._readable.clear()
            await self._readable.wait()
        body = self._items.popleft()
        self._bytes -= len(body)
        self._writable.set()
        return body


class _Exchange:
    """The server's side of one call: the handler's task and what it reads and writes. The caller's
    :class:`_Call` holds it, never the other way round, so a call the caller dropped can be cancelled."""

    def __init__(
        self,
        table: ServedHandlers,
        method: str,
        serializer: Serializer,
        metadata: MetadataPairs,
        deadline: float | None,
    ) -> None:
        self.table = table
        self.method = method
        self.serializer = serializer
        self.metadata = metadata
        self.deadline = deadline
        self.window = _Window(STREAM_WINDOW_BYTES)
        self.task: asyncio.Task[Any] | None = None

    def cancel(self) -> None:
        if self.task is not None:
            self.task.cancel()

    async def serve(self, request: Any, streaming_request: bool) -> Any:
        """Run the handler; returns a unary answer's bytes, raises :class:`_Status`."""
        try:
            async with asyncio.timeout_at(self.deadline):
                return await self._handle(request, streaming_request)
        except TimeoutError:
            raise _Status(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded") from None

    async def _handle(self, request: Any, streaming_request: bool) -> bytes | None:
        table = self.table
        if table.stopped:
            raise _Status(grpc.StatusCode.UNAVAILABLE, "the in-process server has stopped")
        handler = cast(Any, await table.handler(self.method, self.metadata))
        if handler is None:
            raise _Status(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")
        limit = table.max_message_bytes
        context = _Context(self.metadata, self.deadline)
        if streaming_request:
            requests: Any = self._requests(request, handler.request_deserializer, limit)
        else:
            requests = _decode(handler.request_deserializer, _encode(self.serializer, request, limit, "Sent"))
        serialize = handler.response_serializer

        async def write(message: Any) -> None:
            await self.window.put(_encode(serialize, message, limit, "Received"))

        context.writer = write
        response = None
        try:
            if handler.response_streaming:
                behavior = handler.stream_stream if handler.request_streaming else handler.unary_stream
                answer = behavior(requests, context)
                if inspect.isasyncgen(answer):
                    async for message in answer:
                        await write(message)
                else:
                    await answer
            else:
                behavior = handler.stream_unary if handler.request_streaming else handler.unary_unary
                response = await behavior(requests, context)
        except grpc.aio.AbortError:
            pass
        except (_Status, asyncio.CancelledError):
            raise
        except Exception as exc:
            raise _unexpected(exc) from None
        status = context.status()
        if status is not None:
            raise status
        return None if handler.response_streaming else _encode(serialize, response, limit, "Received")

    async def _requests(self, source: Any, deserializer: Deserializer, limit: int) -> AsyncIterator[Any]:
        """The caller's request stream as the handler reads it: each message serialized and parsed again."""
        try:
            if isinstance(source, AsyncIterable):
                async for message in source:
                    yield _decode(deserializer, _encode(self.serializer, message, limit, "Sent"))
            else:
                for message in source:
                    yield _decode(deserializer, _encode(self.serializer, message, limit, "Sent"))
        except (asyncio.CancelledError, GeneratorExit, _Status):
            raise
        except Exception:  # as grpc.aio does: the caller's iterator failed, so the call is cancelled
            log.exception("the request iterator of an in-process call raised; the call is cancelled")
            self.cancel()
            raise asyncio.CancelledError() from None


class _Call:
    """One call as the caller holds it: await it (unary answer) or iterate it (streamed answers);
    :meth:`cancel` ends it, and so does dropping it while it runs."""

    def __init__(
        self,
        table: ServedHandlers,
        method: str,
        request: Any,
        streaming_request: bool,
        serializer: Serializer,
        deserializer: Deserializer,
        metadata: Any,
        timeout: float | None,
    ) -> None:
        loop = asyncio.get_running_loop()
        pairs: MetadataPairs = tuple(Metadatum(str(k), v) for k, v in (metadata or ()))
        deadline = None if timeout is None else loop.time() + timeout
        self._exchange = exchange = _Exchange(table, method, serializer, pairs, deadline)
        self._deserializer = deserializer
        self._cancelled = False
        self._task = exchange.task = loop.create_task(
            exchange.serve(request, streaming_request), context=contextvars.Context()
        )
        self._task.add_done_callback(_ended(exchange.window))
        table.track(self._task)

    def cancel(self) -> bool:
        """End the call (its handler is cancelled); False once it ended."""
        if self._task.done():
            return False
        self._cancelled = True
        self._task.cancel()
        return True

    def done(self) -> bool:
        """Whether the call ended."""
        return self._task.done()

    def __del__(self) -> None:
        if not self._task.done():  # dropped while running: as grpc.aio, the call is cancelled
            self._task.cancel()

    async def _outcome(self) -> Any:
        try:
            body = await asyncio.shield(self._task)
        except _Status as status:
            raise status.rpc_error() from None
        except asyncio.CancelledError:
            if self._cancelled:
                raise  # cancelled here: as grpc.aio, the caller sees CancelledError
            if not self._task.cancelled():
                self.cancel()  # the caller was cancelled: so is the call
                raise
            raise _Status(grpc.StatusCode.UNAVAILABLE, "the in-process server stopped the call").rpc_error() from None
        return None if body is None else _decode(self._deserializer, body)

    def __await__(self) -> Any:
        return self._outcome().__await__()

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._messages()

    async def _messages(self) -> AsyncIterator[Any]:
        while (body := await self._exchange.window.get()) is not None:
            yield _decode(self._deserializer, body)
        await self._outcome()


def _ended(window: _Window) -> Callable[[asyncio.Task[Any]], None]:
    def end(task: asyncio.Task[Any]) -> None:
        window.end()
        if not task.cancelled():
            task.exception()  # seen: a caller that stopped reading a failed stream is not an error to log

    return end


class _Method:
    """A stub's method: each call starts a :class:`_Call`."""

    def __init__(
        self,
        table: ServedHandlers,
        method: str,
        streaming_request: bool,
        request_serializer: Serializer,
        response_deserializer: Deserializer,
    ) -> None:
        self._table = table
        self._method = method
        self._streaming_request = streaming_request
        self._serializer = request_serializer
        self._deserializer = response_deserializer

    def __call__(self, request: Any, *, timeout: float | None = None, metadata: Any = None, **_options: Any) -> _Call:
        return _Call(
            self._table,
            self._method,
            request,
            self._streaming_request,
            self._serializer,
            self._deserializer,
            metadata,
            timeout,
        )


class InProcessChannel:
    """A ``grpc.aio.Channel`` look-alike serving every call from ``handlers`` (a running server's,
    :attr:`servicekit.runtime.RunningServer.handlers`) in this process: give it to a generated stub."""

    def __init__(self, handlers: ServedHandlers) -> None:
        self._handlers = handlers

    def _method(self, method: str, streaming_request: bool, **kwargs: Any) -> _Method:
        return _Method(
            self._handlers,
            method,
            streaming_request,
            kwargs.get("request_serializer"),
            kwargs.get("response_deserializer"),
        )

    def unary_unary(self, method: str, **kwargs: Any) -> _Method:
        """A unary method (awaiting the call gives the response)."""
        return self._method(method, False, **kwargs)

    def unary_stream(self, method: str, **kwargs: Any) -> _Method:
        """A server-streaming method (iterating the call gives the responses)."""
        return self._method(method, False, **kwargs)

    def stream_unary(self, method: str, **kwargs: Any) -> _Method:
        """A client-streaming method (called with an iterator of requests)."""
        return self._method(method, True, **kwargs)

    def stream_stream(self, method: str, **kwargs: Any) -> _Method:
        """A bidirectional method (called with an iterator of requests; iterate the call)."""
        return self._method(method, True, **kwargs)

    async def close(self, grace: float | None = None) -> None:
        """Nothing to release: the calls belong to the server, which ends them when it stops."""

    async def __aenter__(self) -> InProcessChannel:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
