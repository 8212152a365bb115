"""AG2 1.2.1's record shapes (``Envelope``, ``Passport``, ``Resume``, ``ChannelMetadata``, ``Rule``) from
and to the hub's protobuf messages. Pure functions, no I/O.

What differs and how it maps (docs/ag2.md "What maps to what"):

* event types: AG2 spells three lifecycle events differently (``ag2.channel.invite.ack``,
  ``ag2.channel.invite.reject``, ``ag2.expectation.violated``); every other type is the same string;
* envelope ids: :mod:`ag2gateway.ids`; a ``causation_id`` an AG2 client sends is turned back into the
  hub's id, and the hub's into the AG2 id where the gateway has seen that envelope;
* a passport's fields without a hub field (``region``, ``auth.scheme``, ``hub_id``) ride in its
  labels under ``ag2.``; a resume's examples are stored as JSON strings;
* channel knobs: a workflow's ``graph`` (``TransitionGraph.to_dict()``) is translated into the hub's
  graph knobs and kept verbatim beside them, so AG2 clients read back exactly what they sent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from agentnet.v1 import channel_pb2, envelope_pb2, identity_pb2, task_pb2
from google.protobuf import timestamp_pb2

from ag2gateway import ids
from netkernel.errors import InvalidArgument

EVENT_TO_AG2 = {
    "ag2.channel.invite_ack": "ag2.channel.invite.ack",
    "ag2.channel.invite_reject": "ag2.channel.invite.reject",
    "ag2.channel.expectation_violated": "ag2.expectation.violated",
}
"""Hub event type → AG2's spelling (types not listed are spelled the same)."""
EVENT_FROM_AG2 = {ag2: hub for hub, ag2 in EVENT_TO_AG2.items()}

LABEL_PREFIX = "ag2."
"""Passport labels the gateway writes for AG2 fields the hub's passport has no field for."""
AUTH_SCHEME_LABEL = "ag2.auth_scheme"

_PRIORITY_TO_AG2 = {
    envelope_pb2.PRIORITY_BACKGROUND: "background",
    envelope_pb2.PRIORITY_URGENT: "urgent",
}
_PRIORITY_FROM_AG2 = {
    "background": envelope_pb2.PRIORITY_BACKGROUND,
    "normal": envelope_pb2.PRIORITY_NORMAL,
    "urgent": envelope_pb2.PRIORITY_URGENT,
}
_KIND_TO_AG2 = {identity_pb2.PASSPORT_KIND_HUMAN: "human", identity_pb2.PASSPORT_KIND_REMOTE_AGENT: "remote_agent"}
_KIND_FROM_AG2 = {
    None: identity_pb2.PASSPORT_KIND_AGENT,
    "agent": identity_pb2.PASSPORT_KIND_AGENT,
    "human": identity_pb2.PASSPORT_KIND_HUMAN,
    "remote_agent": identity_pb2.PASSPORT_KIND_REMOTE_AGENT,
}
_STATE_TO_AG2 = {
    channel_pb2.CHANNEL_STATE_PENDING: "pending",
    channel_pb2.CHANNEL_STATE_OPENED: "active",
    channel_pb2.CHANNEL_STATE_CLOSED: "closed",
    channel_pb2.CHANNEL_STATE_EXPIRED: "expired",
}
_TWO_PARTY = {"consulting", "conversation"}
"""Channel types whose non-initiator is AG2's ``respondent`` (the others' are ``participant``)."""
_VIEWS = {
    "consulting": "full_transcript",
    "conversation": "windowed_summary",
    "discussion": "named_windowed_summary",
    "workflow": "named_windowed_summary",
}
_PARTICIPANTS = {
    "consulting": {"min": 2, "max": 2, "roles": ["initiator", "respondent"]},
    "conversation": {"min": 2, "max": 2, "roles": ["initiator", "respondent"]},
    "discussion": {"min": 2, "max": None, "roles": []},
    "workflow": {"min": 2, "max": None, "roles": []},
}
_KNOBS_SCHEMA: dict[str, dict[str, str]] = {"discussion": {"ordering": "str"}, "workflow": {"graph": "TransitionGraph"}}


