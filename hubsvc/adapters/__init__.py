"""The hub halves of the four built-in channel types, and the registry the core looks them up in."""

from __future__ import annotations

from typing import Any

from hubsvc.adapters.base import Accepted, Adapter, ChannelSpec
from hubsvc.adapters.consulting import ConsultingAdapter
from hubsvc.adapters.conversation import ConversationAdapter
from hubsvc.adapters.discussion import DiscussionAdapter
from hubsvc.adapters.workflow import WorkflowAdapter
from netkernel.errors import InvalidArgument

ADAPTERS: dict[str, Adapter[Any]] = {
    adapter.type: adapter
    for adapter in (ConsultingAdapter(), ConversationAdapter(), DiscussionAdapter(), WorkflowAdapter())
}
"""Channel type name -> adapter instance (adapters are stateless, so one instance serves every channel)."""


def get_adapter(type_name: str) -> Adapter[Any]:
    """The adapter for channel type ``type_name``; InvalidArgument listing the valid types otherwise."""
    adapter = ADAPTERS.get(type_name)
    if adapter is None:
        raise InvalidArgument(
            f"unknown channel type {type_name!r}; use one of: {', '.join(sorted(ADAPTERS))}.",
            metadata={"type": str(type_name), "expected": ",".join(sorted(ADAPTERS))},
        )
    return adapter


__all__ = [
    "ADAPTERS",
    "Accepted",
    "Adapter",
    "ChannelSpec",
    "ConsultingAdapter",
    "ConversationAdapter",
    "DiscussionAdapter",
    "WorkflowAdapter",
    "get_adapter",
]
