"""Identity operations: find and describe agents, and replace the caller's skill, resume or A2A settings."""

from __future__ import annotations

from collections.abc import Callable

from agentnet.v1 import a2a_pb2, identity_pb2

from hubsvc.core.hub import HubCore
from hubsvc.core.operations.pages import SortKey, keyed_page
from hubsvc.core.registry import AgentEntry
from hubsvc.core.util import from_timestamp
from netkernel.errors import InvalidArgument

_AGENT_ORDERS: dict[str, Callable[[AgentEntry], SortKey]] = {
    "name": lambda e: (e.name,),
    "registered_at": lambda e: (from_timestamp(e.record.registered_at), e.agent_id),
    "last_seen": lambda e: (-from_timestamp(e.record.last_seen_at), e.agent_id),  # most recent first
}
"""ListAgents' ``sort_by`` orders, each a sort key (unique, so a page token marks one place)."""


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
    """ListAgents, DescribeAgent, SetSkill, SetResume and SetA2ASettings."""

    def __init__(self, core: HubCore) -> None:
        self.core = core

    def find_agents(
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
        next page's token; identities an expectation's ``hide`` hides are left out."""
        if limit < 0 or limit > 1000:
            raise InvalidArgument("limit must be between 1 and 1000 (0 = 20).")
        sort_by = sort_by or "name"
        if sort_by not in _AGENT_ORDERS:
            raise InvalidArgument(f"sort_by {sort_by!r} is unknown; use name, registered_at or last_seen.")
        cap = capability.lower()
        q = query.lower()
        out = []
        for entry in self.core.registry.entries():
            r = entry.record
            if exclude_self and entry.agent_id == caller:
                continue
            if self.core.expectations.hidden(entry.agent_id):
                continue
            if kind and r.passport.kind != kind:
                continue
            if cap and cap not in (c.lower() for c in r.resume.claimed_capabilities):
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
            out.append(entry)
        page, token = keyed_page("agents", out, _AGENT_ORDERS[sort_by], limit or 20, page_token)
        return [summary(e) for e in page], token

    def describe_agent(self, ref: str) -> identity_pb2.AgentRecord:
        """The full profile of the agent named by id or passport name."""
        if not ref:
            raise InvalidArgument("name the agent by agent_id or name.")
        return self.core.registry.resolve(ref).record

    async def set_skill(self, caller: str, skill_md: str) -> identity_pb2.AgentRecord:
        """Replace the caller's skill (empty = back to the fallback)."""
        return await self.core.registry.set_skill(caller, skill_md)

    async def set_resume(self, caller: str, resume: identity_pb2.Resume) -> identity_pb2.AgentRecord:
        """Replace the caller's resume."""
        return await self.core.registry.set_resume(caller, resume)

    async def set_a2a(self, caller: str, a2a: a2a_pb2.A2ASettings) -> identity_pb2.AgentRecord:
        """Replace the caller's A2A settings."""
        return await self.core.registry.set_a2a(caller, a2a)
