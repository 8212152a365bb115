"""The typed client layer of the hub: :class:`HubRpc` (every ``agentnet.v1.HubService`` RPC) and
:class:`OperatorRpc` (every ``agentnet.v1.OperatorService`` RPC), one typed method each, named after
the RPC in snake case (``tests/sdk_net/test_rpc.py`` checks both against the services' descriptors;
:class:`agentsdk.knowledge.rpc.KnowledgeRpc` is the knowledge service's).

Every method takes the RPC's request message and returns its response message (a streaming RPC
returns its stream), so mypy checks both; a failure raises the hub's domain exception
(:mod:`netkernel.errors`). A ``HubRpc`` acts as one identity: it sends the credential it was built
with (none for ``Register`` / ``RegisterHuman``; the operator token for the operator's calls). A unary
method takes ``timeout`` seconds (None: no deadline). The calls that post (``PostEnvelope``,
``OpenChannel``, ``CallTool``, ``InvokeAgent``, ``Delegate``, ``Say``) back off and retry on
RATE_LIMITED as the connection's ``rate_limit_backoff`` says (:mod:`agentsdk.backoff`).
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import AsyncIterator

import grpc
from agentnet.v1 import connect_pb2, hub_pb2, operator_pb2, operator_pb2_grpc
from google.protobuf.message import Message

from agentsdk.backoff import RateLimitBackoff, retry_rate_limited
from agentsdk.transport import (
    HubConnection,
    ResponseT,
    StreamCall,
    UnaryMethod,
    bearer,
    checked,
    server_stream,
    unary,
)
from netkernel.errors import error_from_rpc

__all__ = ["ConnectStream", "HubRpc", "OperatorRpc", "StreamCall"]


class ConnectStream:
    """A running ``Connect`` call: iterate it for the hub's frames; :meth:`cancel` ends it."""

    def __init__(self, call: StreamCall) -> None:
        self._call = call

    async def __aiter__(self) -> AsyncIterator[connect_pb2.ConnectResponse]:
        """The hub's frames in order; a failed stream raises the hub's domain exception."""
        try:
            async for frame in self._call:
                yield checked(frame, connect_pb2.ConnectResponse)
        except grpc.aio.AioRpcError as err:
            raise error_from_rpc(err) from None

    def cancel(self) -> None:
        """End the call (a no-op once it ended)."""
        self._call.cancel()


