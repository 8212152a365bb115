"""Serving Prometheus metrics over HTTP (``--metrics-port``), shared by both services.

Each service keeps its metrics in its own ``CollectorRegistry`` (so several services in
one process, as in the tests, never mix their counts) and serves it with
:func:`start_metrics_server`: a small HTTP/1.1 server on the service's own event loop that
answers ``GET /metrics`` (and ``HEAD``) with the text exposition format. Running on the
event loop rather than in a thread means the collectors that read live state at scrape
time (queue depths, connected streams) read it between two steps of the service, never
in the middle of one. The server is off unless a port is given; it binds loopback unless
``--metrics-host`` says otherwise (docs/security.md "Metrics").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import grpc
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, generate_latest

from netkernel.options import OptionSpec, Range, add_options, check_args, named_specs, option, prefixed

log = logging.getLogger("agentnet.metrics")

DEFAULT_METRICS_HOST = "127.0.0.1"
_MAX_REQUEST_BYTES = 8192
"""Longest request head (request line and headers) the server reads; longer is answered 431."""
_READ_TIMEOUT = 10.0
"""Seconds a client may take to send its request head."""


@dataclass(frozen=True)
class MetricsSettings:
    """Where a service serves its metrics (``port`` 0 = a free port; the flag's 0 means no metrics at all)."""

    port: int = 0
    host: str = DEFAULT_METRICS_HOST


@dataclass(frozen=True)
class MetricsFlags:
    """The flags of the metrics endpoint, shared by the services: each variable is the service's prefix
    and the name given here (``AGENTNET_HUB_METRICS_PORT``)."""

    metrics_port: int = option(
        0,
        "--metrics-port",
        "METRICS_PORT",
        "serve Prometheus metrics on http://HOST:PORT/metrics (0 = off)",
        check=Range(0, 65535, "[]", why=" (0 = off)"),
    )
    metrics_host: str = option(
        DEFAULT_METRICS_HOST,
        "--metrics-host",
        "METRICS_HOST",
        "address the metrics endpoint binds; loopback unless you mean to expose it",
    )


def metrics_option_specs(env_prefix: str) -> list[tuple[str, OptionSpec]]:
    """The :class:`MetricsFlags` as the service with variables under ``env_prefix`` declares them."""
    return prefixed(named_specs(MetricsFlags), env_prefix)


def add_metrics_arguments(parser: argparse.ArgumentParser, env_prefix: str) -> None:
    """Add ``--metrics-port`` and ``--metrics-host`` (:class:`MetricsFlags`; environment
    ``<env_prefix>METRICS_PORT`` / ``_HOST``)."""
    add_options(parser, metrics_option_specs(env_prefix), MetricsFlags())


def metrics_from_args(
    parser: argparse.ArgumentParser, args: argparse.Namespace, env_prefix: str
) -> MetricsSettings | None:
    """The :class:`MetricsSettings` of parsed arguments; None when ``--metrics-port`` is 0 (off).
    A port outside 0..65535 is a usage error naming the flag and its variable."""
    check_args(parser, args, metrics_option_specs(env_prefix))
    return MetricsSettings(port=args.metrics_port, host=args.metrics_host) if args.metrics_port else None


class MetricsServer:
    """A started metrics endpoint; :meth:`stop` closes it."""

    def __init__(self, server: asyncio.Server, host: str, port: int) -> None:
        self._server = server
        self.host = host
        self.port = port
        """The bound port (the real one when 0 asked for a free port)."""

    @property
    def url(self) -> str:
        """``http://host:port/metrics``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    async def stop(self) -> None:
        """Stop accepting and close open connections."""
        self._server.close()
        await self._server.wait_closed()


async def start_metrics_server(registry: CollectorRegistry, host: str, port: int) -> MetricsServer:
    """Serve ``registry`` on ``http://host:port/metrics`` (port 0 = a free one) on this event loop."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            status, body, content_type = await _answer(reader, registry)
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n".encode("ascii")
            )
            writer.write(body)
            await writer.drain()
        except (ConnectionError, TimeoutError, asyncio.IncompleteReadError):
            pass
        except Exception:
            log.exception("metrics request failed")
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    server = await asyncio.start_server(handle, host, port, reuse_address=True, limit=_MAX_REQUEST_BYTES)
    bound = server.sockets[0].getsockname()[1]
    return MetricsServer(server, host, bound)


async def _answer(reader: asyncio.StreamReader, registry: CollectorRegistry) -> tuple[str, bytes, str]:
    """(status line, body, content type) for one request read from ``reader``."""
    text = "text/plain; charset=utf-8"
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _READ_TIMEOUT)
    except asyncio.LimitOverrunError:
        return "431 Request Header Fields Too Large", b"request head too large\n", text
    if len(head) > _MAX_REQUEST_BYTES:
        return "431 Request Header Fields Too Large", b"request head too large\n", text
    parts = head.split(b"\r\n", 1)[0].split()
    if len(parts) != 3:
        return "400 Bad Request", b"malformed request line\n", text
    method, target = parts[0], parts[1].split(b"?", 1)[0]
    if target != b"/metrics":
        return "404 Not Found", b"metrics are served at /metrics\n", text
    if method not in (b"GET", b"HEAD"):
        return "405 Method Not Allowed", b"use GET /metrics\n", text
    body = generate_latest(registry)
    return "200 OK", b"" if method == b"HEAD" else body, CONTENT_TYPE_LATEST


class RpcCounter(grpc.aio.ServerInterceptor):  # type: ignore[misc]  # grpc.aio has no stubs
    """Counts each call the server has a handler for in ``counter`` (labelled ``method``: the full
    method name, e.g. ``/agentnet.v1.OperatorService/ListChannels``) as it starts; a call of an
    unknown method is not counted, so the label's values are bounded by the services served."""

    def __init__(self, counter: Counter) -> None:
        self._counter = counter
        self._children: dict[str, Counter] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        """Count the call when a handler serves it."""
        handler = await continuation(handler_call_details)
        if handler is not None:
            method: str = handler_call_details.method
            child = self._children.get(method)
            if child is None:
                child = self._children[method] = self._counter.labels(method=method)
            child.inc()
        return handler
