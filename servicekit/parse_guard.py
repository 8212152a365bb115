"""Requests that are not the message they should be: INVALID_ARGUMENT, never INTERNAL or UNKNOWN.

gRPC parses each request frame with the method's ``request_deserializer`` before (unary) or while
(streams) the handler runs. Bytes that do not parse raise ``DecodeError``, which grpc.aio answers
``UNKNOWN`` ("Unexpected ...") for a unary request and our boundary ``INTERNAL`` ("Report this bug")
for a frame read by a streaming handler. :func:`guarded` registers a service with every request
deserializer guarded instead:

* a unary request that does not parse is answered ``INVALID_ARGUMENT`` naming the message type,
  before the handler is called (the handler never sees it);
* a frame of a client stream that does not parse raises :class:`~netkernel.errors.InvalidArgument`
  where the handler reads it, so the handler's error boundary ends the stream with it.

The guard is installed once, when a service is registered (:func:`servicekit.runtime.start_server`
and the A2A gateway's gRPC server): no interceptor, nothing per call but a ``try`` around the parse
and telling :data:`servicekit.heap.TRIMMER` the request's size (a large one is followed by a trim
of the C heap).
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, cast

import grpc
from google.protobuf.message import DecodeError

from netkernel.errors import InvalidArgument
from servicekit.boundary import end_with
from servicekit.heap import TRIMMER

Deserializer = Callable[[bytes], Any]


class Unparsable:
    """What a guarded unary request deserializer returns for bytes that do not parse."""

    __slots__ = ("error",)

    def __init__(self, error: InvalidArgument) -> None:
        self.error = error


def _type_name(deserializer: Deserializer) -> str:
    """The full name of the message ``deserializer`` parses (``Message.FromString``), or "the request"."""
    owner = getattr(deserializer, "__self__", None)
    descriptor = getattr(owner, "DESCRIPTOR", None)
    return str(getattr(descriptor, "full_name", "")) or "the request"


def unparsable(type_name: str, err: Exception) -> InvalidArgument:
    """The refusal of a frame that does not parse as ``type_name``."""
    detail = str(err).rpartition(": ")[2] or type(err).__name__  # protobuf's text names the type again
    return InvalidArgument(
        f"a frame could not be parsed as {type_name} ({detail}): send a serialized {type_name}, as the "
        "generated stubs in gen/ do (the frame was not read; nothing was changed).",
        metadata={"message_type": type_name},
    )


def _stream_parser(deserializer: Deserializer) -> Deserializer:
    name = _type_name(deserializer)

    def parse(data: bytes) -> Any:
        TRIMMER.note(len(data))
        try:
            return deserializer(data)
        except DecodeError as err:
            raise unparsable(name, err) from None

    return parse


def _unary_parser(deserializer: Deserializer) -> Deserializer:
    name = _type_name(deserializer)

    def parse(data: bytes) -> Any:
        TRIMMER.note(len(data))
        try:
            return deserializer(data)
        except DecodeError as err:
            return Unparsable(unparsable(name, err))

    return parse


def _guard_unary_request(behavior: Callable[..., Any]) -> Callable[..., Any]:
    """``behavior`` (unary request) refusing an :class:`Unparsable` request; same kind of callable,
    as grpc.aio picks how to run a handler by it."""
    if inspect.isasyncgenfunction(behavior):

        async def stream(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
            if isinstance(request, Unparsable):
                end_with(context, request.error)
                return
            async for item in behavior(request, context):
                yield item

        return stream

    async def call(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        if isinstance(request, Unparsable):
            end_with(context, request.error)
            return None
        return await behavior(request, context)

    return call


def guard(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """``handler`` with its request deserializer guarded (as it is when it has none, or is not async)."""
    h = cast(Any, handler)
    deserializer = h.request_deserializer
    if deserializer is None:
        return handler
    if h.request_streaming:
        return cast(grpc.RpcMethodHandler, h._replace(request_deserializer=_stream_parser(deserializer)))
    behavior = h.unary_stream if h.response_streaming else h.unary_unary
    if not (inspect.iscoroutinefunction(behavior) or inspect.isasyncgenfunction(behavior)):
        return handler  # a sync handler runs on the thread pool; none of ours is one
    wrapped = _guard_unary_request(behavior)
    field = "unary_stream" if h.response_streaming else "unary_unary"
    return cast(grpc.RpcMethodHandler, h._replace(request_deserializer=_unary_parser(deserializer), **{field: wrapped}))


class _GuardedGeneric(grpc.GenericRpcHandler):  # type: ignore[misc]  # grpc has no stubs
    """A generic handler whose method handlers are guarded (each once, on first use)."""

    def __init__(self, inner: grpc.GenericRpcHandler) -> None:
        self._inner = inner
        self._guarded: dict[str, grpc.RpcMethodHandler | None] = {}

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        method = cast(Any, handler_call_details).method
        if method not in self._guarded:
            found = self._inner.service(handler_call_details)
            self._guarded[method] = None if found is None else guard(found)
        return self._guarded[method]


class _GuardingRegistrar:
    """Stands in for a ``grpc.aio.Server`` while generated ``add_*Servicer_to_server`` code registers."""

    def __init__(self, server: grpc.aio.Server) -> None:
        self._server = server

    def add_generic_rpc_handlers(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        self._server.add_generic_rpc_handlers(tuple(_GuardedGeneric(h) for h in handlers))

    def add_registered_method_handlers(self, service: str, handlers: Mapping[str, grpc.RpcMethodHandler]) -> None:
        self._server.add_registered_method_handlers(service, {name: guard(h) for name, h in handlers.items()})

    def __getattr__(self, name: str) -> Any:
        return getattr(self._server, name)


def guarded(server: grpc.aio.Server) -> grpc.aio.Server:
    """``server`` as seen by a service's registration function: what it registers is guarded."""
    return cast(grpc.aio.Server, _GuardingRegistrar(server))