class HubRpc:
    """Every HubService RPC as one identity (``credential`` "" = anonymous, for registration; the
    operator token for the operator's calls: ``SetRule`` / ``GetRule`` of any identity, ``ListAudit``)."""

    def __init__(
        self, connection: HubConnection, credential: str = "", *, backoff: RateLimitBackoff | None = None
    ) -> None:
        self.connection = connection
        self.credential = credential
        self._metadata = bearer(credential) if credential else None
        self._backoff = backoff
        """Overrides the connection's ``rate_limit_backoff`` (the Connect stream's fallback retries itself)."""

    def as_identity(self, credential: str) -> HubRpc:
        """The same connection acting as the identity holding ``credential``."""
        return HubRpc(self.connection, credential)

    async def _unary(
        self, method: UnaryMethod, request: Message, response_type: type[ResponseT], timeout: float | None
    ) -> ResponseT:
        return await unary(method, request, response_type, metadata=self._metadata, timeout=timeout)

    async def _posting(
        self, method: UnaryMethod, request: Message, response_type: type[ResponseT], timeout: float | None
    ) -> ResponseT:
        """A call that posts an envelope: retried on RATE_LIMITED (a refusal that changed nothing)."""
        policy = self._backoff or self.connection.rate_limit_backoff
        return await retry_rate_limited(lambda: self._unary(method, request, response_type, timeout), policy)

    # -- live session ---------------------------------------------------------------------

    def connect(self, requests: AsyncIterator[connect_pb2.ConnectRequest]) -> ConnectStream:
        """``Connect``: open the live stream with the client's frames (the credential travels in their ``Hello``)."""
        return ConnectStream(self.connection.stub.Connect(requests))

    # -- identities ----------------------------------------------------------------------

    async def register(
        self, request: hub_pb2.RegisterRequest, *, timeout: float | None = None
    ) -> hub_pb2.RegisterResponse:
        """``Register``: create an agent identity and issue its credential. A request without an
        idempotency key gets a fresh random one here (kept on ``request``), so gRPC's retry after a lost
        answer (:data:`agentsdk.transport.RETRY_SERVICE_CONFIG`) returns the identity the first attempt
        created instead of ALREADY_EXISTS."""
        _key_registration(request)
        return await self._unary(self.connection.stub.Register, request, hub_pb2.RegisterResponse, timeout)

    async def register_human(
        self, request: hub_pb2.RegisterHumanRequest, *, timeout: float | None = None
    ) -> hub_pb2.RegisterHumanResponse:
        """``RegisterHuman``: create a non-LLM participant and issue its credential (keyed as
        :meth:`register`)."""
        _key_registration(request)
        return await self._unary(self.connection.stub.RegisterHuman, request, hub_pb2.RegisterHumanResponse, timeout)

    async def unregister(
        self, request: hub_pb2.UnregisterRequest, *, timeout: float | None = None
    ) -> hub_pb2.UnregisterResponse:
        """``Unregister``: remove the caller's identity (its live channels close)."""
        return await self._unary(self.connection.stub.Unregister, request, hub_pb2.UnregisterResponse, timeout)

    async def set_resume(
        self, request: hub_pb2.SetResumeRequest, *, timeout: float | None = None
    ) -> hub_pb2.SetResumeResponse:
        """``SetResume``: replace the caller's resume."""
        return await self._unary(self.connection.stub.SetResume, request, hub_pb2.SetResumeResponse, timeout)

    async def set_rule(
        self, request: hub_pb2.SetRuleRequest, *, timeout: float | None = None
    ) -> hub_pb2.SetRuleResponse:
        """``SetRule``: replace the caller's own governance rule."""
        return await self._unary(self.connection.stub.SetRule, request, hub_pb2.SetRuleResponse, timeout)

    async def get_rule(
        self, request: hub_pb2.GetRuleRequest, *, timeout: float | None = None
    ) -> hub_pb2.GetRuleResponse:
        """``GetRule``: the rules governing the caller."""
        return await self._unary(self.connection.stub.GetRule, request, hub_pb2.GetRuleResponse, timeout)

    async def list_agents(
        self, request: hub_pb2.ListAgentsRequest, *, timeout: float | None = None
    ) -> hub_pb2.ListAgentsResponse:
        """``ListAgents``: identities matching the filters."""
        return await self._unary(self.connection.stub.ListAgents, request, hub_pb2.ListAgentsResponse, timeout)

    async def describe_agent(
        self, request: hub_pb2.DescribeAgentRequest, *, timeout: float | None = None
    ) -> hub_pb2.DescribeAgentResponse:
        """``DescribeAgent``: one identity's registry entry."""
        return await self._unary(self.connection.stub.DescribeAgent, request, hub_pb2.DescribeAgentResponse, timeout)

    async def set_skill(
        self, request: hub_pb2.SetSkillRequest, *, timeout: float | None = None
    ) -> hub_pb2.SetSkillResponse:
        """``SetSkill``: replace the caller's skill markdown."""
        return await self._unary(self.connection.stub.SetSkill, request, hub_pb2.SetSkillResponse, timeout)

    async def set_a2a_settings(
        self, request: hub_pb2.SetA2ASettingsRequest, *, timeout: float | None = None
    ) -> hub_pb2.SetA2ASettingsResponse:
        """``SetA2ASettings``: replace the caller's agent-to-agent settings."""
        return await self._unary(self.connection.stub.SetA2ASettings, request, hub_pb2.SetA2ASettingsResponse, timeout)

    # -- channels ------------------------------------------------------------------------

    async def open_channel(
        self, request: hub_pb2.OpenChannelRequest, *, timeout: float | None = None
    ) -> hub_pb2.OpenChannelResponse:
        """``OpenChannel``: create a channel and invite its targets."""
        return await self._posting(self.connection.stub.OpenChannel, request, hub_pb2.OpenChannelResponse, timeout)

    async def close_channel(
        self, request: hub_pb2.CloseChannelRequest, *, timeout: float | None = None
    ) -> hub_pb2.CloseChannelResponse:
        """``CloseChannel``: close a channel the caller participates in."""
        return await self._unary(self.connection.stub.CloseChannel, request, hub_pb2.CloseChannelResponse, timeout)

    async def describe_channel(
        self, request: hub_pb2.DescribeChannelRequest, *, timeout: float | None = None
    ) -> hub_pb2.DescribeChannelResponse:
        """``DescribeChannel``: metadata, adapter state, offered tools and default view."""
        return await self._unary(
            self.connection.stub.DescribeChannel, request, hub_pb2.DescribeChannelResponse, timeout
        )

    async def list_channels(
        self, request: hub_pb2.ListChannelsRequest, *, timeout: float | None = None
    ) -> hub_pb2.ListChannelsResponse:
        """``ListChannels``: a page of the channels the caller participates in, newest first."""
        return await self._unary(self.connection.stub.ListChannels, request, hub_pb2.ListChannelsResponse, timeout)

    async def list_pending_turns(
        self, request: hub_pb2.ListPendingTurnsRequest, *, timeout: float | None = None
    ) -> hub_pb2.ListPendingTurnsResponse:
        """``ListPendingTurns``: a page of the turns the caller's live channels await from it."""
        return await self._unary(
            self.connection.stub.ListPendingTurns, request, hub_pb2.ListPendingTurnsResponse, timeout
        )

    def read_wal(self, request: hub_pb2.ReadWalRequest) -> AsyncIterator[hub_pb2.ReadWalResponse]:
        """``ReadWal``: the caller's readable part of a channel's WAL, in seq order."""
        return server_stream(self.connection.stub.ReadWal, request, hub_pb2.ReadWalResponse, metadata=self._metadata)

    async def post_envelope(
        self, request: hub_pb2.PostEnvelopeRequest, *, timeout: float | None = None
    ) -> hub_pb2.PostEnvelopeResponse:
        """``PostEnvelope``: admit one envelope. An envelope without an idempotency key gets one here,
        so gRPC's retry after a lost answer (:data:`agentsdk.transport.RETRY_SERVICE_CONFIG`) never
        admits it twice."""
        if not request.envelope.HasField("idempotency_key"):
            request.envelope.idempotency_key = uuid.uuid4().hex
        return await self._posting(self.connection.stub.PostEnvelope, request, hub_pb2.PostEnvelopeResponse, timeout)

    async def can_send(
        self, request: hub_pb2.CanSendRequest, *, timeout: float | None = None
    ) -> hub_pb2.CanSendResponse:
        """``CanSend``: whether the caller may post now."""
        return await self._unary(self.connection.stub.CanSend, request, hub_pb2.CanSendResponse, timeout)

    async def find_reply(
        self, request: hub_pb2.FindReplyRequest, *, timeout: float | None = None
    ) -> hub_pb2.FindReplyResponse:
        """``FindReply``: the first envelope a participant posted answering an envelope, if any."""
        return await self._unary(self.connection.stub.FindReply, request, hub_pb2.FindReplyResponse, timeout)

    # -- tasks and tools -----------------------------------------------------------------

    async def report_task(
        self, request: hub_pb2.ReportTaskRequest, *, timeout: float | None = None
    ) -> hub_pb2.ReportTaskResponse:
        """``ReportTask``: record a lifecycle event of the caller's task."""
        return await self._unary(self.connection.stub.ReportTask, request, hub_pb2.ReportTaskResponse, timeout)

    async def list_tasks(
        self, request: hub_pb2.ListTasksRequest, *, timeout: float | None = None
    ) -> hub_pb2.ListTasksResponse:
        """``ListTasks``: a page of tasks (the caller's own or all it may see; live or all)."""
        return await self._unary(self.connection.stub.ListTasks, request, hub_pb2.ListTasksResponse, timeout)

    async def get_task(
        self, request: hub_pb2.GetTaskRequest, *, timeout: float | None = None
    ) -> hub_pb2.GetTaskResponse:
        """``GetTask``: one task's current metadata."""
        return await self._unary(self.connection.stub.GetTask, request, hub_pb2.GetTaskResponse, timeout)

    async def wait_task(
        self, request: hub_pb2.WaitTaskRequest, *, timeout: float | None = None
    ) -> hub_pb2.WaitTaskResponse:
        """``WaitTask``: wait until a task ends or the request's ``timeout_seconds`` pass (``timed_out``,
        not an error); give a ``timeout`` longer than that wait."""
        return await self._unary(self.connection.stub.WaitTask, request, hub_pb2.WaitTaskResponse, timeout)

    async def cancel_task(
        self, request: hub_pb2.CancelTaskRequest, *, timeout: float | None = None
    ) -> hub_pb2.CancelTaskResponse:
        """``CancelTask``: cancel a task (a no-op for one that already ended)."""
        return await self._unary(self.connection.stub.CancelTask, request, hub_pb2.CancelTaskResponse, timeout)

    async def checkpoint_task(
        self, request: hub_pb2.CheckpointTaskRequest, *, timeout: float | None = None
    ) -> hub_pb2.CheckpointTaskResponse:
        """``CheckpointTask``: save the checkpoint of the caller's running task."""
        return await self._unary(self.connection.stub.CheckpointTask, request, hub_pb2.CheckpointTaskResponse, timeout)

    async def read_task_checkpoint(
        self, request: hub_pb2.ReadTaskCheckpointRequest, *, timeout: float | None = None
    ) -> hub_pb2.ReadTaskCheckpointResponse:
        """``ReadTaskCheckpoint``: the last checkpoint of the caller's task."""
        return await self._unary(
            self.connection.stub.ReadTaskCheckpoint, request, hub_pb2.ReadTaskCheckpointResponse, timeout
        )

    # -- context ------------------------------------------------------------------------

    async def search_context(
        self, request: hub_pb2.SearchContextRequest, *, timeout: float | None = None
    ) -> hub_pb2.SearchContextResponse:
        """``SearchContext``: past text envelopes visible to the caller that contain a query."""
        return await self._unary(self.connection.stub.SearchContext, request, hub_pb2.SearchContextResponse, timeout)

    async def quote_context(
        self, request: hub_pb2.QuoteContextRequest, *, timeout: float | None = None
    ) -> hub_pb2.QuoteContextResponse:
        """``QuoteContext``: one speaker's most recent text envelopes."""
        return await self._unary(self.connection.stub.QuoteContext, request, hub_pb2.QuoteContextResponse, timeout)

    async def list_tools(
        self, request: hub_pb2.ListToolsRequest, *, timeout: float | None = None
    ) -> hub_pb2.ListToolsResponse:
        """``ListTools``: the JSON schemas of the tools the caller may use now (in a channel: this turn's)."""
        return await self._unary(self.connection.stub.ListTools, request, hub_pb2.ListToolsResponse, timeout)

    async def call_tool(
        self, request: hub_pb2.CallToolRequest, *, timeout: float | None = None
    ) -> hub_pb2.CallToolResponse:
        """``CallTool``: run one network tool with JSON arguments."""
        return await self._posting(self.connection.stub.CallTool, request, hub_pb2.CallToolResponse, timeout)

    async def delegate(
        self, request: hub_pb2.DelegateRequest, *, timeout: float | None = None
    ) -> hub_pb2.DelegateResponse:
        """``Delegate``: open a consulting channel to an agent and wait for its reply (posts: retried on
        RATE_LIMITED)."""
        return await self._posting(self.connection.stub.Delegate, request, hub_pb2.DelegateResponse, timeout)

    async def say(self, request: hub_pb2.SayRequest, *, timeout: float | None = None) -> hub_pb2.SayResponse:
        """``Say``: post a text message into a channel (posts: retried on RATE_LIMITED)."""
        return await self._posting(self.connection.stub.Say, request, hub_pb2.SayResponse, timeout)

    async def report_turn_failure(
        self, request: hub_pb2.ReportTurnFailureRequest, *, timeout: float | None = None
    ) -> hub_pb2.ReportTurnFailureResponse:
        """``ReportTurnFailure``: tell the hub the caller's turn on an envelope failed."""
        return await self._unary(
            self.connection.stub.ReportTurnFailure, request, hub_pb2.ReportTurnFailureResponse, timeout
        )

    # -- agent to agent ------------------------------------------------------------------

    async def discover_agents(
        self, request: hub_pb2.DiscoverAgentsRequest, *, timeout: float | None = None
    ) -> hub_pb2.DiscoverAgentsResponse:
        """``DiscoverAgents``: the A2A-enabled agents the caller may invoke."""
        return await self._unary(self.connection.stub.DiscoverAgents, request, hub_pb2.DiscoverAgentsResponse, timeout)

    async def invoke_agent(
        self, request: hub_pb2.InvokeAgentRequest, *, timeout: float | None = None
    ) -> hub_pb2.InvokeAgentResponse:
        """``InvokeAgent``: call another agent and wait for its answer."""
        return await self._posting(self.connection.stub.InvokeAgent, request, hub_pb2.InvokeAgentResponse, timeout)

    async def register_remote_a2a_agent(
        self, request: hub_pb2.RegisterRemoteA2AAgentRequest, *, timeout: float | None = None
    ) -> hub_pb2.RegisterRemoteA2AAgentResponse:
        """``RegisterRemoteA2AAgent``: register an outside A2A agent from its Agent Card."""
        return await self._unary(
            self.connection.stub.RegisterRemoteA2AAgent, request, hub_pb2.RegisterRemoteA2AAgentResponse, timeout
        )

    async def refresh_remote_a2a_agent(
        self, request: hub_pb2.RefreshRemoteA2AAgentRequest, *, timeout: float | None = None
    ) -> hub_pb2.RefreshRemoteA2AAgentResponse:
        """``RefreshRemoteA2AAgent``: fetch the caller's Agent Card again."""
        return await self._unary(
            self.connection.stub.RefreshRemoteA2AAgent, request, hub_pb2.RefreshRemoteA2AAgentResponse, timeout
        )

    async def refresh_call_token(
        self, request: hub_pb2.RefreshCallTokenRequest, *, timeout: float | None = None
    ) -> hub_pb2.RefreshCallTokenResponse:
        """``RefreshCallToken``: a fresh call token for the same execution."""
        return await self._unary(
            self.connection.stub.RefreshCallToken, request, hub_pb2.RefreshCallTokenResponse, timeout
        )

    async def list_executions(
        self, request: hub_pb2.ListExecutionsRequest, *, timeout: float | None = None
    ) -> hub_pb2.ListExecutionsResponse:
        """``ListExecutions``: the A2A call tree of a root session."""
        return await self._unary(self.connection.stub.ListExecutions, request, hub_pb2.ListExecutionsResponse, timeout)

    async def get_execution(
        self, request: hub_pb2.GetExecutionRequest, *, timeout: float | None = None
    ) -> hub_pb2.GetExecutionResponse:
        """``GetExecution``: one A2A execution of a call tree the caller took part in."""
        return await self._unary(self.connection.stub.GetExecution, request, hub_pb2.GetExecutionResponse, timeout)

    async def cancel_execution(
        self, request: hub_pb2.CancelExecutionRequest, *, timeout: float | None = None
    ) -> hub_pb2.CancelExecutionResponse:
        """``CancelExecution``: cancel a running A2A execution the caller started."""
        return await self._unary(
            self.connection.stub.CancelExecution, request, hub_pb2.CancelExecutionResponse, timeout
        )

    # -- operator -----------------------------------------------------------------------

    async def list_audit(
        self, request: hub_pb2.ListAuditRequest, *, timeout: float | None = None
    ) -> hub_pb2.ListAuditResponse:
        """``ListAudit``: audit records after an id, in id order (the operator token only)."""
        return await self._unary(self.connection.stub.ListAudit, request, hub_pb2.ListAuditResponse, timeout)