def iso(ts: timestamp_pb2.Timestamp) -> str:
    """AG2's ISO time of a protobuf timestamp ("" when unset)."""
    if ts.seconds == 0 and ts.nanos == 0:
        return ""
    return datetime.fromtimestamp(ts.seconds + ts.nanos / 1e9, UTC).isoformat()


def _iso_or_none(ts: timestamp_pb2.Timestamp) -> str | None:
    return iso(ts) or None


# -- envelopes --------------------------------------------------------------------------------------

EV_PACKET = "ag2.packet"


def packet_from_ag2(data: dict[str, Any]) -> dict[str, Any]:
    """A workflow packet's event_data with AG2's routing spelled as the hub reads it: AG2's ``kind``
    ``"text"`` is the hub's no kind, its ``tool`` the hub's ``tool_called``, a finish's ``reason`` the
    hub's ``close_reason`` (AG2's keys stay beside the hub's)."""
    routing = data.get("routing")
    if not isinstance(routing, dict):
        return data
    out = dict(routing)
    if out.get("kind") == "text":
        del out["kind"]
    if isinstance(out.get("tool"), str) and "tool_called" not in out:
        out["tool_called"] = out["tool"]
    if out.get("kind") == "finish" and isinstance(out.get("reason"), str) and "close_reason" not in out:
        out["close_reason"] = out["reason"]
    return {**data, "routing": out}


def packet_to_ag2(data: dict[str, Any]) -> dict[str, Any]:
    """The inverse of :func:`packet_from_ag2`, for a packet any participant (AG2 or not) posted."""
    routing = data.get("routing")
    if not isinstance(routing, dict):
        return {**data, "routing": {"kind": "text"}}
    out = dict(routing)
    out.setdefault("kind", "text")
    if isinstance(out.get("tool_called"), str):
        out.setdefault("tool", out["tool_called"])
    if out["kind"] == "finish" and isinstance(out.get("close_reason"), str):
        out.setdefault("reason", out["close_reason"])
    return {**data, "routing": out}


class IdMemory:
    """AG2 ids of hub envelopes this connection has seen, so a ``causation_id`` (a hub id) is shown as
    the AG2 id of the envelope it names. Bounded: the oldest entries go first."""

    def __init__(self, limit: int = 4096) -> None:
        self._ids: dict[str, str] = {}
        self._limit = limit

    def remember(self, hub_id: str, ag2: str) -> None:
        """Note one envelope's two ids."""
        self._ids[hub_id] = ag2
        if len(self._ids) > self._limit:
            del self._ids[next(iter(self._ids))]

    def ag2(self, hub_id: str) -> str:
        """The AG2 id of a hub id seen before, else the hub id itself."""
        return self._ids.get(hub_id, hub_id)


def envelope_to_ag2(env: envelope_pb2.Envelope, memory: IdMemory) -> dict[str, Any]:
    """An admitted hub envelope in AG2's ``Envelope.to_dict()`` shape."""
    ag2 = ids.ag2_id(env)
    memory.remember(env.envelope_id, ag2)
    return {
        "channel_id": env.channel_id,
        "sender_id": env.sender_id,
        "audience": list(env.audience.agent_ids) if env.HasField("audience") else None,
        "event_type": EVENT_TO_AG2.get(env.event_type, env.event_type),
        "event_data": _event_data_to_ag2(env),
        "envelope_id": ag2,
        "task_id": env.task_id if env.HasField("task_id") else None,
        "causation_id": memory.ag2(env.causation_id) if env.HasField("causation_id") else None,
        "trace_id": env.trace_id if env.HasField("trace_id") else None,
        "priority": _PRIORITY_TO_AG2.get(env.priority, "normal"),
        "depth": env.depth,
        "idempotency_key": env.idempotency_key if env.HasField("idempotency_key") else None,
        "created_at": env.created_at,
        "ttl_seconds": env.ttl_seconds if env.HasField("ttl_seconds") else None,
    }


def _event_data_to_ag2(env: envelope_pb2.Envelope) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(env.event_data_json) if env.event_data_json else {}
    return packet_to_ag2(data) if env.event_type == EV_PACKET else data


