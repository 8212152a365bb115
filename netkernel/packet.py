"""The shape of a workflow packet (``EV_PACKET``'s ``event_data``), written once for the SDK that builds
packets and the hub that reads them (``hubsvc/adapters/payloads.py`` validates one, with errors that
say which part is wrong)::

    {"routing": {"tool_called": name | None, "tools_called": [names], "reason"?: text,
                 "kind"?: "handoff" | "finish", "target"?: id or name,
                 "close_reason"?: reason, "summary"?: text},
     "context_updates": {"set": {key: value}, "delete": [key]},
     "body": text}

Every part is optional on the wire; :func:`packet_data` always writes all three.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal, TypedDict

ROUTING: Final = "routing"
"""The packet's routing decision (a :class:`RoutingData`)."""
CONTEXT_UPDATES: Final = "context_updates"
"""The packet's workflow context changes (a :class:`ContextUpdatesData`)."""
BODY: Final = "body"
"""The packet's text, what the next speaker reads."""

UPDATE_SET: Final = "set"
"""``context_updates`` key: the context keys to set, with their values (applied first)."""
UPDATE_DELETE: Final = "delete"
"""``context_updates`` key: the context keys to remove (applied after ``set``)."""
UPDATE_KEYS: Final[tuple[str, ...]] = (UPDATE_SET, UPDATE_DELETE)
"""The only keys ``context_updates`` (and ``EV_CONTEXT_SET``) accept."""

KIND_HANDOFF: Final = "handoff"
"""``routing.kind`` of a Handoff: ``routing.target`` speaks next, instead of the transitions."""
KIND_FINISH: Final = "finish"
"""``routing.kind`` of a Finish: the workflow ends with ``routing.close_reason``."""
ROUTING_KINDS: Final[tuple[str, ...]] = (KIND_HANDOFF, KIND_FINISH)
"""The ``routing.kind`` values: a Handoff or a Finish."""
DEFAULT_FINISH_REASON: Final = "finished"
"""The close reason of a Finish that names none."""


class RoutingData(TypedDict, total=False):
    """A packet's ``routing`` object."""

    tool_called: str | None
    """The routing tool of the turn (the first one the LLM called), or None."""
    tools_called: list[str]
    """Every tool that ran, a record (routing never reads it when ``tool_called`` is set)."""
    reason: str
    """Why (the routing call's ``reason``, a Handoff's reason); informational."""
    kind: Literal["handoff", "finish"]
    """A typed routing value decided the turn (:data:`ROUTING_KINDS`)."""
    target: str
    """Kind ``handoff``: the next speaker (an agent id or a participant's name)."""
    close_reason: str
    """Kind ``finish``: the channel's close reason (default :data:`DEFAULT_FINISH_REASON`)."""
    summary: str
    """Kind ``finish``: an optional summary."""


class ContextUpdatesData(TypedDict):
    """A packet's ``context_updates`` object."""

    set: dict[str, Any]
    delete: list[str]


class PacketData(TypedDict):
    """``EV_PACKET``'s ``event_data``."""

    routing: RoutingData
    context_updates: ContextUpdatesData
    body: str


def packet_data(
    body: str,
    routing: RoutingData | Mapping[str, Any],
    context_set: Mapping[str, Any] | None = None,
    context_delete: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The ``event_data`` of an ``EV_PACKET`` (all three parts; copies of the arguments)."""
    return {
        ROUTING: dict(routing),
        CONTEXT_UPDATES: {UPDATE_SET: dict(context_set or {}), UPDATE_DELETE: list(context_delete or [])},
        BODY: body,
    }
