"""Conversions between the library's ChangeEvent and the wire's ``agentnet.v1.ChangeEvent``."""

from __future__ import annotations

from agentnet.v1 import knowledge_pb2

from knowledgestore.types import ChangeEvent, ChangeKind
from netkernel.errors import InternalError
from netkernel.wire import CHANGE_KIND


def event_to_proto(event: ChangeEvent) -> knowledge_pb2.ChangeEvent:
    """The wire form of ``event``."""
    return knowledge_pb2.ChangeEvent(
        path=event.path,
        kind=CHANGE_KIND.to_wire(event.kind),
        offset=event.offset,
        size=event.size,
        version=event.version,
    )


def event_from_proto(message: knowledge_pb2.ChangeEvent) -> ChangeEvent:
    """The library form of a wire ChangeEvent."""
    kind: ChangeKind | None = CHANGE_KIND.by_value.get(message.kind)  # type: ignore[assignment]
    if kind is None:
        raise InternalError(f"the server sent a change of unknown kind {message.kind} for {message.path}")
    return ChangeEvent(message.path, kind, message.offset, message.size, message.version)
