"""What every agentnet gRPC service process shares: the server factory (health checking,
server reflection, message limits), logging setup and signal-driven shutdown.

Each service has one ``start_*`` function built on :func:`start_server` (``hubsvc.server``,
``knowledgesvc.server``), used alike by its ``__main__``, the SDK's embedded hub and the tests.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from prometheus_client import CollectorRegistry

from servicekit.grpc_logs import quiet_client_departures
from servicekit.inprocess import ServedHandlers
from servicekit.metrics import MetricsServer, MetricsSettings, start_metrics_server
from servicekit.parse_guard import guarded
from servicekit.reflection import enable_reflection
from servicekit.tls import CertificateReloader, ServerTls, server_credentials

log = logging.getLogger("agentnet.service")


class PortUnavailable(OSError):
    """A service's gRPC or metrics port cannot be bound (the message names the flag to change)."""


#: Calls gRPC core may hold before the server's (single-threaded, Python) request loop picks them
#: up. Core's defaults (1,000 soft / 3,000 hard) cancel a growing share of a burst beyond the soft
#: limit — the clients see INTERNAL ('Failed "execute_batch"') or CANCELLED and the service logs
#: nothing; a hub restart with thousands of agents reconnecting is exactly such a burst.
MAX_PENDING_CALLS = 20_000

#: Default gRPC message size limit (both directions); large enough for big WAL
#: pages and knowledge files, small enough to bound memory per request.
DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024


def configure_logging(level: str) -> None:
    """Configure root logging once, with timestamps, at ``level`` (e.g. "INFO")."""
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


@dataclass(frozen=True)
class ServiceSpec:
    """One gRPC service to serve: its full name and the function that registers it."""

    full_name: str
    register: Callable[[grpc.aio.Server], None]


def server_options(max_message_bytes: int) -> list[tuple[str, int]]:
    """Channel arguments every agentnet server runs with: message limits and keepalive policy."""
    return [
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.keepalive_time_ms", 30_000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
        ("grpc.so_reuseport", 0),
        ("grpc.server.max_pending_requests", MAX_PENDING_CALLS),
        ("grpc.server.max_pending_requests_hard_limit", MAX_PENDING_CALLS),
    ]


@dataclass
class RunningServer:
    """A started gRPC server with health checking and server reflection."""

    server: grpc.aio.Server
    health: health.aio.HealthServicer
    port: int
    """The bound port (the real one when started with port 0)."""
    names: list[str]
    """Full names of the services served (health reports each)."""
    handlers: ServedHandlers
    """What the server serves, for calls from this process (:class:`servicekit.inprocess.InProcessChannel`)."""
    tls: CertificateReloader | None = None
    """The certificate reloader when serving TLS (None: plaintext)."""
    metrics_server: MetricsServer | None = None
    """The service's Prometheus endpoint (None: metrics are off); stopped with the server."""

    async def stop(self, grace_seconds: float, *, on_stopping: Callable[[], None] | None = None) -> None:
        """Report NOT_SERVING, call ``on_stopping`` (e.g. end long-lived streams, so the grace
        period is not spent waiting on them), then stop, letting calls in progress finish
        within the grace period; then close the metrics endpoint."""
        await set_serving(self.health, self.names, False)
        if on_stopping is not None:
            on_stopping()
        await self.server.stop(grace_seconds)
        self.handlers.stop()
        if self.metrics_server is not None:
            await self.metrics_server.stop()


def host_port(host: str, port: int) -> str:
    """``host:port`` as gRPC targets and bind addresses write it: an IPv6 literal in brackets."""
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


