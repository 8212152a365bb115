"""The rule checks, as pure functions of an identity's :class:`~hubsvc.governance.policy.Effective` rules.

Each check raises the refusal a client author sees (docs/governance.md "Rules") and
changes nothing; the hub's core supplies the state (peers, counts, requested TTL)
and audits the refusal. Every rule that applies must allow an action; the first
rule that does not is the one the refusal names.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hubsvc.governance.policy import Effective, PeerSelector
from netkernel.errors import DepthExceeded, LimitExceeded, RuleDenied


@dataclass(frozen=True)
class Peer:
    """What a peer selector looks at: an identity's name, kind and claimed capabilities."""

    name: str
    kind: str
    capabilities: tuple[str, ...] = ()

    def matches(self, selector: PeerSelector) -> bool:
        """Whether the selector picks this identity."""
        return selector.matches(self.name, self.kind, self.capabilities)


def describe_selector(selector: PeerSelector) -> str:
    """A selector in words, for refusal messages."""
    parts = []
    if selector.names:
        parts.append("named " + ", ".join(selector.names))
    if selector.kinds:
        parts.append("of kind " + ", ".join(selector.kinds))
    if selector.capabilities:
        parts.append("claiming " + ", ".join(selector.capabilities))
    return "peers " + "; or ".join(parts) if parts else "no peers"


def check_channel_type(rules: Effective, channel_type: str, action: str) -> None:
    """RuleDenied (check ``access.channel_types``) unless every rule lets the identity open ``channel_type``."""
    for rule_id, rule in rules.rules:
        allowed = rule.access.channel_types if rule.access is not None else None
        if allowed is not None and channel_type not in allowed:
            allows = ", ".join(allowed) if allowed else "no channel types"
            raise RuleDenied(
                f"rule {rule_id!r} does not let you {action} a {channel_type!r} channel; it allows: {allows}.",
                metadata={"rule": rule_id, "check": "access.channel_types", "channel_type": channel_type},
            )


def check_peers(rules: Effective, peers: Sequence[Peer], action: str) -> None:
    """RuleDenied (check ``access.peers``) unless every rule lets the identity reach every peer."""
    for rule_id, rule in rules.rules:
        selector = rule.access.peers if rule.access is not None else None
        if selector is None:
            continue
        for peer in peers:
            if not peer.matches(selector):
                raise RuleDenied(
                    f"rule {rule_id!r} does not let you {action} {peer.name!r} (kind {peer.kind}); "
                    f"it allows {describe_selector(selector)}.",
                    metadata={"rule": rule_id, "check": "access.peers", "peer": peer.name},
                )


def check_inbound(target_rules: Effective, target: Peer, initiator: Peer, action: str) -> None:
    """RuleDenied (check ``access.inbound_from``) unless every rule of ``target`` lets ``initiator``
    reach it (``action``: "invitations", "delegations" or "calls")."""
    for rule_id, rule in target_rules.rules:
        selector = rule.access.inbound_from if rule.access is not None else None
        if selector is not None and not initiator.matches(selector):
            accepts = describe_selector(selector)
            raise RuleDenied(
                f"{target.name!r} does not accept {action} from you ({initiator.name!r}, kind {initiator.kind}): "
                f"its rule {rule_id!r} accepts {accepts}.",
                metadata={"rule": rule_id, "check": "access.inbound_from", "peer": target.name},
            )


def check_count(rules: Effective, field: str, current: int, what: str) -> None:
    """LimitExceeded when the identity already holds ``current`` of what ``limits.<field>`` caps."""
    limit, rule_id = rules.limit(field)
    if limit is not None and current >= limit:
        raise limit_exceeded(rule_id, int(limit), field, current, what)


def limit_exceeded(rule_id: str, limit: int, field: str, current: int, what: str) -> LimitExceeded:
    """The refusal of :func:`check_count` (also given when the shared store finds the limit reached)."""
    return LimitExceeded(
        f"rule {rule_id!r} allows you at most {limit} {what} and you have {current}; end one before starting another.",
        metadata={"rule": rule_id, "limit": str(limit), "check": f"limits.{field}"},
    )


def channel_ttl(rules: Effective, requested: float | None) -> float | None:
    """The TTL of a channel the identity opens: ``requested``, else ``default_ttl_seconds``, else
    ``max_ttl_seconds`` (a rule with a maximum never lets a channel live forever); a request
    above ``max_ttl_seconds`` is RuleDenied (check ``limits.max_ttl_seconds``)."""
    most, most_rule = rules.limit("max_ttl_seconds")
    if requested is not None:
        if most is not None and requested > most:
            raise RuleDenied(
                f"rule {most_rule!r} lets your channels live at most {most:g}s; you asked for ttl_seconds "
                f"{requested:g}. Ask for {most:g} or less (or omit it).",
                metadata={"rule": most_rule, "check": "limits.max_ttl_seconds", "limit": f"{most:g}"},
            )
        return requested
    default, _ = rules.limit("default_ttl_seconds")
    if default is not None:
        return float(min(default, most)) if most is not None else float(default)
    return float(most) if most is not None else None


def depth_limit(rules: Effective, hub_max: int) -> tuple[int, str]:
    """The deepest delegation / A2A depth the identity may reach, and the rule that set it ("" = the hub's limit)."""
    limit, rule_id = rules.limit("max_depth")
    if limit is not None and limit < hub_max:
        return int(limit), rule_id
    return hub_max, ""


def check_depth(limit: tuple[int, str], depth: int, what: str = "", metadata: dict[str, str] | None = None) -> None:
    """The one depth rule: DepthExceeded when ``depth`` is above ``limit`` (the deepest depth allowed and
    the rule that set it, "" = the hub's ``--max-depth``: :func:`depth_limit`), metadata ``rule`` and
    ``check`` when a rule set it.

    ``what`` is the action that would reach ``depth`` ("delegating", "this A2A call"); "" for an
    envelope posted at that depth (admission asks for every envelope deeper than 0)."""
    most, rule_id = limit
    if depth <= most:
        return
    source = f"max_depth of rule {rule_id!r}" if rule_id else "the hub's --max-depth"
    meta = {**(metadata or {}), "limit": str(most)}
    if rule_id:
        meta.update(rule=rule_id, check="limits.max_depth")
    if what:
        message = f"{what} would reach depth {depth}, above the limit of {most} ({source}); answer directly instead."
    else:
        message = (
            f"delegation depth {depth} exceeds the limit of {most} ({source}); "
            "answer directly instead of delegating further."
        )
    raise DepthExceeded(message, metadata=meta)
