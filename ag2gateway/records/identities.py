"""AG2 passports and resumes from and to the hub's identity records (rules: :mod:`ag2gateway.records.rules`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from agentnet.v1 import identity_pb2

from ag2gateway.records.common import iso
from netkernel.errors import InvalidArgument

LABEL_PREFIX = "ag2."
"""Passport labels the gateway writes for AG2 fields the hub's passport has no field for."""
AUTH_SCHEME_LABEL = "ag2.auth_scheme"

_KIND_TO_AG2 = {identity_pb2.PASSPORT_KIND_HUMAN: "human", identity_pb2.PASSPORT_KIND_REMOTE_AGENT: "remote_agent"}
_KIND_FROM_AG2 = {
    None: identity_pb2.PASSPORT_KIND_AGENT,
    "agent": identity_pb2.PASSPORT_KIND_AGENT,
    "human": identity_pb2.PASSPORT_KIND_HUMAN,
    "remote_agent": identity_pb2.PASSPORT_KIND_REMOTE_AGENT,
}


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
