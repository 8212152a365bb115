"""The A2A execution log: one durable record per agent-to-agent call.

Executions form trees: a call made while answering another call is its child
(``parent_execution_id``), and every execution of a tree shares the root session
id. An execution whose hub process stopped before it ended is marked failed: its caller was
waiting on an RPC of that process. Alone on its store, a hub fails every execution it finds
running when it starts. Replicas sharing a store record which replica owns each execution (the
one whose InvokeAgent waits for it) and keep a liveness key each; a running execution whose
owner's liveness lapsed is failed by the first live replica to notice (:meth:`ExecutionLog.fail_orphans`,
a write conditional on the execution still running, so it happens once).

Which executions run, and their targets, is answered on any replica: this replica's own
(:attr:`ExecutionLog.running`, whose callers wait on it) from memory, the others' from
their stored rows (:meth:`ExecutionLog.find_running`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from agentnet.v1 import a2a_pb2

from hubsvc.core.util import Clock, audit_row, to_timestamp
from hubsvc.storage import ExecutionRow, HubStore, Writes
from netkernel.errors import InvalidArgument, LostRace, PermissionDenied

DEFAULT_LIST_LIMIT = 100
RUNNING = a2a_pb2.INVOCATION_STATUS_RUNNING


REPLICA_LOST = (
    "the hub replica that ran this call stopped before the call ended (its liveness lapsed), so its "
    "outcome is lost; call again"
)
"""The error of an execution failed because its owner replica died."""

_MAX_DEPTH_WALK = 10_000
"""Parents followed at most to find a stored execution's depth (a guard; real chains are short)."""


@dataclass
class Running:
    """A running execution, how deep in its call chain it is (1 = called outside any dispatch),
    and the call tokens this replica issued for it (secret hash -> expiry)."""

    record: a2a_pb2.Execution
    depth: int
    tokens: dict[str, float] = field(default_factory=dict)
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once this replica recorded the call's outcome (CancelExecution waits for it)."""


