"""The HubService gRPC servicer: each RPC declares its auth mode (:mod:`hubsvc.rpc`),
converts messages and calls one core handler or operation (:mod:`hubsvc.core.operations`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Sequence

import grpc
from agentnet.v1 import connect_pb2, hub_pb2, hub_pb2_grpc

from hubsvc.core.delivery import Session
from hubsvc.core.hub import HubCore
from hubsvc.core.operations import Operations
from hubsvc.core.tool_calls import ToolCalls
from hubsvc.core.util import to_timestamp
from hubsvc.field_limits import RefusalAudit, hub_request_limits, post_batch_refusal
from hubsvc.forwarding import Forwarder
from hubsvc.post_answers import PostSink, answer_posts
from hubsvc.rpc import (
    AGENT,
    AGENT_OR_OPERATOR,
    OPERATOR,
    REGISTER,
    Authenticator,
    Ctx,
    check_limits,
    stream_rpc,
    unary_rpc,
)
from netkernel.channel_types import DEFAULT_WAIT_SECONDS
from netkernel.errors import AgentNetError, ProtocolError
from netkernel.wire import envelope_from_wire
from servicekit.boundary import ErrorBoundary, error_detail

HUB_SERVICE = hub_pb2.DESCRIPTOR.services_by_name["HubService"]


def _ack(session: Session, ack: connect_pb2.Ack) -> None:
    """Apply an Ack frame's entries, or those riding in a PostBatch (none when unset)."""
    for entry in ack.entries:
        session.ack(entry.channel_id, entry.seq)


log = logging.getLogger("agentnet.hub.servicer")