def _opt_str(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidArgument(f"envelope.{key} must be a string or null", metadata={"field": f"envelope.{key}"})
    return value


def envelope_from_ag2(data: Any) -> envelope_pb2.Envelope:
    """The hub envelope an AG2 client's ``post_envelope`` asks for (hub-stamped fields are ignored)."""
    if not isinstance(data, dict):
        raise InvalidArgument("params.envelope must be an Envelope object (Envelope.to_dict())")
    channel_id, event_type, event_data = data.get("channel_id"), data.get("event_type"), data.get("event_data")
    if not isinstance(channel_id, str) or not isinstance(event_type, str):
        raise InvalidArgument("envelope.channel_id and envelope.event_type must be strings")
    if not isinstance(event_data, dict):
        raise InvalidArgument("envelope.event_data must be a JSON object")
    out = envelope_pb2.Envelope(
        channel_id=channel_id,
        event_type=EVENT_FROM_AG2.get(event_type, event_type),
        event_data_json=json.dumps(packet_from_ag2(event_data) if event_type == EV_PACKET else event_data),
    )
    audience = data.get("audience")
    if audience is not None:
        if not isinstance(audience, list) or not all(isinstance(a, str) for a in audience):
            raise InvalidArgument("envelope.audience must be null or a list of agent ids")
        out.audience.agent_ids.extend(audience)
    for key in ("task_id", "trace_id", "idempotency_key"):
        value = _opt_str(data, key)
        if value is not None:
            setattr(out, key, value)
    causation = _opt_str(data, "causation_id")
    if causation is not None:
        out.causation_id = ids.hub_envelope_id(causation)
    priority = data.get("priority", "normal")
    if priority not in _PRIORITY_FROM_AG2:
        raise InvalidArgument(f"envelope.priority must be one of {sorted(_PRIORITY_FROM_AG2)}, got {priority!r}")
    out.priority = _PRIORITY_FROM_AG2[priority]
    depth, ttl = data.get("depth", 0), data.get("ttl_seconds")
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < 0:
        raise InvalidArgument("envelope.depth must be a non-negative integer")
    out.depth = depth
    if ttl is not None:
        if not isinstance(ttl, int) or isinstance(ttl, bool):
            raise InvalidArgument("envelope.ttl_seconds must be an integer or null")
        out.ttl_seconds = ttl
    return out


# -- identities ------------------------------------------------------------------------------------


def scheme_of(passport: Mapping[str, Any]) -> str:
    """The auth scheme an AG2 passport dict names ("none" by default, as AG2's ``AuthBlock``)."""
    auth = passport.get("auth")
    scheme = auth.get("scheme", "none") if isinstance(auth, dict) else "none"
    if not isinstance(scheme, str):
        raise InvalidArgument("passport.auth.scheme must be a string")
    return scheme


def passport_from_ag2(data: Any) -> identity_pb2.Passport:
    """The hub passport of an AG2 ``Passport.to_dict()`` (the claim is never stored)."""
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise InvalidArgument("params.passport must be a Passport object with a string 'name'")
    kind = data.get("kind")
    if kind not in _KIND_FROM_AG2:
        raise InvalidArgument(f"passport.kind must be agent, human, remote_agent or null, got {kind!r}")
    out = identity_pb2.Passport(name=data["name"], kind=_KIND_FROM_AG2[kind])
    for key in ("owner", "provider", "model"):
        value = data.get(key)
        if isinstance(value, str):
            setattr(out, key, value)
    out.labels[AUTH_SCHEME_LABEL] = scheme_of(data)
    for key in ("region", "hub_id"):
        value = data.get(key)
        if isinstance(value, str) and value:
            out.labels[LABEL_PREFIX + key] = value
    return out


def passport_to_ag2(record: identity_pb2.AgentRecord) -> dict[str, Any]:
    """AG2's public passport of a hub identity (``auth.claim`` is always empty, as AG2's hub sends it)."""
    p = record.passport
    labels = dict(p.labels)
    return {
        "name": p.name,
        "owner": p.owner,
        "provider": p.provider or None,
        "model": p.model or None,
        "cost": None,
        "region": labels.get(LABEL_PREFIX + "region"),
        "auth": {
            "scheme": labels.get(AUTH_SCHEME_LABEL, "api_key"),
            "issuer": None,
            "audience": None,
            "key_fingerprint": None,
            "claim": {},
        },
        "kind": _KIND_TO_AG2.get(p.kind, "agent"),
        "hub_id": labels.get(LABEL_PREFIX + "hub_id"),
        "version": 1,
        "agent_id": record.agent_id,
        "created_at": iso(record.registered_at),
    }


def resume_from_ag2(data: Any) -> identity_pb2.Resume:
    """The hub resume of an AG2 ``Resume.to_dict()`` (``observed`` is the hub's to fill)."""
    if data is None:
        return identity_pb2.Resume()
    if not isinstance(data, dict):
        raise InvalidArgument("params.resume must be a Resume object")
    out = identity_pb2.Resume(summary=data.get("summary") or "")
    out.claimed_capabilities.extend(str(c) for c in data.get("claimed_capabilities") or [])
    out.domains.extend(str(d) for d in data.get("domains") or [])
    out.examples.extend(json.dumps(e, sort_keys=True) for e in data.get("examples") or [])
    return out


def _example(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, dict) and isinstance(value.get("title"), str):
        return value
    return {"title": text, "outcome": "", "task_id": None, "channel_id": None, "when": None, "note": ""}


def resume_to_ag2(resume: identity_pb2.Resume) -> dict[str, Any]:
    """AG2's ``Resume`` dict of a hub resume (with the hub's observed track record)."""
    return {
        "claimed_capabilities": list(resume.claimed_capabilities),
        "domains": list(resume.domains),
        "summary": resume.summary,
        "examples": [_example(e) for e in resume.examples],
        "observed": {
            cap: {
                "n": s.n,
                "completed": s.completed,
                "failed": s.failed,
                "expired": s.expired,
                "p50_latency_ms": s.last_latency_ms or None,
            }
            for cap, s in resume.observed.items()
        },
        "version": 1,
        "last_updated": iso(resume.last_updated),
    }


def default_rule() -> dict[str, Any]:
    """AG2's ``Rule().to_dict()`` (what an identity without a rule of its own reads back)."""
    return {
        "version": 1,
        "access": {
            "inbound_from": ["*"],
            "outbound_to": ["*"],
            "channel_types": {"initiate": ["*"], "accept": ["*"]},
        },
        "limits": {
            "max_concurrent_channels": 0,
            "max_concurrent_tasks": 0,
            "channel_ttl_default": "2h",
            "task_ttl_default": "15m",
            "rate": {"per_minute": 0, "burst": 0},
            "delegation_depth": 5,
            "inbox": {"max_pending": 1000, "overflow": "reject", "high_water": None},
        },
    }


def rule_from_ag2(data: Any) -> str:
    """The hub rule JSON of an AG2 rule: its ``access.inbound_from`` name globs (the one AG2 access rule
    the hub has under the same name, as ``{"names": [...]}``); "" for AG2's permissive default. Other
    AG2 rule fields are refused rather than ignored, so a rule never silently does less than its author wrote."""
    if data is None:
        return ""
    if not isinstance(data, dict):
        raise InvalidArgument("params.rule must be a Rule object")
    default = default_rule()
    access = data.get("access") or {}
    inbound = access.get("inbound_from", ["*"]) if isinstance(access, dict) else ["*"]
    rest_access = {k: v for k, v in access.items() if k != "inbound_from"} if isinstance(access, dict) else {}
    if rest_access != {k: v for k, v in default["access"].items() if k != "inbound_from"}:
        raise InvalidArgument(
            "this gateway maps only access.inbound_from of an AG2 rule; set outbound_to and channel_types "
            "through the hub's policy file (docs/governance.md)"
        )
    if data.get("limits", default["limits"]) != default["limits"]:
        raise InvalidArgument("AG2 rule limits are set through the hub's policy file here (docs/governance.md)")
    if inbound == ["*"]:
        return ""
    if not isinstance(inbound, list) or not all(isinstance(g, str) for g in inbound):
        raise InvalidArgument("rule.access.inbound_from must be a list of name globs")
    return json.dumps({"access": {"inbound_from": {"names": inbound}}})


def rule_to_ag2(rule_json: str) -> dict[str, Any]:
    """AG2's rule dict of an identity's own hub rule."""
    rule = default_rule()
    if rule_json:
        access = json.loads(rule_json).get("access") or {}
        inbound = access.get("inbound_from")
        if isinstance(inbound, dict):
            rule["access"]["inbound_from"] = list(inbound.get("names") or [])
    return rule


# -- tasks ----------------------------------------------------------------------------------------

_TASK_STATE_TO_AG2 = {
    task_pb2.TASK_STATE_RUNNING: "running",
    task_pb2.TASK_STATE_COMPLETED: "completed",
    task_pb2.TASK_STATE_FAILED: "failed",
    task_pb2.TASK_STATE_CANCELLED: "cancelled",
    task_pb2.TASK_STATE_EXPIRED: "expired",
}
TASK_EVENT_FROM_AG2 = {
    "running": task_pb2.TASK_EVENT_KIND_PROGRESS,
    "completed": task_pb2.TASK_EVENT_KIND_COMPLETED,
    "failed": task_pb2.TASK_EVENT_KIND_FAILED,
    "cancelled": task_pb2.TASK_EVENT_KIND_CANCELLED,
}
"""AG2 ``update_task`` states → the hub's task event (``expired`` is the hub's to decide)."""


def task_to_ag2(task: task_pb2.TaskMetadata) -> dict[str, Any]:
    """AG2's ``TaskMetadata.to_dict()`` of a hub task."""
    state = _TASK_STATE_TO_AG2.get(task.state, "created")
    ended = state not in ("created", "running")
    return {
        "task_id": task.task_id,
        "owner_id": task.owner_id,
        "spec": {"title": task.title, "description": "", "payload": {}, "capability": task.capability or None},
        "state": state,
        "created_at": iso(task.created_at),
        "started_at": iso(task.created_at) or None,
        "completed_at": (iso(task.updated_at) or None) if ended else None,
        "expires_at": _iso_or_none(task.expires_at),
        "last_progress_at": _iso_or_none(task.updated_at),
        "progress": json.loads(task.progress_json) if task.progress_json else {},
        "result": json.loads(task.result_json) if task.result_json else None,
        "error": task.error,
        "channel_id": task.channel_id or None,
    }


# -- channels -------------------------------------------------------------------------------------

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


def _target(raw: Any) -> dict[str, Any]:
    name, args = raw.get("name"), raw.get("args") or {}
    if name == "agent":
        return {"type": name, "agent": args.get("agent_id")}
    if name == "terminate":
        return {"type": name, "reason": args.get("reason", "after_work")}
    return {"type": name}


def knobs_from_ag2(channel_type: str, knobs: Any, labels: Any) -> dict[str, Any]:
    """The hub knobs of an AG2 ``create_channel`` (a workflow graph translated; AG2's kept beside it)."""
    out: dict[str, Any] = dict(knobs) if isinstance(knobs, dict) else {}
    if isinstance(labels, dict) and labels:
        out["labels"] = labels
    graph = out.get("graph")
    if channel_type == "workflow" and isinstance(graph, dict):
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
            "default_view_policy": _VIEWS.get(meta.type, "full_transcript"),
            "expectations": [],
        },
        "creator_id": creator,
        "participants": participants,
        "state": _STATE_TO_AG2.get(meta.state, "pending"),
        "created_at": iso(meta.created_at),
        "expires_at": _iso_or_none(meta.expires_at),
        "closed_at": _iso_or_none(meta.closed_at),
        "close_reason": meta.close_reason,
        "parent_channel_id": None,
        "knobs": knobs_to_ag2(meta.knobs_json),
        "labels": labels,
        "required_acks": None,
        "pending_acks": [p.agent_id for p in meta.participants if pending and not p.acked and p.agent_id != creator],
        "rejected_by": [],
    }