class ExecutionLog:
    """Records, ends and lists A2A executions."""

    def __init__(self, store: HubStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self.running: dict[str, Running] = {}
        """The executions this replica runs (InvokeAgent adds and removes them)."""
        self.owner = store.liveness.replica_id if store.liveness is not None else ""
        """This replica's id, recorded as the owner of the executions it starts ("" when alone)."""

    async def find_running(self, execution_id: str) -> Running | None:
        """The running execution ``execution_id``: this replica's, else the stored row of one another
        replica runs (its tokens are then in the store only); None when it ended or never existed."""
        running = self.running.get(execution_id)
        if running is not None:
            return running
        row = await self._store.get_execution(execution_id)
        if row is None or not row.running:
            return None
        record = a2a_pb2.Execution.FromString(row.record)
        return Running(record, await self._depth(record))

    async def get(self, execution_id: str) -> a2a_pb2.Execution | None:
        """The stored execution ``execution_id`` (running or ended), None when unknown."""
        row = await self._store.get_execution(execution_id)
        return None if row is None else a2a_pb2.Execution.FromString(row.record)

    async def depth_of(self, record: a2a_pb2.Execution) -> int:
        """How deep ``record`` is in its call chain (1 = called outside any dispatch)."""
        return await self._depth(record)

    async def continuation_of(self, record: a2a_pb2.Execution) -> a2a_pb2.Execution | None:
        """The execution that answered ``record``'s question (InvokeAgent continues_execution_id), if any."""
        rows = await self._store.list_executions(root_session_id=record.root_session_id, member_id="", limit=1_000_000)
        for row in rows:
            other = a2a_pb2.Execution.FromString(row)
            if other.continues_execution_id == record.execution_id:
                return other
        return None

    async def is_member(self, agent_id: str, root_session_id: str) -> bool:
        """Whether ``agent_id`` took part in ``root_session_id`` (as a caller or a target)."""
        return agent_id in await self._store.root_session_members(root_session_id)

    async def _depth(self, record: a2a_pb2.Execution) -> int:
        """1 + the number of stored ancestors of ``record``."""
        depth, parent = 1, record.parent_execution_id
        while parent and depth < _MAX_DEPTH_WALK:
            known = self.running.get(parent)
            if known is not None:
                return depth + known.depth
            row = await self._store.get_execution(parent)
            if row is None:
                break
            depth += 1
            parent = a2a_pb2.Execution.FromString(row.record).parent_execution_id
        return depth

    async def reload(self, execution_id: str) -> None:
        """Another replica changed ``execution_id``: if this replica runs it and the stored row has
        ended (e.g. marked failed), forget it here too, so its call tokens stop verifying."""
        if execution_id not in self.running:
            return
        row = await self._store.get_execution(execution_id)
        if row is None or not row.running:
            self.running.pop(execution_id, None)

    async def load(self) -> None:
        """Fail the executions a stopped hub process left running: alone on the store, every one
        stored as running; with replicas, those whose owner is not alive (:meth:`fail_orphans`)."""
        if self._store.liveness is not None:
            await self.fail_orphans()
            return
        rows = await self._store.load_running_executions()
        records = [a2a_pb2.Execution.FromString(row.record) for row in rows]
        for record in records:
            self.end(record, a2a_pb2.INVOCATION_STATUS_FAILED, "the hub restarted while the call was running")
        if records:
            await self.save(*records)

    async def fail_orphans(self) -> list[str]:
        """Fail the running executions whose owner replica is no longer alive; returns those this
        replica failed. Each is written on its own, conditional on the stored execution still running
        (and with its ``a2a_invoked`` audit record), so however many replicas notice, it ends once."""
        liveness = self._store.liveness
        if liveness is None:
            return []
        rows = [r for r in await self._store.load_running_executions() if r.owner != self.owner]
        if not rows:
            return []
        alive = await liveness.alive([r.owner for r in rows])
        failed = []
        for row in rows:
            if row.owner in alive:
                continue
            record = a2a_pb2.Execution.FromString(row.record)
            self.end(record, a2a_pb2.INVOCATION_STATUS_FAILED, REPLICA_LOST)
            detail = {
                "execution_id": record.execution_id,
                "status": a2a_pb2.InvocationStatus.Name(record.status),
                "replica_lost": row.owner,
            }
            writes = Writes(
                executions=[_row(record, expect_running=True)],
                audit=[audit_row("a2a_invoked", record.caller_id, record.target_id, detail, self._clock())],
            )
            try:
                await self._store.commit(writes)
            except LostRace:
                continue  # another replica failed it first, or its owner wrote its end
            failed.append(record.execution_id)
        return failed

    def start(self, record: a2a_pb2.Execution) -> None:
        """Stamp a new execution as running now (save it with :meth:`save`)."""
        record.status = RUNNING
        record.started_at.CopyFrom(to_timestamp(self._clock()))

    def end(self, record: a2a_pb2.Execution, status: a2a_pb2.InvocationStatus.ValueType, error: str = "") -> None:
        """Stamp an execution's outcome (save it with :meth:`save`)."""
        record.status = status
        record.error = error
        record.ended_at.CopyFrom(to_timestamp(self._clock()))

    def submit(self, *records: a2a_pb2.Execution) -> asyncio.Future[None]:
        """Queue the records' write; the future resolves once it is durable. Writes commit in
        submission order, so anything committed after this includes it."""
        return self._store.submit(Writes(executions=[_row(r, owner=self.owner) for r in records]))

    async def save(self, *records: a2a_pb2.Execution) -> None:
        """Durably write the records."""
        await self.submit(*records)

    async def require_member(self, agent_id: str, root_session_id: str, action: str) -> None:
        """PermissionDenied unless the root session is new or ``agent_id`` already took part in it."""
        members = await self._store.root_session_members(root_session_id)
        if members and agent_id not in members:
            raise PermissionDenied(
                f"you took no part in root session {root_session_id!r}; only its agents may {action}.",
                metadata={"root_session_id": root_session_id},
            )

    async def list(self, agent_id: str | None, root_session_id: str, limit: int) -> list[a2a_pb2.Execution]:
        """Executions of one root session ``agent_id`` took part in, or of all such sessions, in start
        order; ``agent_id`` None (the operator) may list any session, or every execution."""
        if limit < 0:
            raise InvalidArgument("limit must not be negative (0 = 100).", metadata={"field": "limit"})
        if root_session_id and agent_id is not None:
            await self.require_member(agent_id, root_session_id, "list it")
        rows = await self._store.list_executions(
            root_session_id=root_session_id, member_id=agent_id or "", limit=limit or DEFAULT_LIST_LIMIT
        )
        return [a2a_pb2.Execution.FromString(row) for row in rows]


def _row(record: a2a_pb2.Execution, *, owner: str = "", expect_running: bool = False) -> ExecutionRow:
    return ExecutionRow(
        record.execution_id,
        record.root_session_id,
        record.caller_id,
        record.target_id,
        record.status == RUNNING,
        record.started_at.seconds + record.started_at.nanos / 1e9,
        record.SerializeToString(),
        owner,
        expect_running,
    )