async def start_server(
    specs: Sequence[ServiceSpec],
    *,
    host: str,
    port: int,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    tls: ServerTls | None = None,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    metrics: tuple[CollectorRegistry, MetricsSettings] | None = None,
) -> RunningServer:
    """The one way an agentnet service is served: register ``specs`` plus health and
    reflection on a server with :func:`server_options`, bind ``host:port`` (0 = a free
    port), start it and report SERVING.

    With ``tls`` the port serves TLS (mTLS with a client CA) and follows certificate files
    replaced on disk (:mod:`servicekit.tls`); unusable files raise ``TlsConfigError`` before
    anything is bound. ``interceptors`` wrap every call (the tracing of servicekit/tracing.py).
    ``metrics`` (a registry and where to serve it) starts the Prometheus endpoint first
    (:mod:`servicekit.metrics`); it is closed again if the gRPC port cannot be served, and by
    :meth:`RunningServer.stop`."""
    credentials, reloader = server_credentials(tls) if tls is not None else (None, None)
    metrics_server = None
    if metrics is not None:
        registry, settings = metrics
        try:
            metrics_server = await start_metrics_server(registry, settings.host, settings.port)
        except OSError as err:
            raise PortUnavailable(
                f"could not serve metrics on {settings.host}:{settings.port} ({err.strerror or err}); is the port "
                "in use? Pick another with --metrics-port."
            ) from None
        log.info("metrics served on %s", metrics_server.url)
    try:
        return await _start_grpc(
            specs, host, port, max_message_bytes, credentials, reloader, interceptors, metrics_server
        )
    except BaseException:
        if metrics_server is not None:
            await metrics_server.stop()
        raise


async def _start_grpc(
    specs: Sequence[ServiceSpec],
    host: str,
    port: int,
    max_message_bytes: int,
    credentials: grpc.ServerCredentials | None,
    reloader: CertificateReloader | None,
    interceptors: Sequence[grpc.aio.ServerInterceptor],
    metrics_server: MetricsServer | None,
) -> RunningServer:
    quiet_client_departures()  # a client cancelling a stream mid-send is DEBUG, not an ERROR traceback
    server = grpc.aio.server(options=server_options(max_message_bytes), interceptors=list(interceptors) or None)
    handlers = ServedHandlers(interceptors, max_message_bytes)  # also served in process (servicekit/inprocess.py)
    registrar = guarded(handlers.recording(server))  # a request that does not parse is INVALID_ARGUMENT
    for spec in specs:
        spec.register(registrar)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, registrar)
    names = [spec.full_name for spec in specs]
    enable_reflection([*names, health.SERVICE_NAME], server)
    address = host_port(host, port)
    try:  # grpc reports a port it cannot bind as 0 or, in newer releases, with a RuntimeError
        bound = (
            server.add_insecure_port(address) if credentials is None else server.add_secure_port(address, credentials)
        )
    except RuntimeError:
        bound = 0
    if bound == 0:
        raise PortUnavailable(f"could not bind {host}:{port}; is the port in use? Pick another with --port.")
    await server.start()
    running = RunningServer(server, health_servicer, bound, names, handlers, reloader, metrics_server)
    await set_serving(health_servicer, names, True)
    return running


async def set_serving(health_servicer: health.aio.HealthServicer, names: Iterable[str], serving: bool) -> None:
    """Report SERVING / NOT_SERVING for the overall server ("") and each named service."""
    status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
    for name in ["", *names]:
        await health_servicer.set(name, status)


class Served(Protocol):
    """A started service: its gRPC server, and how to stop the service as a whole."""

    running: RunningServer

    async def stop(self, grace_seconds: float = ...) -> None:
        """Stop serving and release the service's resources."""


async def announce_and_wait(announcement: str) -> None:
    """Print ``announcement`` (a process's "listening" line), then return once SIGINT or SIGTERM arrives.

    The handlers are installed before the line is printed: a signal sent right after a test or
    script reads it is caught."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(announcement, flush=True)
    await stop.wait()


async def serve_until_signal(program: str, host: str, served: Served) -> None:
    """Announce ``served``, wait for SIGINT or SIGTERM, then stop it cleanly.

    Prints ``<program> listening on <host>:<port>`` once serving (tests and scripts read
    the actual port from that line when started with port 0).
    """
    running = served.running
    security = "plaintext" if running.tls is None else "TLS"
    log.info("%s serving %s on %s:%d (%s)", program, ", ".join(running.names), host, running.port, security)
    try:
        await announce_and_wait(f"{program} listening on {host}:{running.port}")
    finally:
        log.info("%s shutting down", program)
        await served.stop()
        log.info("%s stopped", program)
