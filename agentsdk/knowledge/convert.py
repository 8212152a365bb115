"""Conversions between the library's ChangeEvent and the wire's ``agentnet.v1.ChangeEvent``."""

from __future__ import annotations

from agentnet.v1 import knowledge_pb2

from agentsdk.errors import InternalError
from agentsdk.knowledge.types import ChangeEvent, ChangeKind

_TO_WIRE: dict[ChangeKind, knowledge_pb2.ChangeKind.ValueType] = {
    "written": knowledge_pb2.CHANGE_KIND_WRITTEN,
    "appended": knowledge_pb2.CHANGE_KIND_APPENDED,
    "deleted": knowledge_pb2.CHANGE_KIND_DELETED,
}
_FROM_WIRE: dict[knowledge_pb2.ChangeKind.ValueType, ChangeKind] = {wire: kind for kind, wire in _TO_WIRE.items()}


def event_to_proto(event: ChangeEvent) -> knowledge_pb2.ChangeEvent:
    """The wire form of ``event``."""
    return knowledge_pb2.ChangeEvent(
        path=event.path, kind=_TO_WIRE[event.kind], offset=event.offset, size=event.size, version=event.version
    )


def event_from_proto(message: knowledge_pb2.ChangeEvent) -> ChangeEvent:
    """The library form of a wire ChangeEvent."""
    kind = _FROM_WIRE.get(message.kind)
    if kind is None:
        raise InternalError(f"the server sent a change of unknown kind {message.kind} for {message.path}")
    return ChangeEvent(message.path, kind, message.offset, message.size, message.version)
