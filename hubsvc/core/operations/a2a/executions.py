"""GetExecution, ListExecutions and CancelExecution: the recorded calls of a root session."""

from __future__ import annotations

from agentnet.v1 import a2a_pb2

from hubsvc.core.hub import HubCore
from hubsvc.core.operations.a2a.outside import OutsideAgents
from hubsvc.core.operations.a2a.rules import CANCEL_REASON
from netkernel.errors import ChannelClosed, FailedPrecondition, InvalidArgument, NotFound, PermissionDenied
from netkernel.wire import INVOCATION_STATUS


class ExecutionOps:
    """Reading and cancelling executions (a call to an outside agent is cancelled through ``outside``)."""

    def __init__(self, core: HubCore, outside: OutsideAgents) -> None:
        self.core = core
        self.outside = outside

    async def get(self, viewer: str, execution_id: str) -> a2a_pb2.Execution:
        """One execution of a root session ``viewer`` took part in (NOT_FOUND otherwise)."""
        if not execution_id:
            raise InvalidArgument("execution_id is empty.", metadata={"field": "execution_id"})
        record = await self.core.executions.get(execution_id)
        if record is None or not await self.core.executions.is_member(viewer, record.root_session_id):
            raise NotFound(
                f"no execution {execution_id!r} in a call tree you took part in.",
                metadata={"execution_id": execution_id},
            )
        return record

    async def cancel(self, caller: str, execution_id: str) -> a2a_pb2.Execution:
        """Cancel a running execution ``caller`` made; it ends CANCELED. A hub agent's call: close its
        channel. An outside agent's call: stop waiting for its answer (the remote task is not cancelled)."""
        record = await self.get(caller, execution_id)
        if record.caller_id != caller:
            raise PermissionDenied(
                "only the caller of an execution may cancel it.", metadata={"execution_id": execution_id}
            )
        remote = self.outside.is_remote(record.target_id)
        if record.status != a2a_pb2.INVOCATION_STATUS_RUNNING or not (record.channel_id or remote):
            raise FailedPrecondition(
                f"execution {execution_id!r} is not running (it is "
                f"{INVOCATION_STATUS.name_of(record.status, 'running')}); only a running call can be cancelled.",
                metadata={"execution_id": execution_id},
            )
        running = self.core.executions.running.get(execution_id)
        if remote:
            await self.outside.cancel(record, running)
            return await self.get(caller, execution_id)
        try:
            await self.core.close_channel(caller, record.channel_id, CANCEL_REASON)
        except ChannelClosed:
            raise FailedPrecondition(
                f"execution {execution_id!r} has already ended; GetExecution shows its outcome.",
                metadata={"execution_id": execution_id},
            ) from None
        if running is not None:
            await running.ended.wait()  # this replica waits for the outcome: recorded CANCELED
        return await self.get(caller, execution_id)

    async def list(self, viewer: str | None, root_session_id: str, limit: int) -> list[a2a_pb2.Execution]:
        """An execution tree the viewer took part in (any tree, or every execution, for the operator: None)."""
        return await self.core.executions.list(viewer, root_session_id, limit)
