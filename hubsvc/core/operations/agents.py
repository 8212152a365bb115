"""Identity operations: find and describe agents, replace the caller's skill, resume or A2A settings,
and set or read an identity's governance rule."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from agentnet.v1 import a2a_pb2, identity_pb2

from hubsvc.core.hub import HubCore
from hubsvc.core.operations.pages import SortKey, keyed_page
from hubsvc.core.registry import AgentEntry
from hubsvc.core.util import from_timestamp, to_timestamp
from hubsvc.governance.policy import Effective, parse_rule
from hubsvc.storage import HubStore
from netkernel.errors import InvalidArgument, PermissionDenied
from netkernel.identity import Passport, Resume
from netkernel.skills import render_fallback_skill

_AGENT_ORDERS: dict[str, Callable[[AgentEntry], SortKey]] = {
    "name": lambda e: (e.name,),
    "registered_at": lambda e: (from_timestamp(e.record.registered_at), e.agent_id),
    "last_seen": lambda e: (-from_timestamp(e.record.last_seen_at), e.agent_id),  # most recent first
}
"""ListAgents' ``sort_by`` orders, each a sort key (unique, so a page token marks one place)."""
OBSERVED_READS_AT_ONCE = 16
"""Track records ListAgents reads from the store at once when filtering by capability."""


def summary(entry: AgentEntry) -> identity_pb2.AgentSummary:
    """The list form of a registry entry."""
    r = entry.record
    return identity_pb2.AgentSummary(
        agent_id=r.agent_id,
        name=r.passport.name,
        kind=r.passport.kind,
        description=r.passport.description,
        claimed_capabilities=r.resume.claimed_capabilities,
        domains=r.resume.domains,
        online=r.online,
        project=r.passport.project,
    )


class AgentOps:
    """ListAgents, DescribeAgent, SetSkill, SetResume, SetA2ASettings, SetRule and GetRule."""

    def __init__(self, core: HubCore) -> None:
        self.core = core

    async def find_agents(
        self,
        caller: str,
        *,
        kind: int = 0,
        capability: str = "",
        query: str = "",
        sort_by: str = "",
        limit: int = 0,
        exclude_self: bool = False,
        page_token: str = "",
    ) -> tuple[list[identity_pb2.AgentSummary], str]:
        """Registry search (all filters ANDed), a page of ``limit`` (0 = 20) in ``sort_by`` order and the
        next page's token; identities an expectation's ``hide`` hides are left out. ``capability``
        matches a claimed capability or one in the identity's observed track record, as AG2's
        ``list_agents`` (the track record is read from the store for the identities that do not
        claim it)."""
        if limit < 0 or limit > 1000:
            raise InvalidArgument("limit must be between 1 and 1000 (0 = 20).")
        sort_by = sort_by or "name"
        if sort_by not in _AGENT_ORDERS:
            raise InvalidArgument(f"sort_by {sort_by!r} is unknown; use name, registered_at or last_seen.")
        cap = capability.lower()
        q = query.lower()
        out: list[AgentEntry] = []
        unclaimed: list[AgentEntry] = []
        hidden = await self.core.hidden_from_discovery()
        for entry in self.core.registry.entries():
            r = entry.record
            if exclude_self and entry.agent_id == caller:
                continue
            if hidden(entry.agent_id):
                continue
            if kind and r.passport.kind != kind:
                continue
            if q:
                haystack = " ".join(
                    [
                        r.passport.name,
                        r.passport.description,
                        r.resume.summary,
                        *r.resume.domains,
                        *r.resume.claimed_capabilities,
                    ]
                ).lower()
                if q not in haystack:
                    continue
            if cap and cap not in (c.lower() for c in r.resume.claimed_capabilities):
                unclaimed.append(entry)
                continue
            out.append(entry)
        if unclaimed:
            out += await self._observing(unclaimed, cap)
        page, token = keyed_page("agents", out, _AGENT_ORDERS[sort_by], limit or 20, page_token)
        return [summary(e) for e in page], token

    async def _observing(self, entries: list[AgentEntry], cap: str) -> list[AgentEntry]:
        """The entries whose observed track record has ``cap`` (lower case), read a few at a time."""
        gate = asyncio.Semaphore(OBSERVED_READS_AT_ONCE)

        async def observed(entry: AgentEntry) -> bool:
            async with gate:
                counts = await self.core.store.load_observed(entry.agent_id)
            return any(c.lower() == cap for c in counts)

        found = await asyncio.gather(*(observed(e) for e in entries))
        return [e for e, yes in zip(entries, found, strict=True) if yes]

    async def describe_agent(self, ref: str) -> identity_pb2.AgentRecord:
        """The full profile of the agent named by id or passport name."""
        if not ref:
            raise InvalidArgument("name the agent by agent_id or name.")
        return (await self.core.registry.find(ref)).record

    async def with_observed(self, record: identity_pb2.AgentRecord) -> identity_pb2.AgentRecord:
        """``record`` with the hub's observed track record in its resume (:func:`with_observed`)."""
        return await with_observed(self.core.store, record)

    async def set_skill(self, caller: str, skill_md: str) -> identity_pb2.AgentRecord:
        """Replace the caller's skill (empty = back to the fallback)."""
        return await self.core.registry.set_skill(caller, skill_md)

    async def set_resume(self, caller: str, resume: identity_pb2.Resume) -> identity_pb2.AgentRecord:
        """Replace the caller's resume."""
        return await self.core.registry.set_resume(caller, resume)

    async def set_a2a(self, caller: str, a2a: a2a_pb2.A2ASettings) -> identity_pb2.AgentRecord:
        """Replace the caller's A2A settings."""
        return await self.core.registry.set_a2a(caller, a2a)

    def _rule_subject(self, caller: str | None, agent_id: str, what: str) -> str:
        """The identity a SetRule / GetRule call is about: the calling agent's own (``agent_id`` "" or
        its id), any identity for the operator (``caller`` None, ``agent_id`` required)."""
        if caller is None:
            if not agent_id:
                raise InvalidArgument(f"{what} with the operator token needs agent_id: name the identity.")
            return self.core.registry.get(agent_id).agent_id
        if agent_id and agent_id != caller:
            raise PermissionDenied(
                f"{what} with an agent credential is about your own rule (agent_id '' or yours); another "
                "identity's rule is for the hub's operator (the operator token), whose own constraints belong "
                "in the policy file."
            )
        return caller

    async def set_rule(self, caller: str | None, agent_id: str, rule_json: str) -> identity_pb2.AgentRecord:
        """Replace an identity's own rule (validated as the policy file's rules; "" removes it); audited."""
        subject = self._rule_subject(caller, agent_id, "SetRule")
        normalized = parse_rule(rule_json).model_dump_json(exclude_none=True) if rule_json else ""
        return await self.core.registry.set_rule(subject, normalized, caller or "operator")

    def get_rule(self, caller: str | None, agent_id: str) -> tuple[str, list[tuple[str, str]], dict[str, Any]]:
        """(own rule JSON, every rule that applies as (id, JSON), the combined limits) of an identity."""
        subject = self._rule_subject(caller, agent_id, "GetRule")
        record = self.core.registry.get(subject).record
        effective = self.core.governance.effective(record)
        rules = [(rule_id, rule.model_dump_json(exclude_none=True)) for rule_id, rule in effective.rules]
        return record.rule_json, rules, combined(effective)


