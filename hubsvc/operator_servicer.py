"""The OperatorService gRPC servicer: the operator's reads (proto/agentnet/v1/operator.proto).

Every RPC needs the operator token (:data:`hubsvc.rpc.OPERATOR`: an agent credential is
PERMISSION_DENIED); each method converts messages and calls one operation of
:class:`hubsvc.core.operations.operator.OperatorOps`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from agentnet.v1 import operator_pb2, operator_pb2_grpc

from hubsvc.core.operations import OperatorOps
from hubsvc.core.operations.agents import with_observed
from hubsvc.core.operations.backup import backup_stream
from hubsvc.field_limits import RefusalAudit
from hubsvc.forwarding import Forwarder
from hubsvc.rpc import OPERATOR, Authenticator, stream_rpc, unary_rpc
from servicekit.limits import RequestLimits

OPERATOR_SERVICE = operator_pb2.DESCRIPTOR.services_by_name["OperatorService"]


class OperatorServicer(operator_pb2_grpc.OperatorServiceServicer):
    """Serves agentnet.v1.OperatorService over the hub's operations, authenticated like the hub's RPCs."""

    SERVICE = OPERATOR_SERVICE

    def __init__(
        self, ops: OperatorOps, auth: Authenticator, limits: RequestLimits, audit_refusal: RefusalAudit
    ) -> None:
        self.ops = ops
        self.auth = auth
        self.limits = limits
        self.audit_refusal = audit_refusal
        self.forwarder: Forwarder | None = None
        """Sends calls about channels other replicas hold to them (set when the channels are divided):
        what only the holder knows (whose turn it is, the adapter's state) is answered there."""

    @unary_rpc(OPERATOR)
    async def GetStatus(self, caller: None, request: operator_pb2.GetStatusRequest) -> operator_pb2.GetStatusResponse:
        """Version, store, uptime and counts."""
        return await self.ops.status()

    @unary_rpc(OPERATOR)
    async def ListAgents(
        self, caller: None, request: operator_pb2.OperatorServiceListAgentsRequest
    ) -> operator_pb2.OperatorServiceListAgentsResponse:
        """Every identity, one page."""
        agents, token = self.ops.list_agents(
            online_only=request.online_only,
            page_size=request.page_size,
            page_token=request.page_token,
            agent_ids=request.agent_ids,
        )
        return operator_pb2.OperatorServiceListAgentsResponse(agents=agents, next_page_token=token)

    @unary_rpc(OPERATOR)
    async def DescribeAgent(
        self, caller: None, request: operator_pb2.OperatorServiceDescribeAgentRequest
    ) -> operator_pb2.OperatorServiceDescribeAgentResponse:
        """One identity's record."""
        record = await with_observed(self.ops.core.store, await self.ops.describe_agent(request.agent))
        return operator_pb2.OperatorServiceDescribeAgentResponse(agent=record)

    @unary_rpc(OPERATOR)
    async def ListChannels(
        self, caller: None, request: operator_pb2.OperatorServiceListChannelsRequest
    ) -> operator_pb2.OperatorServiceListChannelsResponse:
        """Every channel, newest first, one page, with whose turn it is in its live channels."""
        channels, token = await self.ops.list_channels(
            states=request.states, type=request.type, page_size=request.page_size, page_token=request.page_token
        )
        return operator_pb2.OperatorServiceListChannelsResponse(
            channels=channels, next_page_token=token, turns=self.ops.channel_turns(channels)
        )

    @unary_rpc(OPERATOR)
    async def DescribeChannel(
        self, caller: None, request: operator_pb2.OperatorServiceDescribeChannelRequest
    ) -> operator_pb2.OperatorServiceDescribeChannelResponse:
        """One channel: metadata, whose turn, adapter state."""
        return await self.ops.describe_channel(request.channel_id)

    @stream_rpc(OPERATOR)
    async def ReadWal(
        self, caller: None, request: operator_pb2.OperatorServiceReadWalRequest
    ) -> AsyncIterator[operator_pb2.OperatorServiceReadWalResponse]:
        """Any channel's WAL from a seq, optionally following."""
        async for wire in self.ops.stream_wal(
            request.channel_id, request.from_seq, request.until_seq, request.limit, follow=request.follow
        ):
            yield operator_pb2.OperatorServiceReadWalResponse(envelope=wire)

    @unary_rpc(OPERATOR)
    async def ListTasks(
        self, caller: None, request: operator_pb2.OperatorServiceListTasksRequest
    ) -> operator_pb2.OperatorServiceListTasksResponse:
        """Every task, newest first, one page."""
        tasks, token = await self.ops.list_tasks(
            include_ended=request.include_ended, page_size=request.page_size, page_token=request.page_token
        )
        return operator_pb2.OperatorServiceListTasksResponse(tasks=tasks, next_page_token=token)

    @unary_rpc(OPERATOR)
    async def GetTask(
        self, caller: None, request: operator_pb2.OperatorServiceGetTaskRequest
    ) -> operator_pb2.OperatorServiceGetTaskResponse:
        """One task."""
        return operator_pb2.OperatorServiceGetTaskResponse(task=await self.ops.get_task(request.task_id))

    @unary_rpc(OPERATOR)
    async def ListExecutions(
        self, caller: None, request: operator_pb2.OperatorServiceListExecutionsRequest
    ) -> operator_pb2.OperatorServiceListExecutionsResponse:
        """A root session's or an execution's A2A call tree."""
        executions, truncated = await self.ops.list_executions(
            root_session_id=request.root_session_id, execution_id=request.execution_id, limit=request.limit
        )
        return operator_pb2.OperatorServiceListExecutionsResponse(executions=executions, truncated=truncated)

    @stream_rpc(OPERATOR)
    async def FollowAudit(
        self, caller: None, request: operator_pb2.FollowAuditRequest
    ) -> AsyncIterator[operator_pb2.FollowAuditResponse]:
        """The audit log from after_id, then each new record."""
        async for record in self.ops.follow_audit(request.kind, request.subject_id, request.after_id):
            yield operator_pb2.FollowAuditResponse(record=record)

    @stream_rpc(OPERATOR)
    async def Backup(
        self, caller: None, request: operator_pb2.BackupRequest
    ) -> AsyncIterator[operator_pb2.BackupResponse]:
        """A consistent copy of the store, its bytes in order, then the summary."""
        async for response in backup_stream(self.ops.core.store):
            yield response
