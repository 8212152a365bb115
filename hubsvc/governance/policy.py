"""The policy file's schema: what an operator writes, validated with pydantic.

A policy is data. The hub loads it from ``--policy FILE`` (YAML or JSON; reloaded when
the file changes) and combines it with the rule an identity carries from its
registration (``RegisterHuman.rule_json``). Every field is optional; an empty policy
allows everything the hub's built-in limits allow. docs/governance.md is the
operator's reference, with examples that the tests load.

How rules combine: an identity is governed by **every** rule that applies to it — the
policy's ``default``, each ``rules`` entry whose selector matches it, and its own rule.
An action is allowed only when every one of them allows it (so a rule an identity
brings at registration can only narrow what the operator allows), and numeric limits
take the smallest value any of them sets (:meth:`Policy.rules_for`, :class:`Effective`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Annotated, Literal, get_args

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from hubsvc.adapters import ADAPTERS
from hubsvc.core.options import duration
from netkernel.errors import InvalidArgument

Seconds = Annotated[float, Field(gt=0, le=365 * 86400)]
"""A positive duration in seconds, at most a year."""


def _duration(value: object) -> object:
    """A duration written as text (``90s``, ``15m``, ``12h``, ``30d``, ``3600``) in seconds; numbers pass."""
    return duration(value) if isinstance(value, str) else value


Duration = Annotated[float, BeforeValidator(_duration), Field(ge=0, le=100 * 365 * 86400)]
"""Seconds, written as a number or with a unit (``90s``, ``15m``, ``12h``, ``30d``), at most 100 years."""
Count = Annotated[int, Field(ge=0, le=1_000_000_000)]
"""A non-negative count."""
Glob = Annotated[str, Field(min_length=1, max_length=256)]
"""An ``fnmatch`` pattern (``*``, ``?``, ``[...]``), matched case-sensitively."""

PASSPORT_KINDS = ("agent", "remote_agent", "human")
CHANNEL_TYPES: tuple[str, ...] = tuple(ADAPTERS)
"""The channel types a policy may name: the hub's adapter registry's."""


class _Strict(BaseModel):
    """Unknown keys are an error, so a typo never silently disables a rule."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class PeerSelector(_Strict):
    """Identities picked by name, kind or claimed capability (globs). A peer matches the
    selector when it matches **any** listed name, kind or capability glob; an empty
    selector matches nobody."""

    names: tuple[Glob, ...] = ()
    kinds: tuple[Literal["agent", "remote_agent", "human"], ...] = ()
    capabilities: tuple[Glob, ...] = ()

    def matches(self, name: str, kind: str, capabilities: Iterable[str]) -> bool:
        """Whether an identity with this name, kind and claimed capabilities is selected."""
        if any(fnmatchcase(name, g) for g in self.names) or kind in self.kinds:
            return True
        caps = list(capabilities)
        return any(fnmatchcase(c, g) for g in self.capabilities for c in caps)


class AccessRule(_Strict):
    """What an identity may start, and with whom."""

    channel_types: tuple[str, ...] | None = None
    """Channel types it may open (``None`` = every type)."""
    peers: PeerSelector | None = None
    """Whom it may open channels with, invite, delegate to or call over A2A (``None`` = anyone)."""
    inbound_from: PeerSelector | None = None
    """Who may open channels with it, invite it, delegate to it or call it over A2A (``None`` = anyone):
    AG2's inbound access filter, checked against the initiator on each target's rules."""


class LimitsRule(_Strict):
    """Numeric limits of one identity."""

    max_open_channels: Count | None = None
    """Channels it opened that are still pending or open."""
    max_running_tasks: Count | None = None
    """Tasks it owns that are still running."""
    default_ttl_seconds: Seconds | None = None
    """Lifetime of a channel it opens without a TTL."""
    max_ttl_seconds: Seconds | None = None
    """Longest channel TTL it may ask for."""
    max_depth: Count | None = None
    """Deepest delegation (and A2A call) depth its envelopes and calls may carry."""


