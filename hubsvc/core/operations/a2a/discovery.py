"""DiscoverAgents: the A2A-enabled agents of the caller's project that the caller may invoke."""

from __future__ import annotations

from agentnet.v1 import a2a_pb2, hub_pb2

from hubsvc.core.hub import HubCore
from hubsvc.core.operations.a2a.rules import matches_any, may_call
from netkernel.errors import InvalidArgument, PermissionDenied

DEFAULT_DISCOVER_LIMIT = 50
"""Agents one DiscoverAgents answers when its limit is 0."""


async def discover(core: HubCore, caller: str, request: hub_pb2.DiscoverAgentsRequest) -> list[a2a_pb2.DiscoveredAgent]:
    """The A2A-enabled agents of the caller's project the caller may invoke, filtered (those an
    expectation's ``hide`` hides left out, whichever replica holds the channel hiding them)."""
    me = core.registry.get(caller).record
    if request.project_id and request.project_id != me.passport.project:
        raise PermissionDenied(
            f"discovery is limited to your own project ({me.passport.project!r}); "
            f"cross-project routing to {request.project_id!r} is not supported. Leave project_id empty.",
            metadata={"project_id": request.project_id},
        )
    if request.limit < 0:
        raise InvalidArgument("limit must not be negative (0 = 50).", metadata={"field": "limit"})
    limit = request.limit or DEFAULT_DISCOVER_LIMIT
    found: list[a2a_pb2.DiscoveredAgent] = []
    hidden = await core.hidden_from_discovery()
    for entry in sorted(core.registry.entries(), key=lambda e: e.name):
        record = entry.record
        settings = record.a2a
        if not may_call(me, record) or hidden(entry.agent_id):
            continue
        if not (
            matches_any(settings.skills, request.skills)
            and matches_any(settings.capabilities, request.capabilities)
            and matches_any(settings.input_modes, request.input_modes)
        ):
            continue
        found.append(
            a2a_pb2.DiscoveredAgent(
                agent_id=entry.agent_id,
                name=entry.name,
                description=settings.description or record.passport.description,
                skills=settings.skills,
                capabilities=settings.capabilities,
                input_modes=settings.input_modes,
            )
        )
        if len(found) >= limit:
            break
    return found
