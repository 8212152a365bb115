"""AG2's ``Rule`` from and to the hub's own rule of an identity (docs/ag2.md "Rules", docs/governance.md).

Every block of AG2 1.2.1's ``Rule`` that the hub enforces maps onto the hub rule that does it:

==========================================  =====================================================
AG2                                         hub own rule
==========================================  =====================================================
``access.inbound_from`` (name globs)        ``access.inbound_from.names``
``access.outbound_to`` (name globs)         ``access.peers.names``
``access.channel_types.initiate`` (globs)   ``access.channel_types`` (the hub's types they match)
``limits.max_concurrent_channels``          ``limits.max_open_channels``
``limits.max_concurrent_tasks``             ``limits.max_running_tasks``
``limits.channel_ttl_default`` ("2h")       ``limits.default_ttl_seconds``
``limits.delegation_depth``                 ``limits.max_depth``
``limits.rate`` (``per_minute``, burst)     ``rate`` (``posts_per_second`` = per_minute / 60)
``limits.inbox.max_pending``                ``inbox.max_pending``
==========================================  =====================================================

AG2's ``0`` (or an empty duration) turns a cap off: the hub rule then leaves it out, and a glob list
holding ``"*"`` is "anyone". A rule the AG2 client did not send is AG2's ``Rule()``, as in AG2's hub.
What the hub cannot enforce is refused (InvalidArgument naming it) rather than half applied:
``channel_types.accept`` other than every type, an ``inbox.overflow`` other than ``reject`` and an
``inbox.high_water`` signal. ``task_ttl_default`` is checked and not kept (AG2 1.2.1's hub does not
apply it either). Pure functions, no I/O.
"""

from __future__ import annotations

import json
from fnmatch import fnmatchcase
from typing import Any

from netkernel.channel_types import CHANNEL_TYPES
from netkernel.errors import InvalidArgument

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_ANYONE = ["*"]
_SHAPE: dict[str, Any] = {
    "version": None,
    "access": {"inbound_from": None, "outbound_to": None, "channel_types": {"initiate": None, "accept": None}},
    "limits": {
        "max_concurrent_channels": None,
        "max_concurrent_tasks": None,
        "channel_ttl_default": None,
        "task_ttl_default": None,
        "rate": {"per_minute": None, "burst": None},
        "delegation_depth": None,
        "inbox": {"max_pending": None, "overflow": None, "high_water": None},
    },
}
"""The keys of AG2's ``Rule.to_dict()`` (a nested dict: a block; None: a value)."""


def default_rule() -> dict[str, Any]:
    """AG2's ``Rule().to_dict()``: what AG2's hub stamps on an identity registered without a rule."""
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


def _merged(given: Any, default: dict[str, Any], shape: dict[str, Any], where: str) -> dict[str, Any]:
    """``given`` over AG2's defaults, block by block (as ``Rule.from_dict`` fills what is missing); an
    unknown key is refused, as AG2's dataclasses refuse it."""
    if not isinstance(given, dict):
        raise InvalidArgument(f"{where} must be an object, got {type(given).__name__}")
    out = dict(default)
    for key, value in given.items():
        if key not in shape:
            raise InvalidArgument(f"{where} has no field {key!r}; AG2's Rule has: {', '.join(shape)}")
        block = shape[key]
        out[key] = _merged(value, default[key], block, f"{where}.{key}") if isinstance(block, dict) else value
    return out


def parse_duration(value: Any, where: str) -> int:
    """Seconds of an AG2 duration (``"30s"``, ``"15m"``, ``"2h"``, ``"1d"``, digits, or an int), as AG2's
    ``parse_duration``; "" and 0 are 0 (off)."""
    if isinstance(value, int) and not isinstance(value, bool):
        seconds = value
    elif isinstance(value, str):
        text = value.strip()
        unit = _UNITS.get(text[-1:], 0)
        digits = text[:-1] if unit else text
        if text and not digits.isdigit():
            raise InvalidArgument(f"{where} must be a duration like '30s', '15m', '2h', '1d' or seconds, got {value!r}")
        seconds = int(digits) * (unit or 1) if text else 0
    else:
        raise InvalidArgument(f"{where} must be a duration string or seconds, got {value!r}")
    if seconds < 0:
        raise InvalidArgument(f"{where} must not be negative, got {value!r}")
    return seconds


def format_duration(seconds: float) -> str:
    """An AG2 duration string for ``seconds`` (the largest unit that divides it: ``7200`` is ``"2h"``)."""
    whole = max(0, round(seconds))
    for unit in ("d", "h", "m"):
        if whole and whole % _UNITS[unit] == 0:
            return f"{whole // _UNITS[unit]}{unit}"
    return f"{whole}s"


MAX_COUNT = 1_000_000_000
"""Largest cap the hub's rules take (checked here, before anything is registered)."""
MAX_TTL = 365 * 86400
"""Longest ``channel_ttl_default`` the hub's rules take (a year)."""
MAX_PER_MINUTE = 60_000_000
"""Largest ``rate.per_minute`` (the hub's ``posts_per_second`` is at most 1 000 000)."""
MAX_BURST = 1_000_000


def _count(value: Any, where: str, most: int = MAX_COUNT) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= most:
        raise InvalidArgument(f"{where} must be an integer from 0 (off) to {most}, got {value!r}")
    return value


def _globs(value: Any, where: str) -> list[str] | None:
    """A glob list: None when it picks anyone (it holds ``"*"``)."""
    if not isinstance(value, list) or not all(isinstance(g, str) and 0 < len(g) <= 256 for g in value):
        raise InvalidArgument(f"{where} must be a list of name globs (1 to 256 characters each), got {value!r}")
    return None if "*" in value else list(value)


