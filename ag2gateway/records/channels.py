"""AG2 channel metadata and knobs from and to the hub's channels."""

from __future__ import annotations

import json
from typing import Any

from agentnet.v1 import channel_pb2

from ag2gateway.records.common import iso, iso_or_none
from netkernel.channel_types import (
    CONSULTING_TYPE,
    CONVERSATION_TYPE,
    DISCUSSION_TYPE,
    VIEW_FULL_TRANSCRIPT,
    VIEW_NAMED_WINDOWED_SUMMARY,
    VIEW_WINDOWED_SUMMARY,
    WORKFLOW_TYPE,
)
from netkernel.errors import InvalidArgument

_STATE_TO_AG2 = {
    channel_pb2.CHANNEL_STATE_PENDING: "pending",
    channel_pb2.CHANNEL_STATE_OPENED: "active",
    channel_pb2.CHANNEL_STATE_CLOSED: "closed",
    channel_pb2.CHANNEL_STATE_EXPIRED: "expired",
}
_TWO_PARTY = {CONSULTING_TYPE, CONVERSATION_TYPE}
"""Channel types whose non-initiator is AG2's ``respondent`` (the others' are ``participant``)."""
_VIEWS = {
    CONSULTING_TYPE: VIEW_FULL_TRANSCRIPT,
    CONVERSATION_TYPE: VIEW_WINDOWED_SUMMARY,
    DISCUSSION_TYPE: VIEW_NAMED_WINDOWED_SUMMARY,
    WORKFLOW_TYPE: VIEW_NAMED_WINDOWED_SUMMARY,
}
_PARTICIPANTS = {
    CONSULTING_TYPE: {"min": 2, "max": 2, "roles": ["initiator", "respondent"]},
    CONVERSATION_TYPE: {"min": 2, "max": 2, "roles": ["initiator", "respondent"]},
    DISCUSSION_TYPE: {"min": 2, "max": None, "roles": []},
    WORKFLOW_TYPE: {"min": 2, "max": None, "roles": []},
}
_KNOBS_SCHEMA: dict[str, dict[str, str]] = {
    DISCUSSION_TYPE: {"ordering": "str"},
    WORKFLOW_TYPE: {"graph": "TransitionGraph"},
}


_AG2_KNOBS = ("graph", "context_vars", "labels")
"""Knobs the gateway keeps verbatim for AG2 clients; hub knobs derived from them are hidden again."""
_DERIVED_KNOBS = ("initial_speaker", "transitions", "default_target", "max_turns", "context")


def _condition(raw: Any) -> dict[str, Any]:
    name, args = raw.get("name"), raw.get("args") or {}
    if name == "from_speaker":
        return {"type": name, "speaker": args.get("agent_id")}
    if name == "tool_called":
        return {"type": name, "tool": args.get("tool_name")}
    if name == "context_equals":
        return {"type": name, "key": args.get("key"), "value": args.get("value")}
    return {"type": name}


_PLAIN_TARGETS = ("round_robin", "stay", "revert_to_initiator")
"""AG2's built-in targets without arguments; any other name is a custom target, passed with its args."""


def _target(raw: Any) -> dict[str, Any]:
    name, args = raw.get("name"), raw.get("args") or {}
    if name == "agent":
        return {"type": name, "agent": args.get("agent_id")}
    if name == "terminate":
        return {"type": name, "reason": args.get("reason", "after_work")}
    if name in _PLAIN_TARGETS:
        return {"type": name}
    return {"type": name, "args": args}  # a custom target (AG2's register_target): the hub's registry decides


def knobs_from_ag2(channel_type: str, knobs: Any, labels: Any) -> dict[str, Any]:
    """The hub knobs of an AG2 ``create_channel`` (a workflow graph translated; AG2's kept beside it)."""
    out: dict[str, Any] = dict(knobs) if isinstance(knobs, dict) else {}
    if isinstance(labels, dict) and labels:
        out["labels"] = labels
    graph = out.get("graph")
    if channel_type == WORKFLOW_TYPE and isinstance(graph, dict):
        try:
            out["initial_speaker"] = graph["initial_speaker"]
            out["transitions"] = [
                {"condition": _condition(t["when"]), "target": _target(t["then"]), "priority": t.get("priority", 0)}
                for t in graph.get("transitions") or []
            ]
            if graph.get("default_target"):
                out["default_target"] = _target(graph["default_target"])
            if graph.get("max_turns") is not None:
                out["max_turns"] = graph["max_turns"]
        except (KeyError, TypeError, AttributeError) as err:
            raise InvalidArgument(f"knobs.graph is not a TransitionGraph.to_dict(): {err}") from None
        if isinstance(out.get("context_vars"), dict):
            out["context"] = out["context_vars"]
    return out


def knobs_to_ag2(knobs_json: str) -> dict[str, Any]:
    """AG2's knobs of a channel: what its AG2 creator sent (hub knobs derived from it hidden)."""
    knobs: dict[str, Any] = json.loads(knobs_json) if knobs_json else {}
    if "graph" in knobs:
        for key in _DERIVED_KNOBS:
            knobs.pop(key, None)
    knobs.pop("labels", None)
    knobs.pop("expectations", None)  # resolved by the hub at open (its defaults, the policy): not AG2's knobs
    return knobs


def channel_to_ag2(meta: channel_pb2.ChannelMetadata) -> dict[str, Any]:
    """AG2's ``ChannelMetadata.to_dict()`` of a hub channel."""
    knobs: dict[str, Any] = json.loads(meta.knobs_json) if meta.knobs_json else {}
    raw_labels = knobs.get("labels")
    labels: dict[str, Any] = dict(raw_labels) if isinstance(raw_labels, dict) else {}
    if meta.intent:
        labels = {**labels, "intent": meta.intent}
    creator = next((p.agent_id for p in meta.participants if p.role == channel_pb2.PARTICIPANT_ROLE_INITIATOR), "")
    other_role = "respondent" if meta.type in _TWO_PARTY else "participant"
    participants = []
    for order, p in enumerate(
        sorted(meta.participants, key=lambda p: p.role != channel_pb2.PARTICIPANT_ROLE_INITIATOR)
    ):
        role = "initiator" if p.role == channel_pb2.PARTICIPANT_ROLE_INITIATOR else other_role
        participants.append({"agent_id": p.agent_id, "role": role, "order": order, "joined_at": ""})
    pending = meta.state == channel_pb2.CHANNEL_STATE_PENDING
    return {
        "channel_id": meta.channel_id,
        "manifest": {
            "type": meta.type,
            "version": 1,
            "participants": _PARTICIPANTS.get(meta.type, {"min": 2, "max": None, "roles": []}),
            "knobs_schema": _KNOBS_SCHEMA.get(meta.type, {}),
            "default_view_policy": _VIEWS.get(meta.type, VIEW_FULL_TRANSCRIPT),
            "expectations": [],
        },
        "creator_id": creator,
        "participants": participants,
        "state": _STATE_TO_AG2.get(meta.state, "pending"),
        "created_at": iso(meta.created_at),
        "expires_at": iso_or_none(meta.expires_at),
        "closed_at": iso_or_none(meta.closed_at),
        "close_reason": meta.close_reason,
        "parent_channel_id": None,
        "knobs": knobs_to_ag2(meta.knobs_json),
        "labels": labels,
        "required_acks": None,
        "pending_acks": [p.agent_id for p in meta.participants if pending and not p.acked and p.agent_id != creator],
        "rejected_by": [],
    }
