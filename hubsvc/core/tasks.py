"""Task mirror: lifecycle reported by owners, observed by everyone allowed.

Task lifecycle does not travel as envelopes: owners report
started / progress / completed / failed / cancelled, and the hub keeps the
TaskMetadata. Waiters are woken on every terminal transition. A task tied to a
channel is cancelled when the channel ends.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Callable
from typing import Any

from agentnet.v1 import task_pb2
from opentelemetry import trace

from hubsvc.core.util import BoundedDict, Clock, from_timestamp, new_id, to_timestamp
from hubsvc.storage import TASK_IF_LIVE, TASK_LIVE, TASK_NEW, AtLimit, HubStore, ObservationRow, TaskRow, Writes
from netkernel.errors import FailedPrecondition, InvalidArgument, NotFound, PermissionDenied

log = logging.getLogger("agentnet.hub")

TERMINAL = frozenset(
    {
        task_pb2.TASK_STATE_COMPLETED,
        task_pb2.TASK_STATE_FAILED,
        task_pb2.TASK_STATE_CANCELLED,
        task_pb2.TASK_STATE_EXPIRED,
    }
)
_KIND_TO_STATE = {
    task_pb2.TASK_EVENT_KIND_COMPLETED: task_pb2.TASK_STATE_COMPLETED,
    task_pb2.TASK_EVENT_KIND_FAILED: task_pb2.TASK_STATE_FAILED,
    task_pb2.TASK_EVENT_KIND_CANCELLED: task_pb2.TASK_STATE_CANCELLED,
}


def _check_json(text: str, what: str) -> str:
    if text:
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidArgument(f"{what} is not valid JSON ({exc.msg}); send any JSON value.") from None
    return text


class TaskMirror:
    """All tasks the hub knows."""

    def __init__(
        self,
        store: HubStore,
        clock: Clock,
        audit: Callable[[str, str, str, dict[str, Any]], Any],
        tracer: trace.Tracer | None = None,
    ) -> None:
        self._store = store
        self._clock = clock
        self._audit = audit
        self._tracer = tracer
        """Records each task's lifecycle as one span when it ends (None: no tracing, no cost)."""
        self._live: dict[str, task_pb2.TaskMetadata] = {}
        self._ended: BoundedDict[str, task_pb2.TaskMetadata] = BoundedDict(10_000)
        """Recently ended tasks, so readers never see a stale row while its write is in flight."""
        self._changed: dict[str, asyncio.Event] = {}

    async def load(self) -> None:
        """Read the running tasks."""
        for row in await self._store.load_tasks(live_only=True):
            self._live[row.task_id] = task_pb2.TaskMetadata.FromString(row.record)

    async def get(self, task_id: str) -> task_pb2.TaskMetadata:
        """A task by id (live or ended)."""
        task = self._live.get(task_id) or self._ended.get(task_id)
        if task is not None:
            return task
        row = await self._store.get_task(task_id)
        if row is None:
            raise NotFound(f"no task with id {task_id!r}; list tasks with tasks(action='list').")
        return task_pb2.TaskMetadata.FromString(row.record)

    def live(self) -> list[task_pb2.TaskMetadata]:
        """Running tasks."""
        return list(self._live.values())

    async def all(self) -> list[task_pb2.TaskMetadata]:
        """Every task, ended ones included."""
        return [task_pb2.TaskMetadata.FromString(r.record) for r in await self._store.load_tasks(live_only=False)]

    async def report(
        self,
        owner_id: str,
        task_id: str,
        kind: int,
        *,
        title: str = "",
        channel_id: str = "",
        payload_json: str = "",
        error: str = "",
        ttl_seconds: float | None = None,
        hold_limit: int | None = None,
        capability: str = "",
    ) -> task_pb2.TaskMetadata:
        """Apply one lifecycle report from the task's owner (a start written with ``hold_limit``, the
        owner's ``max_running_tasks``, for the store to check: ``TaskRow.hold_limit``)."""
        now = self._clock()
        if kind == task_pb2.TASK_EVENT_KIND_STARTED:
            task_id = task_id or new_id()
            if task_id in self._live or await self._store.get_task(task_id) is not None:
                raise FailedPrecondition(
                    f"task {task_id!r} was already started; report progress or completion instead."
                )
            task = task_pb2.TaskMetadata(
                task_id=task_id,
                owner_id=owner_id,
                channel_id=channel_id,
                title=title,
                state=task_pb2.TASK_STATE_RUNNING,
                capability=capability,
            )
            task.created_at.CopyFrom(to_timestamp(now))
            if ttl_seconds is not None:
                if ttl_seconds <= 0:
                    raise InvalidArgument("ttl_seconds must be positive; omit it for a task without expiry.")
                task.expires_at.CopyFrom(to_timestamp(now + ttl_seconds))
        else:
            if kind not in (task_pb2.TASK_EVENT_KIND_PROGRESS, *_KIND_TO_STATE):
                raise InvalidArgument("kind must be STARTED, PROGRESS, COMPLETED, FAILED or CANCELLED.")
            task = _copy(await self.get(task_id))  # memory changes only once the write commits
            if task.owner_id != owner_id:
                raise PermissionDenied(f"task {task_id!r} is owned by another agent; only its owner reports on it.")
            if task.state in TERMINAL:
                raise FailedPrecondition(
                    f"task {task_id!r} already ended ({task_pb2.TaskState.Name(task.state)}); it cannot change again."
                )
            if kind == task_pb2.TASK_EVENT_KIND_PROGRESS:
                task.progress_json = _check_json(payload_json, "payload_json")
            else:
                task.state = _KIND_TO_STATE[task_pb2.TaskEventKind.ValueType(kind)]
                if kind == task_pb2.TASK_EVENT_KIND_COMPLETED:
                    task.result_json = _check_json(payload_json, "payload_json")
                task.error = error
        task.updated_at.CopyFrom(to_timestamp(now))
        await self._save(task, TASK_NEW if kind == task_pb2.TASK_EVENT_KIND_STARTED else TASK_LIVE, hold_limit)
        return task

    async def request_cancel(self, task_id: str, reason: str) -> task_pb2.TaskMetadata:
        """Mark a cancel request (the caller posts the envelope to the owner).

        A task that already ended is returned as it is: cancelling it is a no-op (nothing
        is written), so a cancel racing the task's end, or sent twice, is not an error."""
        task = _copy(await self.get(task_id))
        if task.state in TERMINAL:
            return task
        task.cancel_requested = True
        task.cancel_reason = reason
        task.updated_at.CopyFrom(to_timestamp(self._clock()))
        try:
            await self._save(task, TASK_LIVE)
        except FailedPrecondition:
            stored = await self.get(task_id)
            if stored.state in TERMINAL:
                return stored  # another replica ended it meanwhile: a no-op as well
            raise
        return task

    def end_for_channel(self, channel_id: str, reason: str) -> list[task_pb2.TaskMetadata]:
        """The running tasks of an ending channel, cancelled (copies: commit their :meth:`rows` with the
        close, then :meth:`apply` them once it committed). Their rows are written only to a task
        still live in the store (:data:`~hubsvc.storage.TASK_IF_LIVE`): another replica may have
        ended one that this replica's copy still shows running."""
        ended = []
        now = self._clock()
        for live in [t for t in self._live.values() if t.channel_id == channel_id]:
            task = _copy(live)
            task.state = task_pb2.TASK_STATE_CANCELLED
            task.error = f"channel ended: {reason}"
            task.updated_at.CopyFrom(to_timestamp(now))
            ended.append(task)
        return ended

    def expire_due(self) -> list[task_pb2.TaskMetadata]:
        """The running tasks past their expiry, expired (copies, as for :meth:`end_for_channel`)."""
        now = self._clock()
        expired = []
        for live in list(self._live.values()):
            if live.HasField("expires_at") and from_timestamp(live.expires_at) <= now:
                task = _copy(live)
                task.state = task_pb2.TASK_STATE_EXPIRED
                task.error = "task expired"
                task.updated_at.CopyFrom(to_timestamp(now))
                expired.append(task)
        return expired

    def rows(self, tasks: list[task_pb2.TaskMetadata]) -> list[TaskRow]:
        """The storage rows of tasks :meth:`end_for_channel` ended (each written only if still live)."""
        return [self._row(t, TASK_IF_LIVE) for t in tasks]

    def apply(self, tasks: list[task_pb2.TaskMetadata]) -> None:
        """Make the committed ends of :meth:`end_for_channel` current in memory, for the tasks still
        running here (one that ended meanwhile — another replica's end, learnt from the change feed —
        keeps that end, as the store did)."""
        for task in tasks:
            if task.task_id in self._live:
                self._apply(task)

    async def expiry_loop(self, interval: float) -> None:
        """Every ``interval`` seconds, expire the running tasks past their expiry, until cancelled."""
        while True:
            await asyncio.sleep(interval)
            await self.expire()

    async def expire(self) -> list[task_pb2.TaskMetadata]:
        """Expire the running tasks past their expiry; returns those this hub expired.

        Each expiry is its own write, conditional on the stored task still running
        (:data:`~hubsvc.storage.TASK_LIVE`): when several replicas sweep the same task, the
        first write wins and the others, refused, read the task's stored state instead — so
        one expiry (and one ``task_terminated`` audit record) is committed. A write that fails
        for another reason is tried again at the next sweep."""
        expired = self.expire_due()
        results = await asyncio.gather(
            *(
                self._store.submit(Writes(tasks=[self._row(t, TASK_LIVE)], observations=observation(t)))
                for t in expired
            ),
            return_exceptions=True,
        )
        done = []
        for task, result in zip(expired, results, strict=True):
            if result is None:
                self._apply(task)
                done.append(task)
                continue
            try:
                ended = await self.reload(task.task_id)
            except Exception:
                ended = False
            if not ended:
                log.warning(
                    "could not store the expiry of task %s (%s); retrying at the next sweep", task.task_id, result
                )
        return done

    async def reload(self, task_id: str) -> bool:
        """Make the stored state of ``task_id`` current in memory (another replica changed it) and
        wake its waiters; True when the stored task has ended. A task that ended in memory stays
        ended (a task ends once). Audits nothing: the replica whose write ended it did."""
        row = await self._store.get_task(task_id)
        if row is None:
            self._live.pop(task_id, None)
            self._notify(task_id)
            return False
        task = task_pb2.TaskMetadata.FromString(row.record)
        if task.state in TERMINAL:
            self._live.pop(task_id, None)
            self._ended[task_id] = task
        elif task_id not in self._ended:
            self._live[task_id] = task
        self._notify(task_id)
        return task.state in TERMINAL

    async def wait(self, task_id: str, timeout: float) -> tuple[task_pb2.TaskMetadata, bool]:
        """Block until the task is terminal or ``timeout`` passes; returns (task, timed_out)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            task = await self.get(task_id)
            if task.state in TERMINAL:
                return task, False
            remaining = deadline - loop.time()
            if remaining <= 0:
                return task, True
            event = self._changed.setdefault(task_id, asyncio.Event())
            try:
                await asyncio.wait_for(event.wait(), remaining)
            except TimeoutError:
                pass

    async def _save(self, task: task_pb2.TaskMetadata, expect: str, hold_limit: int | None = None) -> None:
        """Write the task's new state if the stored task is as ``expect`` says, then make it current
        (a failed write changes nothing here). A write refused because another replica started or
        ended the task first is FAILED_PRECONDITION, like the same report on that replica."""
        try:
            await self._store.commit(
                Writes(
                    tasks=[dataclasses.replace(self._row(task, expect), hold_limit=hold_limit)],
                    observations=observation(task),
                )
            )
        except AtLimit:
            raise  # the owner holds its limit of running tasks (the caller answers LimitExceeded)
        except Exception:
            try:
                ended = await self.reload(task.task_id)
            except Exception:
                ended = False
            if expect == TASK_NEW and (task.task_id in self._live or ended):
                raise FailedPrecondition(
                    f"task {task.task_id!r} was already started; report progress or completion instead."
                ) from None
            if expect == TASK_LIVE and ended:
                raise FailedPrecondition(f"task {task.task_id!r} already ended; it cannot change again.") from None
            raise
        self._apply(task)

    def _apply(self, task: task_pb2.TaskMetadata) -> None:
        if task.state in TERMINAL:
            self._finish(task)
        else:
            self._live[task.task_id] = task
            self._notify(task.task_id)

    def _finish(self, task: task_pb2.TaskMetadata) -> None:
        if task.task_id in self._live:
            self._audit("task_terminated", task.owner_id, task.task_id, {"state": task_pb2.TaskState.Name(task.state)})
            if self._tracer is not None:
                _record_span(self._tracer, task)
        self._live.pop(task.task_id, None)
        self._ended[task.task_id] = task
        self._notify(task.task_id)

    def _notify(self, task_id: str) -> None:
        event = self._changed.pop(task_id, None)
        if event is not None:
            event.set()

    @staticmethod
    def _row(task: task_pb2.TaskMetadata, expect: str = "") -> TaskRow:
        terminal = task.state in TERMINAL
        return TaskRow(task.task_id, task.owner_id, task.channel_id, terminal, task.SerializeToString(), expect)


def _record_span(tracer: trace.Tracer, task: task_pb2.TaskMetadata) -> None:
    """The task's lifecycle as one span, from its start to the end this replica wrote (both times from
    the task's record, so a task started before a restart or on another replica is whole too)."""
    span = tracer.start_span(
        "agentnet.hub.task",
        start_time=task.created_at.ToNanoseconds(),
        attributes={
            "agentnet.task_id": task.task_id,
            "agentnet.owner_id": task.owner_id,
            "agentnet.channel_id": task.channel_id,
            "agentnet.title": task.title,
            "agentnet.capability": task.capability,
            "agentnet.task_state": task_pb2.TaskState.Name(task.state),
            "agentnet.error": task.error,
        },
    )
    if task.state in (task_pb2.TASK_STATE_FAILED, task_pb2.TASK_STATE_EXPIRED):
        span.set_status(trace.StatusCode.ERROR, task.error or task_pb2.TaskState.Name(task.state))
    elif task.state == task_pb2.TASK_STATE_COMPLETED:  # as AG2's network.task span
        span.set_status(trace.StatusCode.OK)
    span.end(end_time=task.updated_at.ToNanoseconds())


_OUTCOME = {
    task_pb2.TASK_STATE_COMPLETED: "completed",
    task_pb2.TASK_STATE_FAILED: "failed",
    task_pb2.TASK_STATE_EXPIRED: "expired",
    task_pb2.TASK_STATE_CANCELLED: "cancelled",
}


def observation(task: task_pb2.TaskMetadata) -> list[ObservationRow]:
    """What a write ending ``task`` adds to its owner's track record (AG2's Resume.observed): one count
    of its outcome under its capability, with its start-to-end latency; nothing for an untagged or a
    running task. Written only with a conditional end (an owner's report, an expiry), so it counts once."""
    outcome = _OUTCOME.get(task.state)
    if not task.capability or outcome is None:
        return []
    ended = from_timestamp(task.updated_at)
    latency_ms = max(0, round((ended - from_timestamp(task.created_at)) * 1000))
    return [ObservationRow(task.owner_id, task.capability, outcome, latency_ms, ended)]


def _copy(task: task_pb2.TaskMetadata) -> task_pb2.TaskMetadata:
    out = task_pb2.TaskMetadata()
    out.CopyFrom(task)
    return out
