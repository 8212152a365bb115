"""AG2 1.2.1's control-plane ops, each mapped onto the hub's RPCs (docs/ag2.md has the table).

An op takes the request's ``params`` and returns AG2's JSON result. Ops AG2's hub has but the hub
has no RPC for answer as documented there (``report_turn_failure`` and ``fire_task_event`` are
logged, ``record_observation`` is a no-op: the hub fills ``Resume.observed`` itself from tasks).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from agentnet.v1 import hub_pb2, identity_pb2, task_pb2

from ag2gateway import frames, ids, records
from ag2gateway.refusals import Ag2Refusal
from agentsdk.rpc import HubRpc
from netkernel.errors import NotFound

if TYPE_CHECKING:
    from ag2gateway.connection import Connection

log = logging.getLogger(__name__)

Op = Callable[["Connection", dict[str, Any]], Awaitable[Any]]
OPS: dict[str, Op] = {}

MAX_NAMES = 256
"""Agent ids one ``names_for`` resolves."""
MAX_WAL = 10_000
"""Envelopes one ``read_wal`` returns (AG2 reads whole WALs; longer channels are cut here)."""
_KINDS = {
    "agent": identity_pb2.PASSPORT_KIND_AGENT,
    "human": identity_pb2.PASSPORT_KIND_HUMAN,
    "remote_agent": identity_pb2.PASSPORT_KIND_REMOTE_AGENT,
}


def op(name: str) -> Callable[[Op], Op]:
    """Register an op."""

    def register(fn: Op) -> Op:
        OPS[name] = fn
        return fn

    return register


async def dispatch(conn: Connection, name: str, params: dict[str, Any]) -> Any:
    """Run one op (protocol_error for an unknown one, as AG2's hub answers)."""
    fn = OPS.get(name)
    if fn is None:
        raise Ag2Refusal(frames.PROTOCOL_ERROR, f"unknown control-plane op: {name!r}")
    try:
        return await fn(conn, params)
    except (KeyError, TypeError, ValueError) as err:
        raise Ag2Refusal(frames.PROTOCOL_ERROR, f"bad params for {name!r}: {err!r}") from None


def _str(params: dict[str, Any], key: str) -> str:
    value = params.get(key)
    if not isinstance(value, str) or not value:
        raise Ag2Refusal(frames.PROTOCOL_ERROR, f"params.{key} must be a non-empty string")
    return value


async def _describe(conn: Connection, name_or_id: str) -> identity_pb2.AgentRecord:
    rpc = conn.reader()
    try:
        request = hub_pb2.DescribeAgentRequest(agent_id=name_or_id)
        return (await rpc.describe_agent(request)).agent
    except NotFound:
        return (await rpc.describe_agent(hub_pb2.DescribeAgentRequest(name=name_or_id))).agent


# -- identities ------------------------------------------------------------------------------------


@op("register")
async def register(conn: Connection, params: dict[str, Any]) -> Any:
    """Register (or find again, with the same claim) and bind to this connection."""
    record, credential = await conn.identities.register(params)
    await conn.bind(record.agent_id, credential)
    return records.passport_to_ag2(record)


@op("get_agent")
async def get_agent(conn: Connection, params: dict[str, Any]) -> Any:
    """Passport by name or id."""
    return records.passport_to_ag2(await _describe(conn, _str(params, "name_or_id")))


@op("get_resume")
async def get_resume(conn: Connection, params: dict[str, Any]) -> Any:
    """Resume by id."""
    return records.resume_to_ag2((await _describe(conn, _str(params, "agent_id"))).resume)


@op("get_skill")
async def get_skill(conn: Connection, params: dict[str, Any]) -> Any:
    """Skill markdown (None when the hub only has its fallback)."""
    record = await _describe(conn, _str(params, "agent_id"))
    return None if record.skill_is_fallback else record.skill_md


@op("get_rule")
async def get_rule(conn: Connection, params: dict[str, Any]) -> Any:
    """An identity's own rule: read from the hub when it is bound here; else AG2's default (the hub shows
    a rule only to its identity and the operator)."""
    agent_id = _str(params, "agent_id")
    if agent_id in conn.bound:
        response = await conn.as_agent(agent_id).get_rule(hub_pb2.GetRuleRequest())
        return records.rule_to_ag2(response.rule_json)
    return records.default_rule()


@op("find_agent_id")
async def find_agent_id(conn: Connection, params: dict[str, Any]) -> Any:
    """Name → id, or None."""
    try:
        request = hub_pb2.DescribeAgentRequest(name=_str(params, "name"))
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
            out[agent_id] = (await _describe(conn, agent_id)).passport.name
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
    out = []
    for summary in summaries:
        if summary.name == conn.identities.directory_name:
            continue
        out.append(records.passport_to_ag2(await _describe(conn, summary.agent_id)))
    return out


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
    """``SetRule`` as the identity (see :func:`records.rule_from_ag2` for what maps)."""
    rule_json = records.rule_from_ag2(params["rule"])
    await conn.as_agent(params.get("agent_id")).set_rule(hub_pb2.SetRuleRequest(rule_json=rule_json or "{}"))


@op("unregister")
async def unregister(conn: Connection, params: dict[str, Any]) -> Any:
    """``Unregister`` as the identity; its stream on this connection stops."""
    agent_id = params.get("agent_id")
    await conn.as_agent(agent_id).unregister(hub_pb2.UnregisterRequest())
    await conn.unbind(str(agent_id))


# -- channels -------------------------------------------------------------------------------------


def _ttl(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and value[:-1].isdigit() and value[-1] in "smhd":
        return float(int(value[:-1]) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[value[-1]])
    raise Ag2Refusal(frames.PROTOCOL_ERROR, f"params.ttl must be seconds or a duration like '2h', got {value!r}")


@op("create_channel")
async def create_channel(conn: Connection, params: dict[str, Any]) -> Any:
    """``OpenChannel`` as the creator (invites go out; the channel opens once every invitee acked)."""
    creator = params.get("creator_id")
    rpc = conn.as_agent(creator)
    channel_type = _str(params, "manifest_type")
    participants = params["participants"]
    if not isinstance(participants, list) or not all(isinstance(p, str) for p in participants):
        raise Ag2Refusal(frames.PROTOCOL_ERROR, "params.participants must be a list of agent ids")
    knobs = records.knobs_from_ag2(channel_type, params.get("knobs"), params.get("labels"))
    request = hub_pb2.OpenChannelRequest(
        type=channel_type,
        targets=[p for p in participants if p != creator],
        knobs_json=json.dumps(knobs) if knobs else "",
        intent=params.get("intent") or "",
    )
    ttl = _ttl(params.get("ttl"))
    if ttl is not None:
        request.ttl_seconds = ttl
    meta = (await rpc.open_channel(request)).channel
    conn.learn_channel(meta.channel_id, str(creator))
    return records.channel_to_ag2(meta)


@op("get_channel")
async def get_channel(conn: Connection, params: dict[str, Any]) -> Any:
    """``DescribeChannel`` as a bound participant."""

    async def call(rpc: HubRpc) -> Any:
        meta = (await rpc.describe_channel(hub_pb2.DescribeChannelRequest(channel_id=params["channel_id"]))).channel
        return records.channel_to_ag2(meta)

    return await conn.on_channel(params.get("channel_id"), call)


@op("list_channels")
async def list_channels(conn: Connection, params: dict[str, Any]) -> Any:
    """``ListChannels`` of the named identity (or of every identity bound here)."""
    limit = min(int(params.get("limit") or 50), 1000)
    agent_id = params.get("agent_id")
    agents = [agent_id] if agent_id is not None else list(conn.bound)
    seen: dict[str, Any] = {}
    for agent in agents:
        conn.as_agent(agent)
        missing = conn.hub.missing(conn.bound[agent].rpc.credential)
        response = await missing.list_channels(hub_pb2.ListChannelsRequest(include_ended=True, limit=limit))
        for meta in response.channels:
            conn.learn_channel(meta.channel_id, agent)
            seen.setdefault(meta.channel_id, records.channel_to_ag2(meta))
    return list(seen.values())[:limit]


@op("close_channel")
async def close_channel(conn: Connection, params: dict[str, Any]) -> Any:
    """``CloseChannel`` as a bound participant."""

    async def call(rpc: HubRpc) -> Any:
        request = hub_pb2.CloseChannelRequest(channel_id=params["channel_id"], reason=params.get("reason") or "")
        return records.channel_to_ag2((await rpc.close_channel(request)).channel)

    return await conn.on_channel(params.get("channel_id"), call)


@op("post_envelope")
async def post_envelope(conn: Connection, params: dict[str, Any]) -> Any:
    """``PostEnvelope`` as the envelope's sender; returns the AG2 id of the admitted envelope."""
    raw = params["envelope"]
    env = records.envelope_from_ag2(raw)
    sender = raw.get("sender_id")
    rpc = conn.as_agent(sender)
    admitted = (await rpc.post_envelope(hub_pb2.PostEnvelopeRequest(envelope=env))).envelope
    conn.learn_channel(admitted.channel_id, str(sender))
    return records.envelope_to_ag2(admitted, conn.memory)["envelope_id"]


@op("read_wal")
async def read_wal(conn: Connection, params: dict[str, Any]) -> Any:
    """``ReadWal`` as a bound participant: what it may read, in admission order (``since`` / ``until``
    are list positions, as AG2's)."""
    since = int(params.get("since") or 0)
    until = params.get("until")

    async def call(rpc: HubRpc) -> Any:
        request = hub_pb2.ReadWalRequest(channel_id=params["channel_id"], limit=MAX_WAL)
        return [r.envelope async for r in rpc.read_wal(request)]

    envelopes = await conn.on_channel(params.get("channel_id"), call)
    out = [records.envelope_to_ag2(e, conn.memory) for e in envelopes]
    return out[since : None if until is None else int(until)]


@op("find_envelope_by_causation")
async def find_envelope_by_causation(conn: Connection, params: dict[str, Any]) -> Any:
    """``FindReply``: the sender's envelope answering ``causation_id``, or None."""
    request = hub_pb2.FindReplyRequest(
        channel_id=_str(params, "channel_id"),
        causation_id=ids.hub_envelope_id(_str(params, "causation_id")),
        sender=_str(params, "sender_id"),
    )

    async def call(rpc: HubRpc) -> Any:
        response = await rpc.find_reply(request)
        return records.envelope_to_ag2(response.envelope, conn.memory) if response.HasField("envelope") else None

    return await conn.on_channel(request.channel_id, call)


@op("can_send")
async def can_send(conn: Connection, params: dict[str, Any]) -> Any:
    """``CanSend`` as the sender (a substantive text when no event type is named, as AG2's probe)."""
    event_type = params.get("event_type") or "ag2.msg.text"
    request = hub_pb2.CanSendRequest(
        channel_id=_str(params, "channel_id"), event_type=records.EVENT_FROM_AG2.get(event_type, event_type)
    )
    try:
        return (await conn.as_agent(params.get("sender_id")).can_send(request)).allowed
    except NotFound:
        return False


@op("pending_turns_for")
async def pending_turns_for(conn: Connection, params: dict[str, Any]) -> Any:
    """``ListPendingTurns`` as the identity, each as AG2's ``PendingTurn``."""
    rpc = conn.as_agent(params.get("agent_id"))
    turns = (await rpc.list_pending_turns(hub_pb2.ListPendingTurnsRequest(limit=1000))).turns
    out = []
    for turn in turns:
        trigger, at = None, ""
        if turn.seq:
            request = hub_pb2.ReadWalRequest(channel_id=turn.channel_id, from_seq=turn.seq, until_seq=turn.seq, limit=1)
            async for r in rpc.read_wal(request):
                trigger, at = records.envelope_to_ag2(r.envelope, conn.memory)["envelope_id"], r.envelope.created_at
        out.append({"channel_id": turn.channel_id, "triggering_envelope_id": trigger, "expected_at": at})
    return out


@op("report_turn_failure")
async def report_turn_failure(conn: Connection, params: dict[str, Any]) -> Any:
    """No hub RPC: logged by the gateway (the hub's audit log does not see it)."""
    conn.as_agent(params.get("agent_id"))
    log.warning(
        "AG2 turn failure: agent=%s channel=%s envelope=%s error=%s",
        params.get("agent_id"),
        params.get("channel_id"),
        params.get("envelope_id"),
        str(params.get("error", ""))[:500],
    )


@op("fire_task_event")
async def fire_task_event(conn: Connection, params: dict[str, Any]) -> Any:
    """No hub RPC: a TaskMirror failure report, logged by the gateway."""
    if params.get("kind") != "mirror_failed":
        raise Ag2Refusal(
            frames.ACCESS_DENIED,
            f"only 'mirror_failed' task events are accepted over the wire, got {params.get('kind')!r}",
        )
    log.warning("AG2 task mirror failure: task=%s %s", params.get("task_id"), str(params.get("payload"))[:500])


@op("record_observation")
async def record_observation(conn: Connection, params: dict[str, Any]) -> Any:
    """A no-op: the hub records observations itself from the tasks an agent reports."""
    conn.as_agent(params.get("owner_id"))


# -- tasks ---------------------------------------------------------------------------------------


def _bound_any(conn: Connection) -> HubRpc:
    for bound in conn.bound.values():
        return bound.rpc
    raise Ag2Refusal(frames.ACCESS_DENIED, "connection has no bound agent")


@op("observe_task")
async def observe_task(conn: Connection, params: dict[str, Any]) -> Any:
    """``ReportTask`` (started) as the task's owner: AG2's TaskMirror saw ``agent.task(...)`` begin."""
    meta = params["metadata"]
    spec = meta.get("spec") or {}
    request = hub_pb2.ReportTaskRequest(
        task_id=_str(meta, "task_id"),
        kind=task_pb2.TASK_EVENT_KIND_STARTED,
        title=str(spec.get("title") or ""),
        channel_id=meta.get("channel_id") or "",
        capability=spec.get("capability") or "",
    )
    await conn.as_agent(meta.get("owner_id")).report_task(request)


@op("update_task")
async def update_task(conn: Connection, params: dict[str, Any]) -> Any:
    """``ReportTask`` (progress or the end) as the task's owner."""
    task_id = _str(params, "task_id")
    state = params.get("state") or "running"
    kind = records.TASK_EVENT_FROM_AG2.get(state)
    if kind is None:
        raise Ag2Refusal(
            frames.PROTOCOL_ERROR, f"params.state {state!r} cannot be reported; the hub expires tasks itself"
        )
    payload = params.get("result") if kind == task_pb2.TASK_EVENT_KIND_COMPLETED else params.get("progress")
    request = hub_pb2.ReportTaskRequest(
        task_id=task_id,
        kind=kind,
        payload_json=json.dumps(payload) if payload is not None else "",
        error=str(params.get("error") or ""),
    )
    last: Exception | None = None
    for bound in list(conn.bound.values()):  # AG2 names no owner here: the bound identity that owns it
        try:
            await bound.rpc.report_task(request)
            return None
        except Exception as err:
            last = err
    raise last or Ag2Refusal(frames.ACCESS_DENIED, "connection has no bound agent")


@op("get_task")
async def get_task(conn: Connection, params: dict[str, Any]) -> Any:
    """``GetTask`` as a bound identity that may see it."""
    request = hub_pb2.GetTaskRequest(task_id=_str(params, "task_id"))
    last: Exception | None = None
    for bound in list(conn.bound.values()):
        try:
            return records.task_to_ag2((await conn.hub.missing(bound.rpc.credential).get_task(request)).task)
        except Exception as err:
            last = err
    raise last or Ag2Refusal(frames.ACCESS_DENIED, "connection has no bound agent")


@op("list_tasks")
async def list_tasks(conn: Connection, params: dict[str, Any]) -> Any:
    """``ListTasks`` (every task the bound identities may see), filtered as AG2's ``list_tasks``."""
    limit = min(int(params.get("limit") or 50), 1000)
    seen: dict[str, Any] = {}
    for bound in list(conn.bound.values()):
        request = hub_pb2.ListTasksRequest(scope=hub_pb2.TASK_SCOPE_ALL, include_ended=True, limit=limit)
        for task in (await conn.hub.missing(bound.rpc.credential).list_tasks(request)).tasks:
            seen.setdefault(task.task_id, records.task_to_ag2(task))
    out = [
        t
        for t in seen.values()
        if params.get("agent_id") in (None, t["owner_id"])
        and params.get("channel_id") in (None, t["channel_id"])
        and params.get("state") in (None, t["state"])
    ]
    return out[:limit]


@op("checkpoint_task")
async def checkpoint_task(conn: Connection, params: dict[str, Any]) -> Any:
    """``CheckpointTask`` (as the bound identities in turn until one owns the task)."""
    request = hub_pb2.CheckpointTaskRequest(task_id=_str(params, "task_id"), state_json=json.dumps(params["state"]))
    last: Exception | None = None
    for bound in list(conn.bound.values()):
        try:
            await bound.rpc.checkpoint_task(request)
            return None
        except Exception as err:
            last = err
    raise last or Ag2Refusal(frames.ACCESS_DENIED, "connection has no bound agent")


@op("read_task_checkpoint")
async def read_task_checkpoint(conn: Connection, params: dict[str, Any]) -> Any:
    """``ReadTaskCheckpoint``; None when none is stored."""
    request = hub_pb2.ReadTaskCheckpointRequest(task_id=_str(params, "task_id"))
    last: Exception | None = None
    for bound in list(conn.bound.values()):
        try:
            response = await bound.rpc.read_task_checkpoint(request)
            return json.loads(response.state_json) if response.found else None
        except Exception as err:
            last = err
    raise last or Ag2Refusal(frames.ACCESS_DENIED, "connection has no bound agent")
