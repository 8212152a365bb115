"""Task operations: an owner's lifecycle reports, and everyone's reads, waits and cancel requests."""

from __future__ import annotations

import contextlib
import logging

from agentnet.v1 import hub_pb2, task_pb2

from hubsvc.core.enforcement import NO_SLOT_LIMIT
from hubsvc.core.hub import HubCore
from hubsvc.core.operations.pages import keyed_page, task_order
from hubsvc.core.placement import not_held
from hubsvc.core.tasks import TERMINAL
from hubsvc.core.util import check_seconds
from hubsvc.storage import CheckpointRow, Writes
from netkernel.channel_types import DEFAULT_WAIT_SECONDS
from netkernel.envelope import EV_TASK_CANCEL_REQUEST, EV_TASK_CANCELLED, Envelope
from netkernel.errors import AgentNetError, FailedPrecondition, InvalidArgument, NotFound, PermissionDenied
from netkernel.wire import parse_json, parse_json_object

log = logging.getLogger("agentnet.hub")


class TaskOps:
    """ReportTask, ListTasks, GetTask, WaitTask, CancelTask, CheckpointTask and ReadTaskCheckpoint."""

    def __init__(self, core: HubCore) -> None:
        self.core = core

    async def report_task(self, caller: str, request: hub_pb2.ReportTaskRequest) -> task_pb2.TaskMetadata:
        """Apply one lifecycle report from the task's owner (a channel it names must be the caller's).

        CANCELLED also posts the owner's terminal ``ag2.task.cancelled`` envelope
        (``{"task_id", "reason"}``) into the task's channel, for peers' handlers to match."""
        options = self.core.options
        if request.HasField("ttl_seconds"):
            check_seconds(request.ttl_seconds, "ttl_seconds", options.max_ttl_seconds, absent="no expiry")
        if request.payload_json:
            parse_json(request.payload_json, "payload_json", options.max_json_depth)
        if request.channel_id:
            await self.core.require_member(caller, request.channel_id)
        if request.kind == task_pb2.TASK_EVENT_KIND_CANCELLED:
            # Its envelope goes into the task's channel: the replica holding it records and posts both.
            channel_id = request.channel_id
            if not channel_id:
                with contextlib.suppress(NotFound):
                    channel_id = (await self.core.tasks.get(request.task_id)).channel_id
            self._require_holder(channel_id)
        starting = request.kind == task_pb2.TASK_EVENT_KIND_STARTED
        # A STARTED report holds one of the owner's max_running_tasks slots (LIMIT_EXCEEDED when none is free).
        async with self.core.rules.task_slot(caller) if starting else contextlib.nullcontext(NO_SLOT_LIMIT) as slot:
            task = await self.core.tasks.report(
                caller,
                request.task_id,
                request.kind,
                title=request.title,
                channel_id=request.channel_id,
                payload_json=request.payload_json,
                error=request.error,
                ttl_seconds=request.ttl_seconds if request.HasField("ttl_seconds") else None,
                hold_limit=slot.limit,
                capability=request.capability,
            )
        if request.kind == task_pb2.TASK_EVENT_KIND_CANCELLED:
            await self._post_cancelled(task)
        return task

    def _require_holder(self, channel_id: str) -> None:
        """Refuse with PartitionMoved (the call is then answered by the holder, docs/scale-out.md
        "Forwarding between replicas") when another replica holds ``channel_id``: a cancel records
        the task and posts its envelope on the one replica that may post into the channel, so the
        envelope is posted once, with nothing recorded here."""
        if channel_id and not self.core.placement.holds(channel_id):
            raise not_held(channel_id)

    async def _post_cancelled(self, task: task_pb2.TaskMetadata) -> None:
        """The owner's terminal ``ag2.task.cancelled`` envelope, into the task's channel while it is live."""
        if not task.channel_id or self.core.live_channel(task.channel_id) is None:
            return
        env = Envelope(
            channel_id=task.channel_id,
            sender_id=task.owner_id,
            audience=None,
            event_type=EV_TASK_CANCELLED,
            event_data={"task_id": task.task_id, "reason": task.error},
            task_id=task.task_id,
        )
        try:
            await self.core.post(task.owner_id, env)
        except AgentNetError as refused:  # e.g. the channel ended or its rules refuse it: the task is CANCELLED anyway
            log.info("task %s cancelled without its envelope: %s", task.task_id, refused.message)

    async def get_task(self, task_id: str) -> task_pb2.TaskMetadata:
        """One task, live or ended."""
        return await self.core.tasks.get(task_id)

    async def wait_task(self, task_id: str, timeout: float) -> tuple[task_pb2.TaskMetadata, bool]:
        """Wait up to ``timeout`` seconds for the task to end; returns (task, timed out while still running)."""
        check_seconds(
            timeout, "timeout_seconds", self.core.options.max_wait_seconds, absent=f"{DEFAULT_WAIT_SECONDS:g} seconds"
        )
        task, timed_out = await self.core.tasks.wait(task_id, timeout)
        return task, timed_out and task.state not in TERMINAL

    async def _visible_task(self, caller: str, task: task_pb2.TaskMetadata) -> bool:
        if task.owner_id == caller:
            return True
        if not task.channel_id:
            return False
        try:
            await self.core.require_member(caller, task.channel_id)
        except AgentNetError:
            return False
        return True

    async def list_tasks(
        self, caller: str, *, all_scope: bool, include_ended: bool, limit: int, page_token: str = ""
    ) -> tuple[list[task_pb2.TaskMetadata], str]:
        """Own or all visible tasks, newest first, a page of ``limit`` (0 = 20) and the next page's token."""
        if limit < 0:
            raise InvalidArgument("limit must not be negative.")
        tasks = await self.core.tasks.all() if include_ended else self.core.tasks.live()
        picked = []
        for task in tasks:
            if task.owner_id == caller or (all_scope and await self._visible_task(caller, task)):
                picked.append(task)
        return keyed_page("tasks", picked, task_order, limit or 20, page_token, descending=True)

    async def cancel_task(self, caller: str, task_id: str, reason: str) -> tuple[task_pb2.TaskMetadata, str]:
        """Ask the owner to cancel; posts EV_TASK_CANCEL_REQUEST into the task's channel when it has one."""
        task = await self.core.tasks.get(task_id)
        if not await self._visible_task(caller, task):
            raise PermissionDenied(f"task {task_id!r} is not yours and not in a channel you participate in.")
        if task.state not in TERMINAL and caller != task.owner_id:
            self._require_holder(task.channel_id)
        task = await self.core.tasks.request_cancel(task_id, reason)
        envelope_id = ""
        if task.state in TERMINAL:
            return task, envelope_id  # it ended already: nothing to ask the owner (a no-op, as in AG2)
        if task.channel_id and self.core.live_channel(task.channel_id) is not None and caller != task.owner_id:
            env = Envelope(
                channel_id=task.channel_id,
                sender_id=caller,
                audience=[task.owner_id],
                event_type=EV_TASK_CANCEL_REQUEST,
                event_data={"task_id": task_id, "reason": reason},
                task_id=task_id,
                priority="urgent",
            )
            wire, _ = await self.core.post(caller, env)
            envelope_id = wire.envelope_id
        return task, envelope_id

    async def checkpoint_task(self, caller: str, task_id: str, state_json: str) -> CheckpointRow:
        """Store ``state_json`` (a JSON object; its size is bounded by the request's field limit,
        --max-checkpoint-bytes) as the checkpoint of the caller's running task, replacing the last one."""
        task = await self.core.tasks.get(task_id)
        if task.owner_id != caller:
            raise PermissionDenied(f"task {task_id!r} is owned by another agent; only its owner checkpoints it.")
        if task.state in TERMINAL:
            raise FailedPrecondition(
                f"task {task_id!r} already ended ({task_pb2.TaskState.Name(task.state)}); "
                "checkpoint a task while it runs, and start a new task with resume_from to go on."
            )
        if not state_json:
            raise InvalidArgument("state_json is empty; send the checkpoint as a JSON object.")
        parse_json_object(state_json, "state_json", self.core.options.max_json_depth)
        row = CheckpointRow(task_id, caller, state_json, self.core.clock())
        await self.core.store.commit(Writes(checkpoints=[row]))
        return row

    async def read_task_checkpoint(self, caller: str, task_id: str) -> CheckpointRow | None:
        """The last checkpoint of the caller's task (running or ended), None when it has none or the
        task is unknown (as AG2's ``read_task_checkpoint``: nothing to resume from)."""
        try:
            task = await self.core.tasks.get(task_id)
        except NotFound:
            return None
        if task.owner_id != caller:
            raise PermissionDenied(f"task {task_id!r} is owned by another agent; only its owner reads its checkpoint.")
        return await self.core.store.get_checkpoint(task_id)