LIMIT_FIELDS = ("max_open_channels", "max_running_tasks", "default_ttl_seconds", "max_ttl_seconds", "max_depth")


def combined(effective: Effective) -> dict[str, Any]:
    """What an identity's rules combine to: each limit set (the smallest value, and its rule), rate and inbox."""
    limits: dict[str, Any] = {}
    for field in LIMIT_FIELDS:
        value, rule_id = effective.limit(field)
        if value is not None:
            limits[field] = {"value": value, "rule": rule_id}
    rate = effective.rate()
    inbox = effective.inbox()
    return {
        "limits": limits,
        "rate": None if rate is None else {"posts_per_second": rate.per_second, "burst": rate.burst, "rule": rate.rule},
        "inbox": None if inbox is None else {"max_pending": inbox[0], "rule": inbox[1]},
    }


async def with_observed(store: HubStore, record: identity_pb2.AgentRecord) -> identity_pb2.AgentRecord:
    """``record`` with the hub's observed track record in its resume (a copy; the stored counts of
    every capability its ended tasks were tagged with; ``last_updated`` is the latest of its last
    SetResume and its last observation; a fallback skill is rendered again with its track record)."""
    counts = await store.load_observed(record.agent_id)
    if not counts:
        return record
    out = identity_pb2.AgentRecord()
    out.CopyFrom(record)
    for capability, c in counts.items():
        n = c.completed + c.failed + c.expired + c.cancelled
        stat = out.resume.observed[capability]
        stat.n, stat.completed, stat.failed, stat.expired, stat.cancelled = (
            n,
            c.completed,
            c.failed,
            c.expired,
            c.cancelled,
        )
        stat.success_rate = c.completed / n if n else 0.0
        stat.last_latency_ms = c.last_latency_ms
        stat.last_updated.CopyFrom(to_timestamp(c.last_updated))
    latest = max(c.last_updated for c in counts.values())
    if record.resume.HasField("last_updated"):  # the last SetResume, if later than the last observation
        latest = max(latest, from_timestamp(record.resume.last_updated))
    out.resume.last_updated.CopyFrom(to_timestamp(latest))
    if out.skill_is_fallback:  # the fallback skill shows the track record too, as AG2's does
        out.skill_md = render_fallback_skill(Passport.from_wire(out.passport), Resume.from_wire(out.resume))
    return out