class RateRule(_Strict):
    """A token bucket over the envelopes an identity posts (RATE_LIMITED beyond)."""

    posts_per_second: Annotated[float, Field(gt=0, le=1_000_000)]
    """Tokens added per second."""
    burst: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    """Bucket size (default: ``max(1, posts_per_second)``)."""


class InboxRule(_Strict):
    """How much may wait for an identity (INBOX_FULL beyond)."""

    max_pending: Annotated[int, Field(ge=1, le=1_000_000_000)]
    """Envelopes committed for it that it has not acknowledged yet."""


class Rule(_Strict):
    """One rule; every part is optional (absent = no constraint from this rule)."""

    access: AccessRule | None = None
    limits: LimitsRule | None = None
    rate: RateRule | None = None
    inbox: InboxRule | None = None


class RuleEntry(_Strict):
    """A rule for the identities its selector matches."""

    id: Glob
    """Name of the rule, quoted in refusals and the audit log."""
    match: PeerSelector
    rule: Rule


class RegistrationRule(_Strict):
    """Who may call Register / RegisterHuman."""

    open: bool = True
    """Anyone may register (False: only the operator token may)."""
    allow: PeerSelector | None = None
    """Which passports may register (by name, kind or claimed capability; ``None`` = any)."""


ExpectationName = Literal["acks_within", "reply_within", "max_silence", "turn_within"]
ExpectationAction = Literal["audit", "notify_channel", "warn", "hide", "auto_close"]


EXPECTATION_TYPES: dict[str, frozenset[str] | None] = {
    name: frozenset(t for t, adapter in ADAPTERS.items() if name in adapter.expectations)
    for name in get_args(ExpectationName)
}
"""The channel types each expectation applies to, read from the adapters' ``expectations`` (``turn_within``
needs an adapter that names who is due: in a conversation anyone may speak at any time)."""


class ExpectationSpec(_Strict):
    """One expectation of a channel: a deadline and what the hub does when it passes."""

    seconds: Seconds
    action: ExpectationAction = "notify_channel"


class RetentionSpec(_Strict):
    """How long the hub keeps the history of one channel type's channels (docs/governance.md "Retention")."""

    ended: Duration | None = None
    """Seconds an ended channel of this type is kept before retention purges it; 0 keeps it forever,
    absent (``None``) leaves it to ``--retain-ended``."""


class Policy(_Strict):
    """The whole policy file."""

    version: Literal[1] = 1
    registration: RegistrationRule = RegistrationRule()
    default: Rule = Rule()
    """Applies to every identity."""
    rules: tuple[RuleEntry, ...] = ()
    """Apply to the identities their selectors match (every match applies)."""
    expectations: dict[str, dict[ExpectationName, ExpectationSpec | None]] = {}
    """Per channel type (``"*"`` for every type): the expectations of its channels; a channel's
    ``knobs.expectations`` overrides them one by one (``null`` turns one off)."""

    retention: dict[str, RetentionSpec] = {}
    """Per channel type: how long its ended channels are kept (``--retain-ended`` for the types not named)."""

    @field_validator("retention")
    @classmethod
    def _retention_types(cls, value: dict[str, RetentionSpec]) -> dict[str, RetentionSpec]:
        """Keys are channel types (``--retain-ended`` is the default for the others)."""
        for key in value:
            if key not in CHANNEL_TYPES:
                raise ValueError(
                    f"unknown channel type {key!r}; name one of {', '.join(CHANNEL_TYPES)} "
                    "(--retain-ended covers the types not named)"
                )
        return value

    def retain_ended(self, channel_type: str, default: float) -> float:
        """Seconds an ended channel of ``channel_type`` is kept: the policy's ``retention.<type>.ended``,
        else ``default`` (``--retain-ended``); 0 keeps it forever."""
        spec = self.retention.get(channel_type)
        return default if spec is None or spec.ended is None else spec.ended

    @field_validator("expectations")
    @classmethod
    def _known_types(
        cls, value: dict[str, dict[ExpectationName, ExpectationSpec | None]]
    ) -> dict[str, dict[ExpectationName, ExpectationSpec | None]]:
        """Keys are ``"*"`` or a channel type, and a type's entry names only expectations that apply to it."""
        for key, entries in value.items():
            if key != "*" and key not in CHANNEL_TYPES:
                raise ValueError(f"unknown channel type {key!r}; use '*' or one of {', '.join(CHANNEL_TYPES)}")
            for name in entries:
                types = EXPECTATION_TYPES[name]
                if key != "*" and types is not None and key not in types:
                    raise ValueError(f"{name} does not apply to {key} channels (only to {', '.join(sorted(types))})")
        return value

    def rules_for(
        self, name: str, kind: str, capabilities: Sequence[str], own: Rule | None = None
    ) -> list[tuple[str, Rule]]:
        """Every rule that governs this identity, with its id: ``default``, each matching entry, its own."""
        found: list[tuple[str, Rule]] = [("default", self.default)]
        found += [(e.id, e.rule) for e in self.rules if e.match.matches(name, kind, capabilities)]
        if own is not None:
            found.append(("own", own))
        return found


