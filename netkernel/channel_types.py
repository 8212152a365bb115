"""The channel vocabulary the hub, the SDK and the tools share: the names of the channel types,
of their knobs' values and of the views, and the default wait (AG2's ``CONSULTING_TYPE`` …
``WORKFLOW_TYPE`` and ``ORDERING_ROUND_ROBIN``).

Each name is written here once. The hub's adapter registry (``hubsvc.adapters.ADAPTERS``) is keyed
by these names and is the hub's list of channel types (the policy schema and ``GetStatus`` read it);
the SDK's adapter registry and the network tools' schemas (:mod:`netkernel.tool_schemas`) take the
list from :data:`CHANNEL_TYPES`. ``tests/system/test_architecture.py`` checks that a channel type's name
is written as a string literal nowhere else in the code.
"""

from __future__ import annotations

from typing import Annotated, Any, Final

from pydantic import AfterValidator, WithJsonSchema

CONSULTING_TYPE: Final = "consulting"
"""One question, one answer: the initiator asks, the consultant replies, the channel closes."""
CONVERSATION_TYPE: Final = "conversation"
"""Free turn-taking between the participants."""
DISCUSSION_TYPE: Final = "discussion"
"""Participants speak in a fixed order (the ``ordering`` knob), for ``max_turns`` turns."""
WORKFLOW_TYPE: Final = "workflow"
"""A transition graph decides who speaks next (packets, context, routing tools)."""

CHANNEL_TYPES: Final[tuple[str, ...]] = (CONSULTING_TYPE, CONVERSATION_TYPE, DISCUSSION_TYPE, WORKFLOW_TYPE)
"""Every built-in channel type, in the order docs and listings name them."""

ORDERING_ROUND_ROBIN: Final = "round_robin"
"""A discussion's ``ordering`` knob: each participant in turn, in the order they were listed."""
DISCUSSION_ORDERINGS: Final[tuple[str, ...]] = (ORDERING_ROUND_ROBIN,)
"""The values a discussion's ``ordering`` knob accepts (the first is the default)."""

VIEW_FULL_TRANSCRIPT: Final = "full_transcript"
"""The view of every substantive envelope, in order."""
VIEW_NAMED_TRANSCRIPT: Final = "named_transcript"
"""The full transcript with every line from someone else prefixed by its sender's name."""
VIEW_WINDOWED_SUMMARY: Final = "windowed_summary"
"""The last ``recent_n`` envelopes after a placeholder counting what was left out."""
VIEW_NAMED_WINDOWED_SUMMARY: Final = "named_windowed_summary"
"""The windowed summary with every line from someone else prefixed by its sender's name."""
VIEW_NAMES: Final[tuple[str, ...]] = (
    VIEW_FULL_TRANSCRIPT,
    VIEW_NAMED_TRANSCRIPT,
    VIEW_WINDOWED_SUMMARY,
    VIEW_NAMED_WINDOWED_SUMMARY,
)
"""The built-in views a hub adapter may name as a channel's default (``DescribeChannel.default_view``)."""

DEFAULT_WAIT_SECONDS: Final = 300.0
"""How long a wait lasts when the caller names no timeout: ``WaitTask``, ``Delegate``, ``InvokeAgent``
(the hub's ``a2a_default_timeout``) and the ``tasks`` (``wait``) and ``delegate`` tools (a timeout of
0 / absent means this)."""


def channel_type_problem(value: str, known: tuple[str, ...] | list[str] = CHANNEL_TYPES) -> str | None:
    """Why ``value`` is not one of the channel types ``known``, or None when it is."""
    if value in known:
        return None
    return f"unknown channel type {value!r}; use one of: {', '.join(known)}"


def _known_type(value: str) -> str:
    problem = channel_type_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


_TYPE_SCHEMA: dict[str, Any] = {"enum": list(CHANNEL_TYPES), "type": "string"}

ChannelTypeName = Annotated[str, AfterValidator(_known_type), WithJsonSchema(_TYPE_SCHEMA)]
"""A pydantic field type: one of :data:`CHANNEL_TYPES` (its JSON schema is their ``enum``)."""