def _types(value: Any, where: str) -> list[str] | None:
    """The hub's channel types a glob list matches: None when it matches every one."""
    globs = _globs(value, where)
    if globs is None:
        return None
    matched = [t for t in CHANNEL_TYPES if any(fnmatchcase(t, g) for g in globs)]
    return None if len(matched) == len(CHANNEL_TYPES) else matched


def rule_from_ag2(data: Any) -> str:
    """The hub's own-rule JSON of an AG2 rule dict (None: AG2's ``Rule()``); "" when it constrains nothing.
    InvalidArgument for a field of the wrong shape, an unknown one, or one the hub cannot enforce."""
    rule = _merged({} if data is None else data, default_rule(), _SHAPE, "rule")
    access = rule["access"]
    limits = rule["limits"]
    channel_types = access["channel_types"]
    out: dict[str, Any] = {}

    hub_access: dict[str, Any] = {}
    inbound = _globs(access["inbound_from"], "rule.access.inbound_from")
    if inbound is not None:
        hub_access["inbound_from"] = {"names": inbound}
    outbound = _globs(access["outbound_to"], "rule.access.outbound_to")
    if outbound is not None:
        hub_access["peers"] = {"names": outbound}
    initiate = _types(channel_types["initiate"], "rule.access.channel_types.initiate")
    if initiate is not None:
        hub_access["channel_types"] = initiate
    if _types(channel_types["accept"], "rule.access.channel_types.accept") is not None:
        raise InvalidArgument(
            "rule.access.channel_types.accept cannot be enforced by this hub (it checks who may invite an "
            "identity, access.inbound_from, not which channel types); leave it ['*']"
        )
    if hub_access:
        out["access"] = hub_access

    hub_limits: dict[str, Any] = {}
    for ag2_name, hub_name in (
        ("max_concurrent_channels", "max_open_channels"),
        ("max_concurrent_tasks", "max_running_tasks"),
        ("delegation_depth", "max_depth"),
    ):
        value = _count(limits[ag2_name], f"rule.limits.{ag2_name}")
        if value:
            hub_limits[hub_name] = value
    ttl = parse_duration(limits["channel_ttl_default"], "rule.limits.channel_ttl_default")
    if ttl > MAX_TTL:
        raise InvalidArgument(f"rule.limits.channel_ttl_default must be at most a year ('365d'), got {ttl}s")
    if ttl:
        hub_limits["default_ttl_seconds"] = ttl
    parse_duration(limits["task_ttl_default"], "rule.limits.task_ttl_default")  # checked; AG2's hub applies none
    if hub_limits:
        out["limits"] = hub_limits

    rate = limits["rate"]
    per_minute = _count(rate["per_minute"], "rule.limits.rate.per_minute", MAX_PER_MINUTE)
    burst = _count(rate["burst"], "rule.limits.rate.burst", MAX_BURST)
    if per_minute:
        out["rate"] = {"posts_per_second": per_minute / 60, **({"burst": burst} if burst else {})}

    inbox = limits["inbox"]
    max_pending = _count(inbox["max_pending"], "rule.limits.inbox.max_pending")
    if inbox["overflow"] != "reject":
        raise InvalidArgument(
            f"rule.limits.inbox.overflow {inbox['overflow']!r} cannot be enforced by this hub: a post to a full "
            "inbox is refused (INBOX_FULL), nothing is dropped; use 'reject'"
        )
    if inbox["high_water"] not in (None, 0):
        raise InvalidArgument(
            "rule.limits.inbox.high_water cannot be enforced by this hub (it has no inbox-pressure listeners); "
            "leave it null"
        )
    if max_pending:
        out["inbox"] = {"max_pending": max_pending}
    return json.dumps(out) if out else ""


def _names(selector: Any) -> list[str]:
    if not isinstance(selector, dict):
        return list(_ANYONE)
    return [str(n) for n in selector.get("names") or []]


def rule_to_ag2(rule_json: str) -> dict[str, Any]:
    """AG2's rule dict of an identity's own hub rule ("" or none: every AG2 cap off). A hub rule set
    another way may say what AG2's ``Rule`` cannot (peers by kind or capability, ``max_ttl_seconds``):
    those parts are not shown."""
    hub = json.loads(rule_json) if rule_json else {}
    access = hub.get("access") or {}
    limits = hub.get("limits") or {}
    rate = hub.get("rate") or {}
    inbox = hub.get("inbox") or {}
    types = access.get("channel_types")
    per_second = rate.get("posts_per_second") or 0
    return {
        "version": 1,
        "access": {
            "inbound_from": _names(access.get("inbound_from")),
            "outbound_to": _names(access.get("peers")),
            "channel_types": {"initiate": list(_ANYONE) if types is None else list(types), "accept": list(_ANYONE)},
        },
        "limits": {
            "max_concurrent_channels": int(limits.get("max_open_channels") or 0),
            "max_concurrent_tasks": int(limits.get("max_running_tasks") or 0),
            "channel_ttl_default": format_duration(limits.get("default_ttl_seconds") or 0),
            "task_ttl_default": "15m",
            "rate": {
                "per_minute": max(1, round(per_second * 60)) if per_second else 0,
                "burst": int(rate.get("burst") or 0),
            },
            "delegation_depth": int(limits.get("max_depth") or 0),
            "inbox": {"max_pending": int(inbox.get("max_pending") or 0), "overflow": "reject", "high_water": None},
        },
    }
