"""AG2 task metadata of the hub's tasks."""

from __future__ import annotations

import json
from typing import Any

from agentnet.v1 import task_pb2

from ag2gateway.records.common import iso, iso_or_none

_TASK_STATE_TO_AG2 = {
    task_pb2.TASK_STATE_RUNNING: "running",
    task_pb2.TASK_STATE_COMPLETED: "completed",
    task_pb2.TASK_STATE_FAILED: "failed",
    task_pb2.TASK_STATE_CANCELLED: "cancelled",
    task_pb2.TASK_STATE_EXPIRED: "expired",
}
TASK_EVENT_FROM_AG2 = {
    "running": task_pb2.TASK_EVENT_KIND_PROGRESS,
    "completed": task_pb2.TASK_EVENT_KIND_COMPLETED,
    "failed": task_pb2.TASK_EVENT_KIND_FAILED,
    "cancelled": task_pb2.TASK_EVENT_KIND_CANCELLED,
}
"""AG2 ``update_task`` states → the hub's task event (``expired`` is the hub's to decide)."""


def task_to_ag2(task: task_pb2.TaskMetadata) -> dict[str, Any]:
    """AG2's ``TaskMetadata.to_dict()`` of a hub task."""
    state = _TASK_STATE_TO_AG2.get(task.state, "created")
    ended = state not in ("created", "running")
    return {
        "task_id": task.task_id,
        "owner_id": task.owner_id,
        "spec": {"title": task.title, "description": "", "payload": {}, "capability": task.capability or None},
        "state": state,
        "created_at": iso(task.created_at),
        "started_at": iso(task.created_at) or None,
        "completed_at": (iso(task.updated_at) or None) if ended else None,
        "expires_at": iso_or_none(task.expires_at),
        "last_progress_at": iso_or_none(task.updated_at),
        "progress": json.loads(task.progress_json) if task.progress_json else {},
        "result": json.loads(task.result_json) if task.result_json else None,
        "error": task.error,
        "channel_id": task.channel_id or None,
    }