class HubServicer(hub_pb2_grpc.HubServiceServicer):
    """Serves agentnet.v1.HubService over a :class:`HubCore`.

    ``operator_token`` is the secret operator calls (``ListAudit``) must present as their
    bearer credential; "" disables them. ``bind_identity`` binds agent identities to client
    certificates (:class:`~hubsvc.rpc.Authenticator`)."""

    SERVICE = HUB_SERVICE

    def __init__(self, core: HubCore, *, operator_token: str = "", bind_identity: bool = False) -> None:
        self.core = core
        self.auth = Authenticator(core, operator_token, bind_identity=bind_identity)
        self.limits = hub_request_limits(core.options)
        self.audit_refusal = RefusalAudit(core.audit)
        self.ops = Operations(core)
        self.forwarder: Forwarder | None = None
        """Sends posts and calls about channels other replicas hold to them (set when the channels are divided)."""
        self.tool_calls = ToolCalls(self.ops)

    # -- Connect ------------------------------------------------------------------------

    async def Connect(
        self, request_iterator: AsyncIterator[connect_pb2.ConnectRequest], context: Ctx
    ) -> AsyncIterator[connect_pb2.ConnectResponse]:
        """The participant's live session (see connect.proto)."""
        # The boundary is opened inside this generator, not wrapped around it: deliveries pass no extra layer.
        async with ErrorBoundary(context, "HubServicer.Connect"):
            try:
                hello = await self.auth.hello(request_iterator, context)
                if hello is None:
                    return
                agent_id, first = hello
                check_limits(self, agent_id, "Connect", first)
                session, welcome = await self.core.connect(agent_id, first)
            except AgentNetError as refused:  # a refused stream start is logged (bugs are, by the boundary)
                log.warning("Connect from %s refused: %s %s", context.peer(), refused.reason, refused.message)
                raise
            reader = asyncio.create_task(self._read_frames(agent_id, session, request_iterator))
            try:
                yield connect_pb2.ConnectResponse(welcome=welcome)
                while True:
                    # Raises the error the session was closed with. A client that reads nothing keeps the
                    # previous yield blocked on gRPC flow control; the session dropped what it queued
                    # meanwhile, and the client sees the status once it reads the frames before it.
                    frame = await session.next_frame()
                    if frame is None:
                        return
                    yield frame
            finally:
                reader.cancel()
                self.core.disconnect(session)

    async def _read_frames(
        self, agent_id: str, session: Session, frames: AsyncIterator[connect_pb2.ConnectRequest]
    ) -> None:
        try:
            async for frame in frames:
                kind = frame.WhichOneof("frame")
                if kind == "post":  # a post over a field limit gets its PostResult error
                    await self.answer_posts(agent_id, session, [frame.post])
                    continue
                if kind == "post_batch":  # the count and the acks end the stream; each post's limits are its own
                    batch = frame.post_batch
                    refusal = post_batch_refusal(len(batch.posts), self.core.options.max_batch)
                    if refusal is None and batch.HasField("ack"):
                        refusal = self.limits.refusal(batch.ack, "post_batch.ack.")
                        if refusal is not None:
                            self.audit_refusal(agent_id, "Connect", frame, refusal)
                else:
                    refusal = self.limits.refusal(frame)
                    if refusal is not None:
                        self.audit_refusal(agent_id, "Connect", frame, refusal)
                if refusal is not None:
                    session.close(refusal)
                    return
                if kind == "post_batch":
                    _ack(session, frame.post_batch.ack)
                    await self.answer_posts(agent_id, session, frame.post_batch.posts)
                elif kind == "ack":
                    _ack(session, frame.ack)
                elif kind == "ping":
                    session.pong(frame.ping.nonce)
                elif kind == "hello":
                    session.close(ProtocolError("Hello may only be the first frame of a Connect stream."))
                    return
        except (asyncio.CancelledError, grpc.aio.AbortError):
            raise
        except AgentNetError as refused:  # a frame that does not parse (servicekit/parse_guard.py) ends the stream
            log.info("Connect stream of %s ended: %s %s", agent_id, refused.reason, refused.message)
            session.close(refused)
        except Exception:
            log.exception("Connect reader of %s failed", agent_id)
        finally:
            session.close()

    async def answer_posts(
        self, agent_id: str, session: PostSink, posts: Sequence[connect_pb2.Post], *, forward: bool = True
    ) -> None:
        """Admit ``agent_id``'s posts and answer each into ``session`` (:func:`hubsvc.post_answers.answer_posts`)."""
        await answer_posts(self, agent_id, session, posts, forward=forward)

    # -- identity -----------------------------------------------------------------------

    @unary_rpc(REGISTER)
    async def Register(self, caller: bool, request: hub_pb2.RegisterRequest) -> hub_pb2.RegisterResponse:
        """Register an agent or remote agent (``caller``: the operator token was presented)."""
        record, credential = await self.core.register(
            request.passport,
            request.resume,
            request.skill_md if request.HasField("skill_md") else None,
            request.a2a if request.HasField("a2a") else None,
            human=False,
            rule_json=request.rule_json,
            by_operator=caller,
            idempotency_key=request.idempotency_key,
        )
        return hub_pb2.RegisterResponse(agent=record, credential=credential)

    @unary_rpc(REGISTER)
    async def RegisterHuman(self, caller: bool, request: hub_pb2.RegisterHumanRequest) -> hub_pb2.RegisterHumanResponse:
        """Register a human participant (``caller``: the operator token was presented)."""
        record, credential = await self.core.register(
            request.passport,
            request.resume,
            None,
            None,
            human=True,
            rule_json=request.rule_json,
            by_operator=caller,
            idempotency_key=request.idempotency_key,
        )
        return hub_pb2.RegisterHumanResponse(agent=record, credential=credential)

    @unary_rpc(AGENT)
    async def Unregister(self, caller: str, request: hub_pb2.UnregisterRequest) -> hub_pb2.UnregisterResponse:
        """Remove the caller."""
        return hub_pb2.UnregisterResponse(closed_channel_ids=await self.core.unregister(caller))

    @unary_rpc(AGENT)
    async def ListAgents(self, caller: str, request: hub_pb2.ListAgentsRequest) -> hub_pb2.ListAgentsResponse:
        """Filtered identities, a page at a time."""
        agents, token = await self.ops.agents.find_agents(
            caller,
            kind=request.kind,
            capability=request.capability,
            query=request.query,
            sort_by=request.sort_by,
            limit=request.limit,
            exclude_self=request.exclude_self,
            page_token=request.page_token,
        )
        return hub_pb2.ListAgentsResponse(agents=agents, next_page_token=token)

    @unary_rpc(AGENT)
    async def DescribeAgent(self, caller: str, request: hub_pb2.DescribeAgentRequest) -> hub_pb2.DescribeAgentResponse:
        """One identity's full profile."""
        ref = request.agent_id if request.WhichOneof("agent") == "agent_id" else request.name
        return hub_pb2.DescribeAgentResponse(
            agent=await self.ops.agents.with_observed(await self.ops.agents.describe_agent(ref))
        )

    @unary_rpc(AGENT)
    async def SetSkill(self, caller: str, request: hub_pb2.SetSkillRequest) -> hub_pb2.SetSkillResponse:
        """Replace the caller's skill."""
        return hub_pb2.SetSkillResponse(agent=await self.ops.agents.set_skill(caller, request.skill_md))

    @unary_rpc(AGENT)
    async def SetResume(self, caller: str, request: hub_pb2.SetResumeRequest) -> hub_pb2.SetResumeResponse:
        """Replace the caller's resume."""
        return hub_pb2.SetResumeResponse(agent=await self.ops.agents.set_resume(caller, request.resume))

    @unary_rpc(AGENT_OR_OPERATOR)
    async def SetRule(self, caller: str | None, request: hub_pb2.SetRuleRequest) -> hub_pb2.SetRuleResponse:
        """Replace an identity's own governance rule."""
        record = await self.ops.agents.set_rule(caller, request.agent_id, request.rule_json)
        return hub_pb2.SetRuleResponse(agent=record)

    @unary_rpc(AGENT_OR_OPERATOR)
    async def GetRule(self, caller: str | None, request: hub_pb2.GetRuleRequest) -> hub_pb2.GetRuleResponse:
        """The rules governing an identity."""
        own, rules, effective = self.ops.agents.get_rule(caller, request.agent_id)
        return hub_pb2.GetRuleResponse(
            rule_json=own,
            rules=[hub_pb2.AppliedRule(id=rule_id, rule_json=text) for rule_id, text in rules],
            effective_json=json.dumps(effective),
        )

    @unary_rpc(AGENT)
    async def SetA2ASettings(
        self, caller: str, request: hub_pb2.SetA2ASettingsRequest
    ) -> hub_pb2.SetA2ASettingsResponse:
        """Replace the caller's A2A settings."""
        return hub_pb2.SetA2ASettingsResponse(agent=await self.ops.agents.set_a2a(caller, request.a2a))

    @unary_rpc(AGENT)
    async def DiscoverAgents(
        self, caller: str, request: hub_pb2.DiscoverAgentsRequest
    ) -> hub_pb2.DiscoverAgentsResponse:
        """The A2A agents the caller may invoke, filtered."""
        return hub_pb2.DiscoverAgentsResponse(agents=await self.ops.a2a.discover(caller, request))

    @unary_rpc(AGENT)
    async def InvokeAgent(self, caller: str, request: hub_pb2.InvokeAgentRequest) -> hub_pb2.InvokeAgentResponse:
        """Call an agent and wait for its answer."""
        return await self.ops.a2a.invoke(caller, request)

    @unary_rpc(REGISTER)
    async def RegisterRemoteA2AAgent(
        self, caller: bool, request: hub_pb2.RegisterRemoteA2AAgentRequest
    ) -> hub_pb2.RegisterRemoteA2AAgentResponse:
        """Register an outside A2A agent from its Agent Card (``caller``: the operator token was presented)."""
        record, credential = await self.ops.a2a.register_remote(request, by_operator=caller)
        return hub_pb2.RegisterRemoteA2AAgentResponse(agent=record, credential=credential)

    @unary_rpc(AGENT)
    async def RefreshRemoteA2AAgent(
        self, caller: str, request: hub_pb2.RefreshRemoteA2AAgentRequest
    ) -> hub_pb2.RefreshRemoteA2AAgentResponse:
        """Fetch the caller's Agent Card again (the caller is an outside A2A agent's identity)."""
        return hub_pb2.RefreshRemoteA2AAgentResponse(agent=await self.ops.a2a.refresh_remote(caller))

    @unary_rpc(AGENT)
    async def RefreshCallToken(
        self, caller: str, request: hub_pb2.RefreshCallTokenRequest
    ) -> hub_pb2.RefreshCallTokenResponse:
        """A call token for the A2A call the caller answers (by execution id), or a fresh one for a token."""
        token, expires_at = await self.ops.a2a.refresh(caller, request.call_token, request.execution_id)
        return hub_pb2.RefreshCallTokenResponse(call_token=token, expires_at=to_timestamp(expires_at))

    @unary_rpc(AGENT_OR_OPERATOR)
    async def ListExecutions(
        self, caller: str | None, request: hub_pb2.ListExecutionsRequest
    ) -> hub_pb2.ListExecutionsResponse:
        """An A2A call tree (any tree, or every execution, for the operator)."""
        executions = await self.ops.a2a.list_executions(caller, request.root_session_id, request.limit)
        return hub_pb2.ListExecutionsResponse(executions=executions)

    @unary_rpc(AGENT)
    async def GetExecution(self, caller: str, request: hub_pb2.GetExecutionRequest) -> hub_pb2.GetExecutionResponse:
        """One A2A execution of a call tree the caller took part in."""
        return hub_pb2.GetExecutionResponse(execution=await self.ops.a2a.get_execution(caller, request.execution_id))

    @unary_rpc(AGENT)
    async def CancelExecution(
        self, caller: str, request: hub_pb2.CancelExecutionRequest
    ) -> hub_pb2.CancelExecutionResponse:
        """Cancel a running A2A execution the caller made."""
        return hub_pb2.CancelExecutionResponse(execution=await self.ops.a2a.cancel(caller, request.execution_id))

    # -- channels -----------------------------------------------------------------------

    @unary_rpc(AGENT)
    async def OpenChannel(self, caller: str, request: hub_pb2.OpenChannelRequest) -> hub_pb2.OpenChannelResponse:
        """Open a channel."""
        meta, seed_id = await self.ops.channels.open_channel(caller, request)
        return hub_pb2.OpenChannelResponse(channel=meta, seed_envelope_id=seed_id)

    @unary_rpc(AGENT)
    async def CloseChannel(self, caller: str, request: hub_pb2.CloseChannelRequest) -> hub_pb2.CloseChannelResponse:
        """Close a channel."""
        meta = await self.core.close_channel(caller, request.channel_id, request.reason)
        return hub_pb2.CloseChannelResponse(channel=meta)

    @unary_rpc(AGENT)
    async def DescribeChannel(
        self, caller: str, request: hub_pb2.DescribeChannelRequest
    ) -> hub_pb2.DescribeChannelResponse:
        """Metadata and adapter state."""
        return await self.ops.channels.describe_channel(caller, request.channel_id)

    @unary_rpc(AGENT)
    async def ListChannels(self, caller: str, request: hub_pb2.ListChannelsRequest) -> hub_pb2.ListChannelsResponse:
        """The caller's channels, a page at a time."""
        channels, token = await self.ops.channels.list_channels(
            caller,
            include_ended=request.include_ended,
            type=request.type,
            limit=request.limit,
            page_token=request.page_token,
        )
        return hub_pb2.ListChannelsResponse(channels=channels, next_page_token=token)

    @unary_rpc(AGENT)
    async def ListPendingTurns(
        self, caller: str, request: hub_pb2.ListPendingTurnsRequest
    ) -> hub_pb2.ListPendingTurnsResponse:
        """The turns the caller's live channels await from it, a page at a time."""
        turns, token = await self.ops.channels.list_pending_turns(
            caller, limit=request.limit, page_token=request.page_token
        )
        return hub_pb2.ListPendingTurnsResponse(turns=turns, next_page_token=token)

    @stream_rpc(AGENT)
    async def ReadWal(self, caller: str, request: hub_pb2.ReadWalRequest) -> AsyncIterator[hub_pb2.ReadWalResponse]:
        """A channel's WAL from a seq (optionally following new envelopes)."""
        async for wire in self.ops.channels.stream_wal(
            caller, request.channel_id, request.from_seq, request.until_seq, request.limit, follow=request.follow
        ):
            yield hub_pb2.ReadWalResponse(envelope=wire)

    @unary_rpc(AGENT)
    async def PostEnvelope(self, caller: str, request: hub_pb2.PostEnvelopeRequest) -> hub_pb2.PostEnvelopeResponse:
        """Admit one envelope."""
        wire, duplicate = await self.core.post(
            caller,
            envelope_from_wire(request.envelope, max_json_depth=self.core.options.max_json_depth),
            event_data_json=request.envelope.event_data_json,
        )
        return hub_pb2.PostEnvelopeResponse(envelope=wire, duplicate=duplicate)

    @unary_rpc(AGENT)
    async def CanSend(self, caller: str, request: hub_pb2.CanSendRequest) -> hub_pb2.CanSendResponse:
        """Would a post pass now?"""
        allowed, refusal, expected = await self.core.can_send(
            caller, request.channel_id, request.event_type, request.causation_id
        )
        response = hub_pb2.CanSendResponse(allowed=allowed, expected_next=expected)
        if refusal is not None:
            response.refusal.CopyFrom(error_detail(refusal))
        return response

    @unary_rpc(AGENT)
    async def FindReply(self, caller: str, request: hub_pb2.FindReplyRequest) -> hub_pb2.FindReplyResponse:
        """The reply a participant already posted to an envelope, if any."""
        wire = await self.ops.messages.find_reply(caller, request.channel_id, request.causation_id, request.sender)
        return hub_pb2.FindReplyResponse(envelope=wire) if wire is not None else hub_pb2.FindReplyResponse()

    @unary_rpc(AGENT)
    async def ReportTurnFailure(
        self, caller: str, request: hub_pb2.ReportTurnFailureRequest
    ) -> hub_pb2.ReportTurnFailureResponse:
        """The caller's turn on an envelope failed: tell the channel and apply its policy."""
        return await self.ops.turns.report_turn_failure(caller, request)

    # -- tasks --------------------------------------------------------------------------

    @unary_rpc(AGENT)
    async def ReportTask(self, caller: str, request: hub_pb2.ReportTaskRequest) -> hub_pb2.ReportTaskResponse:
        """A lifecycle report from the task's owner."""
        return hub_pb2.ReportTaskResponse(task=await self.ops.tasks.report_task(caller, request))

    @unary_rpc(AGENT)
    async def ListTasks(self, caller: str, request: hub_pb2.ListTasksRequest) -> hub_pb2.ListTasksResponse:
        """Tasks, a page at a time."""
        tasks, token = await self.ops.tasks.list_tasks(
            caller,
            all_scope=request.scope == hub_pb2.TASK_SCOPE_ALL,
            include_ended=request.include_ended,
            limit=request.limit,
            page_token=request.page_token,
        )
        return hub_pb2.ListTasksResponse(tasks=tasks, next_page_token=token)

    @unary_rpc(AGENT)
    async def GetTask(self, caller: str, request: hub_pb2.GetTaskRequest) -> hub_pb2.GetTaskResponse:
        """One task."""
        return hub_pb2.GetTaskResponse(task=await self.ops.tasks.get_task(request.task_id))

    @unary_rpc(AGENT)
    async def WaitTask(self, caller: str, request: hub_pb2.WaitTaskRequest) -> hub_pb2.WaitTaskResponse:
        """Wait for a task to end."""
        task, timed_out = await self.ops.tasks.wait_task(
            request.task_id, request.timeout_seconds or DEFAULT_WAIT_SECONDS
        )
        return hub_pb2.WaitTaskResponse(task=task, timed_out=timed_out)

    @unary_rpc(AGENT)
    async def CancelTask(self, caller: str, request: hub_pb2.CancelTaskRequest) -> hub_pb2.CancelTaskResponse:
        """Ask a task's owner to cancel."""
        task, envelope_id = await self.ops.tasks.cancel_task(caller, request.task_id, request.reason)
        return hub_pb2.CancelTaskResponse(task=task, envelope_id=envelope_id)

    @unary_rpc(AGENT)
    async def CheckpointTask(
        self, caller: str, request: hub_pb2.CheckpointTaskRequest
    ) -> hub_pb2.CheckpointTaskResponse:
        """Save the checkpoint of the caller's running task."""
        row = await self.ops.tasks.checkpoint_task(caller, request.task_id, request.state_json)
        return hub_pb2.CheckpointTaskResponse(
            saved_at=to_timestamp(row.saved_at), size_bytes=len(row.state_json.encode())
        )

    @unary_rpc(AGENT)
    async def ReadTaskCheckpoint(
        self, caller: str, request: hub_pb2.ReadTaskCheckpointRequest
    ) -> hub_pb2.ReadTaskCheckpointResponse:
        """The last checkpoint of the caller's task."""
        row = await self.ops.tasks.read_task_checkpoint(caller, request.task_id)
        if row is None:
            return hub_pb2.ReadTaskCheckpointResponse(found=False)
        return hub_pb2.ReadTaskCheckpointResponse(
            found=True, state_json=row.state_json, saved_at=to_timestamp(row.saved_at)
        )

    # -- context ------------------------------------------------------------------------

    @unary_rpc(AGENT)
    async def SearchContext(self, caller: str, request: hub_pb2.SearchContextRequest) -> hub_pb2.SearchContextResponse:
        """Search past text."""
        excerpts = await self.ops.context.search_context(caller, request.query, request.channel_id, request.limit)
        return hub_pb2.SearchContextResponse(excerpts=excerpts)

    @unary_rpc(AGENT)
    async def QuoteContext(self, caller: str, request: hub_pb2.QuoteContextRequest) -> hub_pb2.QuoteContextResponse:
        """A speaker's latest texts."""
        excerpts = await self.ops.context.quote_context(caller, request.speaker, request.recent_n, request.channel_id)
        return hub_pb2.QuoteContextResponse(excerpts=excerpts)

    # -- tools --------------------------------------------------------------------------

    @unary_rpc(AGENT)
    async def ListTools(self, caller: str, request: hub_pb2.ListToolsRequest) -> hub_pb2.ListToolsResponse:
        """Schemas of the tools usable now."""
        tools = self.ops.tools.list_tools(caller, request.channel_id, include_plugin=not request.exclude_plugin)
        return hub_pb2.ListToolsResponse(tools=tools)

    @unary_rpc(AGENT)
    async def CallTool(self, caller: str, request: hub_pb2.CallToolRequest) -> hub_pb2.CallToolResponse:
        """Run one tool."""
        result = await self.tool_calls.call_tool(
            caller, request.name, request.arguments_json, request.channel_id, request.task_id, request.causation_id
        )
        return hub_pb2.CallToolResponse(result_json=result)

    @unary_rpc(AGENT)
    async def Delegate(self, caller: str, request: hub_pb2.DelegateRequest) -> hub_pb2.DelegateResponse:
        """One-shot consultation."""
        text, channel_id, envelope_id = await self.ops.messages.delegate(
            caller,
            request.target,
            request.prompt,
            capability=request.capability,
            timeout=request.timeout_seconds or DEFAULT_WAIT_SECONDS,
            causation_id=request.causation_id,
        )
        return hub_pb2.DelegateResponse(text=text, channel_id=channel_id, envelope_id=envelope_id)

    @unary_rpc(AGENT)
    async def Say(self, caller: str, request: hub_pb2.SayRequest) -> hub_pb2.SayResponse:
        """Post text."""
        wire = await self.ops.messages.say(
            caller,
            request.content,
            list(request.audience),
            request.channel_id,
            causation_id=request.causation_id if request.HasField("causation_id") else None,
        )
        return hub_pb2.SayResponse(envelope=wire)

    # -- audit --------------------------------------------------------------------------

    @unary_rpc(OPERATOR)
    async def ListAudit(self, caller: None, request: hub_pb2.ListAuditRequest) -> hub_pb2.ListAuditResponse:
        """The audit log (operator only)."""
        records = await self.ops.audit.list_audit(request.kind, request.subject_id, request.after_id, request.limit)
        return hub_pb2.ListAuditResponse(records=records)
