"""OpenTelemetry tracing of the services, configured by the standard ``OTEL_*`` variables.

Off by default: without ``OTEL_TRACES_EXPORTER`` (or with ``none``) :func:`tracer_provider_from_env`
returns None, the services are built without a tracer and record no spans at all. With
``OTEL_TRACES_EXPORTER=otlp`` spans go to an OTLP/gRPC collector (``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, ``OTEL_EXPORTER_OTLP_HEADERS``, … read by the exporter
itself), with ``console`` to standard output; the sampler follows ``OTEL_TRACES_SAMPLER`` /
``OTEL_TRACES_SAMPLER_ARG`` and the service's name ``OTEL_SERVICE_NAME`` (default
``agentnet-hub`` / ``agentnet-knowledge``). :func:`server_interceptors` adds a server span per
unary RPC (the gRPC instrumentation, parent from the caller's ``traceparent`` metadata); the
long-lived streams are left out — a post inside a ``Connect`` stream carries its context in
the envelope's ``trace_id`` instead (netkernel/tracecontext.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

import grpc
from opentelemetry import trace

if TYPE_CHECKING:  # the SDK is loaded only when tracing is on (it costs every service start ~50 ms)
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

__all__ = ["STREAMING_METHODS", "server_interceptors", "tracer_provider_from_env"]

STREAMING_METHODS = ("Connect", "ReadWal", "Watch")
"""Long-lived streaming RPCs that get no RPC span (one span for a whole stream says nothing)."""


def tracer_provider_from_env(service_name: str, env: Mapping[str, str] | None = None) -> TracerProvider | None:
    """A tracer provider exporting as ``OTEL_TRACES_EXPORTER`` says, or None when tracing is off.

    ValueError names an exporter or protocol this build cannot serve."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    names = [n.strip().lower() for n in env.get("OTEL_TRACES_EXPORTER", "").split(",") if n.strip()]
    names = [n for n in names if n != "none"]
    if not names:
        return None
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    exporters = [_exporter(name, env) for name in names]
    attributes = {} if env.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: service_name}
    provider = TracerProvider(resource=Resource.create(attributes))  # the sampler comes from OTEL_TRACES_SAMPLER
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def _exporter(name: str, env: Mapping[str, str]) -> SpanExporter:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if name != "otlp":
        raise ValueError(f"OTEL_TRACES_EXPORTER={name!r} is not supported; use otlp, console or none")
    protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "grpc"
    if protocol != "grpc":
        raise ValueError(
            f"OTLP protocol {protocol!r} is not supported; this build exports OTLP over gRPC: set "
            "OTEL_EXPORTER_OTLP_PROTOCOL=grpc (or leave it unset) and point OTEL_EXPORTER_OTLP_ENDPOINT at the "
            "collector's gRPC port (4317)"
        )
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def server_interceptors(provider: trace.TracerProvider | None) -> list[grpc.aio.ServerInterceptor]:
    """The gRPC server interceptors of a traced service (none when ``provider`` is None)."""
    if provider is None:
        return []
    # The gRPC instrumentation (and the packaging / wrapt / semconv modules it pulls in) loads only for a traced
    # service: an untraced hub or knowledge service starts ~0.1 s of CPU sooner, and the tests start hundreds.
    from opentelemetry.instrumentation.grpc import aio_server_interceptor, filters

    skip = filters.any_of(*(filters.method_name(name) for name in STREAMING_METHODS))
    interceptor: grpc.aio.ServerInterceptor = aio_server_interceptor(  # type: ignore[no-untyped-call]
        tracer_provider=provider, filter_=filters.negate(skip)
    )
    return [interceptor]
