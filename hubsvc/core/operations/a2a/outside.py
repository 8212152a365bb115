"""Outside A2A agents: registering and refreshing them from their cards, and the calls the hub makes
to them (:mod:`hubsvc.core.remote_a2a` speaks the protocol; this module keeps the executions)."""

from __future__ import annotations

import asyncio

from agentnet.v1 import a2a_pb2, hub_pb2, identity_pb2

from hubsvc.core.executions import Running
from hubsvc.core.hub import HubCore
from hubsvc.core.operations.a2a.rules import CANCELED_TEXT
from hubsvc.core.remote_a2a import Outcome, RemoteA2A, RemoteCard, is_url, name_from_card
from hubsvc.core.util import to_timestamp
from netkernel.errors import FailedPrecondition

_CONTINUATION_SCAN = 1000
"""Executions of a root session looked through for a remote task to continue."""


class OutsideAgents:
    """RegisterRemoteA2AAgent, RefreshRemoteA2AAgent, and the hub's calls to outside agents."""

    def __init__(self, core: HubCore) -> None:
        self.core = core
        self.remote = RemoteA2A(core.options)
        """Outbound calls to outside A2A agents (off unless --a2a-outbound-allow names destinations)."""
        self._cancels: dict[str, asyncio.Event] = {}
        """Set to cancel a call to an outside agent running on this replica (CancelExecution)."""

    async def register(
        self, request: hub_pb2.RegisterRemoteA2AAgentRequest, *, by_operator: bool
    ) -> tuple[identity_pb2.AgentRecord, str]:
        """Fetch an outside agent's card and register it as a remote_agent identity."""
        fetched = await self.remote.fetch_card(request.card_url)
        passport = identity_pb2.Passport()
        passport.CopyFrom(request.passport)
        passport.kind = identity_pb2.PASSPORT_KIND_REMOTE_AGENT
        passport.name = passport.name or name_from_card(fetched.card.name)
        passport.description = passport.description or fetched.card.description
        return await self.core.register(
            passport,
            identity_pb2.Resume(),
            None,
            fetched.settings(request.a2a if request.HasField("a2a") else None),
            human=False,
            rule_json=request.rule_json,
            by_operator=by_operator,
            remote_a2a=self._stamped(fetched),
        )

    async def refresh(self, caller: str) -> identity_pb2.AgentRecord:
        """Fetch the caller's card again and replace what its identity took from it."""
        record = self.core.registry.get(caller).record
        if not record.HasField("remote_a2a"):
            raise FailedPrecondition(
                "RefreshRemoteA2AAgent refreshes an outside A2A agent registered with RegisterRemoteA2AAgent; "
                "call it with the credential that registration returned.",
            )
        fetched = await self.remote.fetch_card(record.remote_a2a.card_url)
        return await self.core.registry.set_remote_a2a(caller, self._stamped(fetched), fetched.settings(record.a2a))

    def _stamped(self, fetched: RemoteCard) -> a2a_pb2.RemoteA2AAgent:
        endpoint = a2a_pb2.RemoteA2AAgent()
        endpoint.CopyFrom(fetched.endpoint)
        endpoint.fetched_at.CopyFrom(to_timestamp(self.core.clock()))
        return endpoint

    def is_remote(self, target_id: str) -> bool:
        """Whether an execution's target is an outside A2A agent (an ad-hoc URL or a remote_agent identity)."""
        if is_url(target_id):
            return True
        record = self.core.registry.record_of(target_id)
        return record is not None and record.HasField("remote_a2a")

    def starting(self, execution_id: str) -> None:
        """A call to an outside agent starts on this replica: CancelExecution here may now stop it."""
        self._cancels[execution_id] = asyncio.Event()

    def forget(self, execution_id: str) -> None:
        """The call ended on this replica: nothing left to cancel."""
        self._cancels.pop(execution_id, None)

    async def call(
        self,
        record: a2a_pb2.Execution,
        endpoint: a2a_pb2.RemoteA2AAgent,
        request: hub_pb2.InvokeAgentRequest,
        timeout: float,
        remote_task: tuple[str, str],
    ) -> tuple[a2a_pb2.InvocationStatus.ValueType, str, str]:
        """A call to an outside A2A agent, made by the hub; CancelExecution on this replica ends it CANCELED
        (the outside agent's task itself is not cancelled)."""
        task_id, context_id = remote_task
        canceled = self._cancels.setdefault(record.execution_id, asyncio.Event())
        sending = asyncio.ensure_future(
            self.remote.send(
                endpoint,
                request.message,
                skill=request.skill,
                headers=request.custom_headers,
                timeout=timeout,
                task_id=task_id,
                context_id=context_id,
            )
        )
        stopping = asyncio.ensure_future(canceled.wait())
        try:
            await asyncio.wait({sending, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            if not sending.done():
                sending.cancel()
        if not sending.done() or sending.cancelled():
            record.remote_task_id, record.remote_context_id = task_id, context_id
            return a2a_pb2.INVOCATION_STATUS_CANCELED, "", CANCELED_TEXT
        outcome: Outcome = sending.result()
        record.remote_task_id = outcome.task_id
        record.remote_context_id = outcome.context_id
        return outcome.status, outcome.result, outcome.error

    async def task_to_continue(
        self, record: a2a_pb2.Execution, continued: a2a_pb2.Execution | None, *, joined: bool
    ) -> tuple[str, str]:
        """The remote task and context a call to an outside agent continues: those of the execution it
        answers (continues_execution_id), else of the caller's latest earlier call to the same target in
        this (joined) root session when that call ended input-required (which it then continues)."""
        if continued is not None:
            return continued.remote_task_id, continued.remote_context_id
        if not joined:
            return "", ""
        earlier = await self.core.executions.list(None, record.root_session_id, _CONTINUATION_SCAN)
        for execution in reversed(earlier):
            if execution.execution_id == record.execution_id:
                continue
            if execution.caller_id == record.caller_id and execution.target_id == record.target_id:
                if execution.status == a2a_pb2.INVOCATION_STATUS_INPUT_REQUIRED and execution.remote_task_id:
                    record.continues_execution_id = execution.execution_id
                    return execution.remote_task_id, execution.remote_context_id
                break
        return "", ""

    async def cancel(self, record: a2a_pb2.Execution, running: Running | None) -> None:
        """End a call to an outside agent CANCELED: the replica that runs it stops waiting; from
        another replica, the record is written CANCELED (which the running replica then keeps)."""
        canceled = self._cancels.get(record.execution_id)
        if canceled is not None and running is not None:
            canceled.set()
            await running.ended.wait()
            return
        self.core.executions.end(record, a2a_pb2.INVOCATION_STATUS_CANCELED, CANCELED_TEXT)
        await self.core.executions.save(record)
