"""Workflow context from inside a tool body: :func:`set_context` and :func:`delete_context`.

A tool that runs in a workflow turn takes the channel as a dependency
(``channel: ChannelInject``) and changes the workflow's shared context vars with one call::

    from agentsdk import tool
    from agentsdk.network import ChannelInject
    from agentsdk.network.workflow_helpers import set_context

    @tool
    async def classify(category: str, channel: ChannelInject) -> str:
        \"\"\"File the request under a category.\"\"\"
        await set_context(channel, "category", category)
        return "ok"

Each call posts one ``ag2.context.set`` envelope at once (the hub admits it from any
participant at any time; it takes no turn), so a ``ContextEquals`` transition sees the value
when the turn's round-end packet is folded. The names and signatures are AG2 1.2.1's
``ag2.network.workflow_helpers``. :func:`~agentsdk.network.adapters.queue_context_updates`
is the other way: it queues updates that ride on the round-end packet itself.
"""

from __future__ import annotations

from typing import Any

from agentsdk.network.channel import Channel
from netkernel.channel_types import WORKFLOW_TYPE
from netkernel.envelope import EV_CONTEXT_SET, Envelope
from netkernel.errors import FailedPrecondition, InvalidArgument
from netkernel.packet import UPDATE_DELETE, UPDATE_SET
from netkernel.wire import dumps_json

__all__ = ["delete_context", "set_context"]


def _require_workflow(channel: Channel, helper: str) -> None:
    actual = channel.type
    if actual != WORKFLOW_TYPE:
        raise FailedPrecondition(
            f"{helper}() needs a workflow channel; channel '{channel.channel_id}' is of type {actual!r}, "
            "which has no context vars. Call it from a tool running in a workflow turn.",
            metadata={"channel_id": channel.channel_id, "channel_type": actual},
        )


def _require_key(key: Any, helper: str) -> None:
    if not isinstance(key, str) or not key:
        raise InvalidArgument(f"{helper}() takes a context key as a non-empty string, got {key!r}.")


async def _post(channel: Channel, data: dict[str, Any]) -> None:
    await channel.client.post_envelope(
        Envelope(
            channel_id=channel.channel_id,
            sender_id=channel.client.agent_id,
            audience=None,
            event_type=EV_CONTEXT_SET,
            event_data=data,
        )
    )


async def set_context(channel: Channel, key: str, value: Any) -> None:
    """Set the workflow context var ``key`` to ``value`` (JSON data) by posting ``ag2.context.set``.

    FailedPrecondition for a channel that is not a workflow; InvalidArgument for an empty key or a
    value that is not JSON (nothing is posted then)."""
    _require_workflow(channel, "set_context")
    _require_key(key, "set_context")
    try:
        dumps_json(value)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(
            f"set_context() value for '{key}' is not JSON data ({exc}); use strings, finite numbers, "
            "booleans, None, lists and dicts."
        ) from exc
    await _post(channel, {UPDATE_SET: {key: value}})


async def delete_context(channel: Channel, key: str) -> None:
    """Delete the workflow context var ``key`` by posting ``ag2.context.set`` (a key never set: no change).

    FailedPrecondition for a channel that is not a workflow; InvalidArgument for an empty key."""
    _require_workflow(channel, "delete_context")
    _require_key(key, "delete_context")
    await _post(channel, {UPDATE_DELETE: [key]})