class OperatorRpc:
    """The ``agentnet.v1.OperatorService`` RPCs (served on the hub's port), one typed method each, as the
    holder of the operator ``token``: each takes the request message and returns the response message;
    a failure raises the hub's domain exception (``PermissionDenied`` for an agent credential)."""

    def __init__(self, connection: HubConnection, token: str) -> None:
        self.connection = connection
        self._stub = operator_pb2_grpc.OperatorServiceStub(connection.channel)
        self._metadata = bearer(token)

    async def _unary(
        self, method: UnaryMethod, request: Message, response_type: type[ResponseT], timeout: float | None
    ) -> ResponseT:
        return await unary(method, request, response_type, metadata=self._metadata, timeout=timeout)

    async def get_status(
        self, request: operator_pb2.GetStatusRequest, *, timeout: float | None = None
    ) -> operator_pb2.GetStatusResponse:
        """``GetStatus``: the hub's version, store, uptime and counts."""
        return await self._unary(self._stub.GetStatus, request, operator_pb2.GetStatusResponse, timeout)

    async def list_agents(
        self, request: operator_pb2.OperatorServiceListAgentsRequest, *, timeout: float | None = None
    ) -> operator_pb2.OperatorServiceListAgentsResponse:
        """``ListAgents``: a page of every identity (or of those named), by name."""
        return await self._unary(
            self._stub.ListAgents, request, operator_pb2.OperatorServiceListAgentsResponse, timeout
        )

    async def describe_agent(
        self, request: operator_pb2.OperatorServiceDescribeAgentRequest, *, timeout: float | None = None
    ) -> operator_pb2.OperatorServiceDescribeAgentResponse:
        """``DescribeAgent``: one identity's full record, by id or name."""
        return await self._unary(
            self._stub.DescribeAgent, request, operator_pb2.OperatorServiceDescribeAgentResponse, timeout
        )

    async def list_channels(
        self, request: operator_pb2.OperatorServiceListChannelsRequest, *, timeout: float | None = None
    ) -> operator_pb2.OperatorServiceListChannelsResponse:
        """``ListChannels``: a page of every channel, newest first, optionally by state and type."""
        return await self._unary(
            self._stub.ListChannels, request, operator_pb2.OperatorServiceListChannelsResponse, timeout
        )

    async def describe_channel(
        self, request: operator_pb2.OperatorServiceDescribeChannelRequest, *, timeout: float | None = None
    ) -> operator_pb2.OperatorServiceDescribeChannelResponse:
        """``DescribeChannel``: one channel's metadata, whether it is live, whose turn it is, adapter state."""
        return await self._unary(
            self._stub.DescribeChannel, request, operator_pb2.OperatorServiceDescribeChannelResponse, timeout
        )

    def read_wal(
        self, request: operator_pb2.OperatorServiceReadWalRequest
    ) -> AsyncIterator[operator_pb2.OperatorServiceReadWalResponse]:
        """``ReadWal``: any channel's WAL in seq order, unfiltered; with ``follow``, then each new envelope."""
        return server_stream(
            self._stub.ReadWal, request, operator_pb2.OperatorServiceReadWalResponse, metadata=self._metadata
        )

    async def list_tasks(
        self, request: operator_pb2.OperatorServiceListTasksRequest, *, timeout: float | None = None
    ) -> operator_pb2.OperatorServiceListTasksResponse:
        """``ListTasks``: a page of every task, newest first."""
        return await self._unary(self._stub.ListTasks, request, operator_pb2.OperatorServiceListTasksResponse, timeout)

    async def get_task(
        self, request: operator_pb2.OperatorServiceGetTaskRequest, *, timeout: float | None = None
    ) -> operator_pb2.OperatorServiceGetTaskResponse:
        """``GetTask``: one task."""
        return await self._unary(self._stub.GetTask, request, operator_pb2.OperatorServiceGetTaskResponse, timeout)

    async def list_executions(
        self, request: operator_pb2.OperatorServiceListExecutionsRequest, *, timeout: float | None = None
    ) -> operator_pb2.OperatorServiceListExecutionsResponse:
        """``ListExecutions``: a root session's A2A call tree, or one execution and its subtree."""
        return await self._unary(
            self._stub.ListExecutions, request, operator_pb2.OperatorServiceListExecutionsResponse, timeout
        )

    def follow_audit(self, request: operator_pb2.FollowAuditRequest) -> AsyncIterator[operator_pb2.FollowAuditResponse]:
        """``FollowAudit``: the audit log after an id, then each new record as it is written (until cancelled)."""
        return server_stream(self._stub.FollowAudit, request, operator_pb2.FollowAuditResponse, metadata=self._metadata)

    def backup(self, request: operator_pb2.BackupRequest) -> AsyncIterator[operator_pb2.BackupResponse]:
        """``Backup``: a consistent copy of the hub's store, its bytes in order, then a summary."""
        return server_stream(self._stub.Backup, request, operator_pb2.BackupResponse, metadata=self._metadata)


def _key_registration(request: hub_pb2.RegisterRequest | hub_pb2.RegisterHumanRequest) -> None:
    """Give a registration without an idempotency key one: 32 random hex characters (the hub
    derives the credential from the key, so it must be unguessable; the hub's minimum is 16)."""
    if not request.idempotency_key:
        request.idempotency_key = secrets.token_hex(16)
