"""The one way the knowledge service is served: servicer over an opened store + the shared
server factory. ``python -m knowledgesvc`` and the tests both call :func:`start_knowledge`."""

from __future__ import annotations

from dataclasses import dataclass

from agentnet.v1 import knowledge_pb2_grpc
from opentelemetry.trace import TracerProvider

from knowledgestore.base import StoreBase
from knowledgesvc.auth import TokenAuthority
from knowledgesvc.metrics import KnowledgeMetrics, backend_name
from knowledgesvc.servicer import (
    KNOWLEDGE_SERVICE,
    READ_BUDGET_BYTES,
    READ_MANY_MAX_BYTES,
    READ_MANY_MAX_ITEMS,
    WATCH_BACKLOG,
    KnowledgeServicer,
)
from servicekit.metrics import MetricsServer, MetricsSettings
from servicekit.runtime import DEFAULT_MAX_MESSAGE_BYTES, RunningServer, ServiceSpec, start_server
from servicekit.tls import ServerTls
from servicekit.tracing import server_interceptors


@dataclass
class KnowledgeServer:
    """A started knowledge service (the store stays the caller's to close)."""

    running: RunningServer
    host: str
    servicer: KnowledgeServicer
    """The servicer (its ``read_budget`` shows what concurrent reads hold)."""
    metrics: KnowledgeMetrics | None = None
    """The service's metrics (None: not served)."""

    @property
    def metrics_server(self) -> MetricsServer | None:
        """Where the metrics are served (``metrics_server.url``; None: not served)."""
        return self.running.metrics_server

    @property
    def target(self) -> str:
        """``host:port`` clients connect to."""
        return f"{self.host}:{self.running.port}"

    async def stop(self, grace_seconds: float = 5.0) -> None:
        """Report NOT_SERVING and stop within the grace period."""
        await self.running.stop(grace_seconds)


async def start_knowledge(
    store: StoreBase,
    authority: TokenAuthority,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    max_write_bytes: int = 8 * 1024 * 1024,
    watch_backlog: int = WATCH_BACKLOG,
    read_budget_bytes: int = READ_BUDGET_BYTES,
    read_many_max_items: int = READ_MANY_MAX_ITEMS,
    read_many_max_bytes: int = READ_MANY_MAX_BYTES,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    tls: ServerTls | None = None,
    metrics: MetricsSettings | None = None,
    tracer_provider: TracerProvider | None = None,
) -> KnowledgeServer:
    """Serve the opened ``store`` on ``host:port`` (0 = a free port), authorising with ``authority``;
    ``tls`` serves TLS (mTLS with a client CA; ``servicekit.tls``). ``metrics`` serves Prometheus
    metrics on its host and port (0 = a free one; None: none); ``tracer_provider`` records a span per
    unary call (None: no tracing)."""
    recorder = KnowledgeMetrics(backend_name(store)) if metrics is not None else None
    servicer = KnowledgeServicer(
        store,
        authority,
        max_write_bytes=max_write_bytes,
        watch_backlog=watch_backlog,
        read_budget_bytes=read_budget_bytes,
        read_many_max_items=read_many_max_items,
        read_many_max_bytes=read_many_max_bytes,
        recorder=recorder,
    )
    spec = ServiceSpec(
        KNOWLEDGE_SERVICE.full_name,
        lambda server: knowledge_pb2_grpc.add_KnowledgeServiceServicer_to_server(servicer, server),
    )
    running = await start_server(
        [spec],
        host=host,
        port=port,
        max_message_bytes=max_message_bytes,
        tls=tls,
        interceptors=server_interceptors(tracer_provider),
        metrics=(recorder.registry, metrics) if recorder is not None and metrics is not None else None,
    )
    return KnowledgeServer(running, host, servicer, recorder)
