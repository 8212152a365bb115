"""The knowledge service's Prometheus metrics (served on ``--metrics-port``; docs/operations.md "Metrics").

Every KnowledgeService call is counted by operation, backend and outcome and timed
(:func:`measured` wraps each servicer method, inside its error boundary, so the outcome is
the domain error's reason string). Without metrics the servicer's recorder is
:class:`KnowledgeRecorder`, which does nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import wraps
from typing import Any, Protocol, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from knowledgestore.base import StoreBase
from netkernel.errors import AgentNetError

_OP_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
_BACKENDS = {
    "MemoryKnowledgeStore": "memory",
    "SqliteKnowledgeStore": "sqlite",
    "DiskKnowledgeStore": "disk",
    "RedisKnowledgeStore": "redis",
}


def backend_name(store: StoreBase) -> str:
    """The ``backend`` label of ``store``: memory, sqlite, disk, redis (else its class name)."""
    name = type(store).__name__
    return _BACKENDS.get(name, name)


def outcome_of(exc: BaseException) -> str:
    """A call's ``outcome`` label for the exception it ended with: the reason string of a domain error."""
    if isinstance(exc, AgentNetError):
        return exc.reason
    if isinstance(exc, (asyncio.CancelledError, GeneratorExit)):
        return "CANCELLED"
    return "INTERNAL"


class KnowledgeRecorder:
    """What the servicer reports per call; does nothing (metrics off)."""

    def op(self, op: str, outcome: str, seconds: float) -> None:
        """A call of ``op`` ended with ``outcome`` ("ok" or a reason string) after ``seconds``."""

    def watching(self, delta: int) -> None:
        """A Watch stream began (+1) or ended (-1)."""


class KnowledgeMetrics(KnowledgeRecorder):
    """The knowledge service's metrics in their own registry, labelled with the service's ``backend``."""

    def __init__(self, backend: str, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.backend = backend
        self._ops = Counter(
            "agentnet_knowledge_ops",
            "KnowledgeService calls by operation (read, read_many, write, list, delete, exists, append, read_range, "
            "watch), backend and outcome (ok, or the refusal's reason string, e.g. NOT_FOUND).",
            ["op", "backend", "outcome"],
            registry=self.registry,
        )
        self._seconds = Histogram(
            "agentnet_knowledge_op_seconds",
            "Seconds a KnowledgeService call took (a Watch: until the stream was subscribed).",
            ["op", "backend"],
            buckets=_OP_BUCKETS,
            registry=self.registry,
        )
        self._watches = Gauge(
            "agentnet_knowledge_watches", "Watch streams open.", ["backend"], registry=self.registry
        ).labels(backend=backend)

    def op(self, op: str, outcome: str, seconds: float) -> None:
        """Count and time one call."""
        self._ops.labels(op=op, backend=self.backend, outcome=outcome).inc()
        self._seconds.labels(op=op, backend=self.backend).observe(seconds)

    def watching(self, delta: int) -> None:
        """Move the open-watches gauge."""
        self._watches.inc(delta)


class _Measured(Protocol):
    recorder: KnowledgeRecorder


S = TypeVar("S", bound=_Measured)
R = TypeVar("R")


def measured(op: str) -> Callable[[Callable[[S, Any, Any], Awaitable[R]]], Callable[[S, Any, Any], Awaitable[R]]]:
    """Count and time a unary servicer method as ``op`` (wrap it inside ``unary_boundary``)."""

    def wrap(method: Callable[[S, Any, Any], Awaitable[R]]) -> Callable[[S, Any, Any], Awaitable[R]]:
        @wraps(method)
        async def run(self: S, request: Any, context: Any) -> R:
            started = time.perf_counter()
            try:
                response = await method(self, request, context)
            except BaseException as exc:
                self.recorder.op(op, outcome_of(exc), time.perf_counter() - started)
                raise
            self.recorder.op(op, "ok", time.perf_counter() - started)
            return response

        return run

    return wrap


def measured_stream(
    op: str,
) -> Callable[[Callable[[S, Any, Any], AsyncIterator[R]]], Callable[[S, Any, Any], AsyncIterator[R]]]:
    """Count a streaming servicer method as ``op`` once it ends, timing it until its first message."""

    def wrap(method: Callable[[S, Any, Any], AsyncIterator[R]]) -> Callable[[S, Any, Any], AsyncIterator[R]]:
        @wraps(method)
        async def run(self: S, request: Any, context: Any) -> AsyncIterator[R]:
            started = time.perf_counter()
            first: float | None = None
            outcome = "ok"
            self.recorder.watching(1)
            try:
                async for message in method(self, request, context):
                    if first is None:
                        first = time.perf_counter() - started
                    yield message
            except BaseException as exc:
                outcome = outcome_of(exc)
                raise
            finally:
                self.recorder.watching(-1)
                self.recorder.op(op, outcome, first if first is not None else time.perf_counter() - started)

        return run

    return wrap
