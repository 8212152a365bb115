"""What every agentnet gRPC service process shares: health checking, server
reflection, the central error boundary, logging setup and signal-driven shutdown.

Services (``hubsvc``, ``knowledgesvc``) stay thin: they build their servicers and
hand them to :func:`serve_forever`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from agentsdk.errors import AgentNetError, InternalError, error_status

log = logging.getLogger("agentnet.service")

Req = TypeVar("Req")
Resp = TypeVar("Resp")

#: Default gRPC message size limit (both directions); large enough for big WAL
#: pages and knowledge files, small enough to bound memory per request.
DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024


def configure_logging(level: str) -> None:
    """Configure root logging once, with timestamps, at ``level`` (e.g. "INFO")."""
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


async def abort_with(context: grpc.aio.ServicerContext[Any, Any], error: AgentNetError) -> None:
    """End the call with ``error``'s status code, message and ErrorInfo details."""
    await context.abort_with_status(error_status(error))


def _internal(method: str, exc: BaseException) -> InternalError:
    log.exception("unhandled error in %s", method)
    return InternalError(f"internal error in {method}: {type(exc).__name__}; nothing was changed. Report this bug.")


def unary_boundary(
    fn: Callable[[Any, Req, grpc.aio.ServicerContext[Req, Resp]], Awaitable[Resp]],
) -> Callable[[Any, Req, grpc.aio.ServicerContext[Req, Resp]], Awaitable[Resp]]:
    """Wrap a unary servicer method: domain errors become their status; bugs become INTERNAL."""

    @functools.wraps(fn)
    async def wrapper(self: Any, request: Req, context: grpc.aio.ServicerContext[Req, Resp]) -> Resp:
        try:
            return await fn(self, request, context)
        except AgentNetError as err:
            await abort_with(context, err)
        except (asyncio.CancelledError, grpc.aio.AbortError):
            raise
        except Exception as exc:
            await abort_with(context, _internal(fn.__qualname__, exc))
        raise AssertionError("unreachable: abort_with raises")  # pragma: no cover

    return wrapper


def stream_boundary(
    fn: Callable[[Any, Req, grpc.aio.ServicerContext[Req, Resp]], AsyncIterator[Resp]],
) -> Callable[[Any, Req, grpc.aio.ServicerContext[Req, Resp]], AsyncIterator[Resp]]:
    """Wrap a server-streaming (or bidi) servicer method the same way as :func:`unary_boundary`."""

    @functools.wraps(fn)
    async def wrapper(self: Any, request: Req, context: grpc.aio.ServicerContext[Req, Resp]) -> AsyncIterator[Resp]:
        try:
            async for item in fn(self, request, context):
                yield item
        except AgentNetError as err:
            await abort_with(context, err)
        except (asyncio.CancelledError, grpc.aio.AbortError):
            raise
        except Exception as exc:
            await abort_with(context, _internal(fn.__qualname__, exc))

    return wrapper


@dataclass(frozen=True)
class ServiceSpec:
    """One gRPC service to serve: its full name and the function that registers it."""

    full_name: str
    register: Callable[[grpc.aio.Server], None]


async def build_server(
    specs: Sequence[ServiceSpec],
    *,
    host: str,
    port: int,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> tuple[grpc.aio.Server, health.aio.HealthServicer, int]:
    """Create a started-ready (not yet started) aio server with health and reflection.

    Returns the server, its health servicer and the bound port (useful with port 0).
    """
    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", max_message_bytes),
            ("grpc.keepalive_time_ms", 30_000),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
            ("grpc.so_reuseport", 0),
        ]
    )
    for spec in specs:
        spec.register(server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = [spec.full_name for spec in specs]
    reflection.enable_server_reflection([*names, health.SERVICE_NAME, reflection.SERVICE_NAME], server)
    bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise OSError(f"could not bind {host}:{port}; is the port in use? Pick another with --port.")
    return server, health_servicer, bound


async def set_serving(health_servicer: health.aio.HealthServicer, names: Iterable[str], serving: bool) -> None:
    """Report SERVING / NOT_SERVING for the overall server ("") and each named service."""
    status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
    for name in ["", *names]:
        await health_servicer.set(name, status)


async def serve_forever(
    program: str,
    specs: Sequence[ServiceSpec],
    *,
    host: str,
    port: int,
    on_start: Callable[[], Awaitable[None]] | None = None,
    on_stopping: Callable[[], None] | None = None,
    on_stop: Callable[[], Awaitable[None]] | None = None,
    grace_seconds: float = 5.0,
) -> None:
    """Run the services until SIGINT or SIGTERM, then shut down cleanly.

    Prints ``<program> listening on <host>:<port>`` once serving (tests and
    scripts read the actual port from that line when started with port 0).
    Shutdown: health NOT_SERVING → ``on_stopping()`` → server stop with a grace
    period → ``on_stop()``.
    """
    if on_start is not None:
        await on_start()
    server, health_servicer, bound = await build_server(specs, host=host, port=port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await server.start()
    names = [spec.full_name for spec in specs]
    await set_serving(health_servicer, names, True)
    print(f"{program} listening on {host}:{bound}", flush=True)
    log.info("%s serving %s on %s:%d", program, ", ".join(names), host, bound)
    try:
        await stop.wait()
    finally:
        log.info("%s shutting down", program)
        await set_serving(health_servicer, names, False)
        if on_stopping is not None:
            on_stopping()  # e.g. end long-lived streams, so the grace period is not spent waiting on them
        await server.stop(grace_seconds)
        if on_stop is not None:
            await on_stop()
        log.info("%s stopped", program)


def fill_unimplemented(service: Any, note: str) -> Callable[[type], type]:
    """Class decorator: every RPC of ``service`` (a ServiceDescriptor) that the class
    does not define itself answers UNIMPLEMENTED with a message naming the RPC and
    ``note`` (what is missing), instead of grpc's bare "Method not implemented!".
    """

    def decorate(cls: type) -> type:
        for method in service.methods:
            if method.name in cls.__dict__:
                continue
            setattr(cls, method.name, _unimplemented_method(service.full_name, method, note))
        return cls

    return decorate


def _unimplemented_method(service_name: str, method: Any, note: str) -> Callable[..., Any]:
    from agentsdk.errors import Unimplemented

    message = f"{service_name}.{method.name} is not implemented by this server yet ({note})."

    if method.server_streaming:

        async def streaming(self: Any, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
            await abort_with(context, Unimplemented(message, metadata={"rpc": f"{service_name}/{method.name}"}))
            yield  # pragma: no cover - makes this an async generator

        return streaming

    async def unary(self: Any, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        await abort_with(context, Unimplemented(message, metadata={"rpc": f"{service_name}/{method.name}"}))

    return unary
