"""The W3C trace context an envelope carries in its ``trace_id`` field.

An envelope's ``trace_id`` is free-form text (at most 256 bytes). When it holds a W3C
``traceparent`` value (``00-<32 hex trace id>-<16 hex span id>-<2 hex flags>``), the hub and
the SDK read it as the OpenTelemetry context the envelope belongs to: the hub's admission,
commit and delivery spans and the SDK's handler turn continue that trace, and because the
value is stored in the WAL, so does a delivery read from it later (a replay, another
replica). Any other value is kept as the client wrote it and starts no context.
"""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

__all__ = ["context_of", "traceparent_of"]

_PROPAGATOR = TraceContextTextMapPropagator()
_HEADER = "traceparent"


def context_of(trace_id: str | None) -> Context | None:
    """The OpenTelemetry context ``trace_id`` names, if it is a valid ``traceparent``; else None."""
    if not trace_id or len(trace_id) != 55 or not trace_id.startswith("00-"):
        return None  # not a version-00 traceparent: a client's own free-form id
    context = _PROPAGATOR.extract({_HEADER: trace_id})
    return context if trace.get_current_span(context).get_span_context().is_valid else None


def traceparent_of(span: trace.Span) -> str | None:
    """The ``traceparent`` value naming ``span`` as the parent (None for an invalid span context)."""
    span_context = span.get_span_context()
    if not span_context.is_valid:
        return None
    return f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-{int(span_context.trace_flags):02x}"