@dataclass(frozen=True)
class Effective:
    """The rules governing one identity, combined: every rule must allow, the smallest limit wins."""

    rules: tuple[tuple[str, Rule], ...]

    def limit(self, field: str) -> tuple[float | int | None, str]:
        """The smallest value any rule's ``limits.<field>`` sets, and the id of the rule that set it."""
        best: tuple[float | int | None, str] = (None, "")
        for rule_id, rule in self.rules:
            value = getattr(rule.limits, field) if rule.limits is not None else None
            if value is not None and (best[0] is None or value < best[0]):
                best = (value, rule_id)
        return best

    def rate(self) -> RateSpec | None:
        """The identity's token bucket: the smallest ``posts_per_second`` and the smallest burst any rule sets."""
        found: RateSpec | None = None
        for rule_id, rule in self.rules:
            if rule.rate is None:
                continue
            burst = rule.rate.burst if rule.rate.burst is not None else max(1, int(rule.rate.posts_per_second))
            if found is None:
                found = RateSpec(rule.rate.posts_per_second, burst, rule_id)
                continue
            per_second, rate_rule = found.per_second, found.rule
            if rule.rate.posts_per_second < per_second:
                per_second, rate_rule = rule.rate.posts_per_second, rule_id
            found = RateSpec(per_second, min(found.burst, burst), rate_rule)
        return found

    def inbox(self) -> tuple[int, str] | None:
        """The smallest ``inbox.max_pending`` any rule sets, and the id of the rule that set it."""
        found: tuple[int, str] | None = None
        for rule_id, rule in self.rules:
            if rule.inbox is not None and (found is None or rule.inbox.max_pending < found[0]):
                found = (rule.inbox.max_pending, rule_id)
        return found


@dataclass(frozen=True)
class RateSpec:
    """An identity's token bucket: ``per_second`` tokens added per second, at most ``burst`` held."""

    per_second: float
    burst: int
    rule: str
    """Id of the rule that set ``per_second`` (quoted in RATE_LIMITED and the audit log)."""


def parse_rule(text: str, *, what: str = "rule_json") -> Rule:
    """A rule from JSON text (InvalidArgument naming the problem otherwise)."""
    try:
        return Rule.model_validate_json(text)
    except ValidationError as err:
        raise InvalidArgument(f"{what} is not a valid rule: {_first_error(err)}", metadata={"field": what}) from None


def load_policy(path: Path) -> Policy:
    """Read and validate a policy file (YAML or JSON); ValueError says what is wrong and where."""
    import yaml  # only a hub given a policy file reads YAML: the others start without it

    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as err:
        fmt = "JSON" if path.suffix == ".json" else "YAML"
        raise ValueError(f"policy file {path} is not valid {fmt}: {err}") from None
    try:
        return Policy.model_validate(data or {})
    except ValidationError as err:
        raise ValueError(f"policy file {path} is invalid: {_first_error(err)}") from None


def _first_error(err: ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(top level)"
    return f"{where}: {first['msg']} ({len(err.errors())} problem(s) in all)"
