"""AG2's identity and discovery ops."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from agentnet.v1 import hub_pb2, identity_pb2

from ag2gateway import frames, records
from ag2gateway.ops.registry import describe, op, text_param
from ag2gateway.refusals import Ag2Refusal
from netkernel.errors import NotFound

if TYPE_CHECKING:
    from ag2gateway.connection import Connection

log = logging.getLogger(__name__)

MAX_NAMES = 256
"""Agent ids one ``names_for`` resolves."""
DESCRIBES_AT_ONCE = 16
"""``DescribeAgent`` calls one ``list_agents`` has in flight at once (its passports are fetched concurrently)."""
_KINDS = {
    "agent": identity_pb2.PASSPORT_KIND_AGENT,
    "human": identity_pb2.PASSPORT_KIND_HUMAN,
    "remote_agent": identity_pb2.PASSPORT_KIND_REMOTE_AGENT,
}


@op("register")
async def register(conn: Connection, params: dict[str, Any]) -> Any:
    """Register (or find again, with the same claim) and bind to this connection."""
    record, credential = await conn.identities.register(params)
    await conn.bind(record.agent_id, credential)
    return records.passport_to_ag2(record)


@op("get_agent")
async def get_agent(conn: Connection, params: dict[str, Any]) -> Any:
    """Passport by name or id."""
    return records.passport_to_ag2(await describe(conn, text_param(params, "name_or_id")))


@op("get_resume")
async def get_resume(conn: Connection, params: dict[str, Any]) -> Any:
    """Resume by id."""
    return records.resume_to_ag2((await describe(conn, text_param(params, "agent_id"))).resume)


@op("get_skill")
async def get_skill(conn: Connection, params: dict[str, Any]) -> Any:
    """Skill markdown (None when the hub only has its fallback)."""
    record = await describe(conn, text_param(params, "agent_id"))
    return None if record.skill_is_fallback else record.skill_md


@op("get_rule")
async def get_rule(conn: Connection, params: dict[str, Any]) -> Any:
    """An identity's own rule as AG2's ``Rule``: read from the hub when it is bound here; else AG2's default
    (the hub shows a rule only to its identity and the operator)."""
    agent_id = text_param(params, "agent_id")
    if agent_id in conn.bound:
        response = await conn.as_agent(agent_id).get_rule(hub_pb2.GetRuleRequest())
        return records.rule_to_ag2(response.rule_json)
    return records.default_rule()


@op("find_agent_id")
async def find_agent_id(conn: Connection, params: dict[str, Any]) -> Any:
    """Name → id, or None."""
    try:
        request = hub_pb2.DescribeAgentRequest(name=text_param(params, "name"))
        return (await conn.reader().describe_agent(request)).agent.agent_id
    except NotFound:
        return None


@op("names_for")
async def names_for(conn: Connection, params: dict[str, Any]) -> Any:
    """Ids → names (unknown ids map to themselves, as AG2's ``name_for``)."""
    agent_ids = params["agent_ids"]
    if not isinstance(agent_ids, list) or len(agent_ids) > MAX_NAMES:
        raise Ag2Refusal(frames.PROTOCOL_ERROR, f"params.agent_ids must be a list of at most {MAX_NAMES} ids")
    out: dict[str, str] = {}
    for agent_id in agent_ids:
        try:
            out[agent_id] = (await describe(conn, agent_id)).passport.name
        except NotFound:
            out[agent_id] = agent_id
    return out


@op("list_agents")
async def list_agents(conn: Connection, params: dict[str, Any]) -> Any:
    """``ListAgents`` (the gateway's directory identity left out), each as a passport."""
    kind = params.get("kind")
    request = hub_pb2.ListAgentsRequest(
        kind=_KINDS.get(kind, identity_pb2.PASSPORT_KIND_UNSPECIFIED)
        if isinstance(kind, str)
        else identity_pb2.PASSPORT_KIND_UNSPECIFIED,
        capability=params.get("capability") or "",
        query=params.get("query") or "",
        sort_by=params.get("sort_by") or "",
        limit=min(int(params.get("limit") or 50), 1000),
    )
    summaries = (await conn.reader().list_agents(request)).agents
    gate = asyncio.Semaphore(DESCRIBES_AT_ONCE)

    async def passport(agent_id: str) -> Any:
        async with gate:
            return records.passport_to_ag2(await describe(conn, agent_id))

    wanted = [s.agent_id for s in summaries if s.name != conn.identities.directory_name]
    return list(await asyncio.gather(*(passport(agent_id) for agent_id in wanted)))


@op("set_resume")
async def set_resume(conn: Connection, params: dict[str, Any]) -> Any:
    """``SetResume`` as the identity."""
    resume = records.resume_from_ag2(params["resume"])
    await conn.as_agent(params.get("agent_id")).set_resume(hub_pb2.SetResumeRequest(resume=resume))


@op("set_skill")
async def set_skill(conn: Connection, params: dict[str, Any]) -> Any:
    """``SetSkill`` as the identity (None: the hub's fallback skill again)."""
    skill = params.get("skill_md")
    await conn.as_agent(params.get("agent_id")).set_skill(hub_pb2.SetSkillRequest(skill_md=skill or ""))


@op("set_rule")
async def set_rule(conn: Connection, params: dict[str, Any]) -> Any:
    """``SetRule`` as the identity: the AG2 rule mapped block by block (:mod:`ag2gateway.records.rules`)."""
    rule = params["rule"]
    if not isinstance(rule, dict):
        raise Ag2Refusal(frames.PROTOCOL_ERROR, "params.rule must be a Rule object")
    rule_json = records.rule_from_ag2(rule)
    await conn.as_agent(params.get("agent_id")).set_rule(hub_pb2.SetRuleRequest(rule_json=rule_json))


@op("unregister")
async def unregister(conn: Connection, params: dict[str, Any]) -> Any:
    """``Unregister`` as the identity; its stream on this connection stops."""
    agent_id = params.get("agent_id")
    await conn.as_agent(agent_id).unregister(hub_pb2.UnregisterRequest())
    await conn.unbind(str(agent_id))
