"""AG2's task and checkpoint ops (and the task-event and observation reports)."""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from agentnet.v1 import hub_pb2, task_pb2

from ag2gateway import frames, records
from ag2gateway.ops.registry import op, text_param
from ag2gateway.refusals import Ag2Refusal

if TYPE_CHECKING:
    from ag2gateway.connection import Connection

log = logging.getLogger(__name__)


@op("observe_task")
async def observe_task(conn: Connection, params: dict[str, Any]) -> Any:
    """``ReportTask`` (started) as the task's owner: AG2's TaskMirror saw ``agent.task(...)`` begin."""
    meta = params["metadata"]
    spec = meta.get("spec") or {}
    request = hub_pb2.ReportTaskRequest(
        task_id=text_param(meta, "task_id"),
        kind=task_pb2.TASK_EVENT_KIND_STARTED,
        title=str(spec.get("title") or ""),
        channel_id=meta.get("channel_id") or "",
        capability=spec.get("capability") or "",
    )
    await conn.as_agent(meta.get("owner_id")).report_task(request)


@op("update_task")
async def update_task(conn: Connection, params: dict[str, Any]) -> Any:
    """``ReportTask`` (progress or the end) as the task's owner."""
    task_id = text_param(params, "task_id")
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
    await conn.as_any_bound(lambda rpc: rpc.report_task(request))
    return None


@op("get_task")
async def get_task(conn: Connection, params: dict[str, Any]) -> Any:
    """``GetTask`` as a bound identity that may see it."""
    request = hub_pb2.GetTaskRequest(task_id=text_param(params, "task_id"))
    response = await conn.as_any_bound(lambda rpc: rpc.get_task(request))
    return records.task_to_ag2(response.task)


@op("list_tasks")
async def list_tasks(conn: Connection, params: dict[str, Any]) -> Any:
    """``ListTasks`` (every task the bound identities may see), filtered as AG2's ``list_tasks``."""
    limit = min(int(params.get("limit") or 50), 1000)
    seen: dict[str, Any] = {}
    for bound in list(conn.bound.values()):
        request = hub_pb2.ListTasksRequest(scope=hub_pb2.TASK_SCOPE_ALL, include_ended=True, limit=limit)
        for task in (await bound.rpc.list_tasks(request)).tasks:
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
    request = hub_pb2.CheckpointTaskRequest(
        task_id=text_param(params, "task_id"), state_json=json.dumps(params["state"])
    )
    await conn.as_any_bound(lambda rpc: rpc.checkpoint_task(request))
    return None


@op("read_task_checkpoint")
async def read_task_checkpoint(conn: Connection, params: dict[str, Any]) -> Any:
    """``ReadTaskCheckpoint``; None when none is stored."""
    request = hub_pb2.ReadTaskCheckpointRequest(task_id=text_param(params, "task_id"))
    response = await conn.as_any_bound(lambda rpc: rpc.read_task_checkpoint(request))
    return json.loads(response.state_json) if response.found else None


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
