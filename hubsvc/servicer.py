"""The HubService gRPC servicer: a thin layer that authenticates, converts
messages and delegates to the transport-agnostic :class:`HubCore`.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import AsyncIterator
from typing import Any, TypeAlias

import grpc
from agentnet.v1 import connect_pb2, errors_pb2, hub_pb2, hub_pb2_grpc

from hubsvc.core.hub import HubCore
from hubsvc.core.operations import Operations
from hubsvc.core.tasks import TERMINAL as TASK_TERMINAL
from hubsvc.core.tool_calls import ToolCalls
from hubsvc.core.util import hash_secret, to_timestamp
from netkernel.errors import AgentNetError, InvalidArgument, PermissionDenied, ProtocolError, Unauthenticated
from netkernel.wire import envelope_from_wire
from servicekit.auth import bearer_token
from servicekit.boundary import abort_with, stream_boundary, unary_boundary

HUB_SERVICE = hub_pb2.DESCRIPTOR.services_by_name["HubService"]
log = logging.getLogger("agentnet.hub.servicer")
Ctx: TypeAlias = grpc.aio.ServicerContext[Any, Any]


def error_detail(err: AgentNetError) -> errors_pb2.ErrorDetail:
    """The in-stream form of a domain error."""
    return errors_pb2.ErrorDetail(code=err.code.value[0], reason=err.reason, message=err.message, metadata=err.metadata)


def bearer(context: Ctx) -> str:
    """The bearer credential of the call ("" when absent)."""
    return bearer_token(context.invocation_metadata() or ()) or ""


class HubServicer(hub_pb2_grpc.HubServiceServicer):
    """Serves agentnet.v1.HubService over a :class:`HubCore`.

    ``operator_token`` is the secret operator calls (``ListAudit``) must present as their
    bearer credential; "" disables them."""

    def __init__(self, core: HubCore, *, operator_token: str = "") -> None:
        self.core = core
        self._operator_digest = hash_secret(operator_token) if operator_token else ""
        self.ops = Operations(core)
        self.tool_calls = ToolCalls(self.ops)

    def _caller(self, context: Ctx) -> str:
        credential = bearer(context)
        if not credential:
            raise Unauthenticated(
                "this call needs your credential: send 'authorization: Bearer <credential>' metadata "
                "(the credential is returned by Register)."
            )
        agent_id = self.core.registry.authenticate(credential)
        self.core.registry.touch(agent_id)
        return agent_id

    # -- Connect ------------------------------------------------------------------------

    async def Connect(
        self, request_iterator: AsyncIterator[connect_pb2.ConnectRequest], context: Ctx
    ) -> AsyncIterator[connect_pb2.ConnectResponse]:
        """The participant's live session (see connect.proto)."""
        try:
            first = await anext(aiter(request_iterator))
        except StopAsyncIteration:
            return
        try:
            if first.WhichOneof("frame") != "hello":
                raise ProtocolError("the first Connect frame must be Hello{credential, cursors}.")
            credential = first.hello.credential or bearer(context)
            if not credential:
                raise Unauthenticated("Hello.credential is empty; send the credential returned by Register.")
            agent_id = self.core.registry.authenticate(credential)
        except AgentNetError as err:
            await abort_with(context, err)
            return
        session, welcome = await self.core.connect(agent_id, first.hello)
        reader = asyncio.create_task(self._read_frames(agent_id, session, request_iterator))
        try:
            yield connect_pb2.ConnectResponse(welcome=welcome)
            while True:
                try:
                    frame = await session.next_frame()
                except AgentNetError as err:
                    await abort_with(context, err)
                    return
                if frame is None:
                    return
                yield frame
        finally:
            reader.cancel()
            self.core.disconnect(session)

    async def _read_frames(
        self, agent_id: str, session: Any, frames: AsyncIterator[connect_pb2.ConnectRequest]
    ) -> None:
        try:
            async for frame in frames:
                kind = frame.WhichOneof("frame")
                if kind == "post":
                    await self._stream_post(agent_id, session, frame.post)
                elif kind == "ack":
                    for entry in frame.ack.entries:
                        session.ack(entry.channel_id, entry.seq)
                elif kind == "ping":
                    session.control(connect_pb2.ConnectResponse(pong=connect_pb2.Pong(nonce=frame.ping.nonce)))
                elif kind == "hello":
                    session.close(ProtocolError("Hello may only be the first frame of a Connect stream."))
                    return
        except (asyncio.CancelledError, grpc.aio.AbortError):
            raise
        except Exception:
            log.exception("Connect reader of %s failed", agent_id)
        finally:
            session.close()

    async def _stream_post(self, agent_id: str, session: Any, post: connect_pb2.Post) -> None:
        request_id = post.request_id

        def result(**kwargs: Any) -> None:
            session.control(
                connect_pb2.ConnectResponse(post_result=connect_pb2.PostResult(request_id=request_id, **kwargs))
            )

        try:
            env = envelope_from_wire(post.envelope)
            fut, wire, duplicate = await self.core.admit(agent_id, env, event_data_json=post.envelope.event_data_json)
        except AgentNetError as err:
            result(error=error_detail(err))
            return
        except Exception:
            log.exception("post from %s failed", agent_id)
            result(
                error=errors_pb2.ErrorDetail(code=13, reason="INTERNAL", message="internal error; nothing was written")
            )
            return

        def committed(f: asyncio.Future[None]) -> None:
            if f.cancelled() or f.exception() is not None:
                result(
                    error=errors_pb2.ErrorDetail(code=14, reason="UNAVAILABLE", message="the WAL write failed; retry")
                )
            else:
                result(envelope=wire, duplicate=duplicate)

        fut.add_done_callback(committed)

    # -- identity -----------------------------------------------------------------------

    @unary_boundary
    async def Register(self, request: hub_pb2.RegisterRequest, context: Ctx) -> hub_pb2.RegisterResponse:
        """Register an agent or remote agent."""
        record, credential = await self.core.register(
            request.passport,
            request.resume,
            request.skill_md if request.HasField("skill_md") else None,
            request.a2a if request.HasField("a2a") else None,
            human=False,
        )
        return hub_pb2.RegisterResponse(agent=record, credential=credential)

    @unary_boundary
    async def RegisterHuman(self, request: hub_pb2.RegisterHumanRequest, context: Ctx) -> hub_pb2.RegisterHumanResponse:
        """Register a human participant."""
        record, credential = await self.core.register(request.passport, request.resume, None, None, human=True)
        return hub_pb2.RegisterHumanResponse(agent=record, credential=credential)

    @unary_boundary
    async def Unregister(self, request: hub_pb2.UnregisterRequest, context: Ctx) -> hub_pb2.UnregisterResponse:
        """Remove the caller."""
        closed = await self.core.unregister(self._caller(context))
        return hub_pb2.UnregisterResponse(closed_channel_ids=closed)

    @unary_boundary
    async def ListAgents(self, request: hub_pb2.ListAgentsRequest, context: Ctx) -> hub_pb2.ListAgentsResponse:
        """Filtered identities."""
        caller = self._caller(context)
        agents = self.ops.agents.find_agents(
            caller,
            kind=request.kind,
            capability=request.capability,
            query=request.query,
            sort_by=request.sort_by,
            limit=request.limit,
            exclude_self=request.exclude_self,
        )
        return hub_pb2.ListAgentsResponse(agents=agents)

    @unary_boundary
    async def DescribeAgent(self, request: hub_pb2.DescribeAgentRequest, context: Ctx) -> hub_pb2.DescribeAgentResponse:
        """One identity's full profile."""
        self._caller(context)
        ref = request.agent_id if request.WhichOneof("agent") == "agent_id" else request.name
        if not ref:
            raise InvalidArgument("name the agent by agent_id or name.")
        return hub_pb2.DescribeAgentResponse(agent=self.core.registry.resolve(ref).record)

    @unary_boundary
    async def SetSkill(self, request: hub_pb2.SetSkillRequest, context: Ctx) -> hub_pb2.SetSkillResponse:
        """Replace the caller's skill."""
        return hub_pb2.SetSkillResponse(
            agent=await self.core.registry.set_skill(self._caller(context), request.skill_md)
        )

    @unary_boundary
    async def SetResume(self, request: hub_pb2.SetResumeRequest, context: Ctx) -> hub_pb2.SetResumeResponse:
        """Replace the caller's resume."""
        return hub_pb2.SetResumeResponse(
            agent=await self.core.registry.set_resume(self._caller(context), request.resume)
        )

    @unary_boundary
    async def SetA2ASettings(
        self, request: hub_pb2.SetA2ASettingsRequest, context: Ctx
    ) -> hub_pb2.SetA2ASettingsResponse:
        """Replace the caller's A2A settings."""
        return hub_pb2.SetA2ASettingsResponse(
            agent=await self.core.registry.set_a2a(self._caller(context), request.a2a)
        )

    @unary_boundary
    async def DiscoverAgents(
        self, request: hub_pb2.DiscoverAgentsRequest, context: Ctx
    ) -> hub_pb2.DiscoverAgentsResponse:
        """The A2A agents the caller may invoke, filtered."""
        return hub_pb2.DiscoverAgentsResponse(agents=self.ops.a2a.discover(self._caller(context), request))

    @unary_boundary
    async def InvokeAgent(self, request: hub_pb2.InvokeAgentRequest, context: Ctx) -> hub_pb2.InvokeAgentResponse:
        """Call an agent and wait for its answer."""
        return await self.ops.a2a.invoke(self._caller(context), request)

    @unary_boundary
    async def RefreshCallToken(
        self, request: hub_pb2.RefreshCallTokenRequest, context: Ctx
    ) -> hub_pb2.RefreshCallTokenResponse:
        """Exchange a call token for a fresh one."""
        token, expires_at = self.ops.a2a.refresh(self._caller(context), request.call_token)
        return hub_pb2.RefreshCallTokenResponse(call_token=token, expires_at=to_timestamp(expires_at))

    @unary_boundary
    async def ListExecutions(
        self, request: hub_pb2.ListExecutionsRequest, context: Ctx
    ) -> hub_pb2.ListExecutionsResponse:
        """An A2A call tree (any tree, or every execution, for the operator)."""
        viewer = None if self._is_operator(context) else self._caller(context)
        executions = await self.core.executions.list(viewer, request.root_session_id, request.limit)
        return hub_pb2.ListExecutionsResponse(executions=executions)

    # -- channels -----------------------------------------------------------------------

    @unary_boundary
    async def OpenChannel(self, request: hub_pb2.OpenChannelRequest, context: Ctx) -> hub_pb2.OpenChannelResponse:
        """Open a channel."""
        caller = self._caller(context)
        meta, seed_id = await self.ops.channels.open_channel(caller, request)
        return hub_pb2.OpenChannelResponse(channel=meta, seed_envelope_id=seed_id)

    @unary_boundary
    async def CloseChannel(self, request: hub_pb2.CloseChannelRequest, context: Ctx) -> hub_pb2.CloseChannelResponse:
        """Close a channel."""
        meta = await self.core.close_channel(self._caller(context), request.channel_id, request.reason)
        return hub_pb2.CloseChannelResponse(channel=meta)

    @unary_boundary
    async def DescribeChannel(
        self, request: hub_pb2.DescribeChannelRequest, context: Ctx
    ) -> hub_pb2.DescribeChannelResponse:
        """Metadata and adapter state."""
        return await self.ops.channels.describe_channel(self._caller(context), request.channel_id)

    @unary_boundary
    async def ListChannels(self, request: hub_pb2.ListChannelsRequest, context: Ctx) -> hub_pb2.ListChannelsResponse:
        """The caller's channels."""
        channels = await self.ops.channels.list_channels(
            self._caller(context), include_ended=request.include_ended, type=request.type, limit=request.limit
        )
        return hub_pb2.ListChannelsResponse(channels=channels)

    @stream_boundary
    async def ReadWal(self, request: hub_pb2.ReadWalRequest, context: Ctx) -> AsyncIterator[hub_pb2.ReadWalResponse]:
        """A channel's WAL from a seq (optionally following new envelopes)."""
        caller = self._caller(context)
        async for wire in self.ops.channels.stream_wal(
            caller, request.channel_id, request.from_seq, request.until_seq, request.limit, follow=request.follow
        ):
            yield hub_pb2.ReadWalResponse(envelope=wire)

    @unary_boundary
    async def PostEnvelope(self, request: hub_pb2.PostEnvelopeRequest, context: Ctx) -> hub_pb2.PostEnvelopeResponse:
        """Admit one envelope."""
        caller = self._caller(context)
        wire, duplicate = await self.core.post(
            caller, envelope_from_wire(request.envelope), event_data_json=request.envelope.event_data_json
        )
        return hub_pb2.PostEnvelopeResponse(envelope=wire, duplicate=duplicate)

    @unary_boundary
    async def CanSend(self, request: hub_pb2.CanSendRequest, context: Ctx) -> hub_pb2.CanSendResponse:
        """Would a post pass now?"""
        allowed, refusal, expected = self.core.can_send(self._caller(context), request.channel_id, request.event_type)
        response = hub_pb2.CanSendResponse(allowed=allowed, expected_next=expected)
        if refusal is not None:
            response.refusal.CopyFrom(error_detail(refusal))
        return response

    # -- tasks --------------------------------------------------------------------------

    @unary_boundary
    async def ReportTask(self, request: hub_pb2.ReportTaskRequest, context: Ctx) -> hub_pb2.ReportTaskResponse:
        """A lifecycle report from the task's owner."""
        task = await self.ops.tasks.report_task(self._caller(context), request)
        return hub_pb2.ReportTaskResponse(task=task)

    @unary_boundary
    async def ListTasks(self, request: hub_pb2.ListTasksRequest, context: Ctx) -> hub_pb2.ListTasksResponse:
        """Tasks."""
        tasks = await self.ops.tasks.list_tasks(
            self._caller(context),
            all_scope=request.scope == hub_pb2.TASK_SCOPE_ALL,
            include_ended=request.include_ended,
            limit=request.limit,
        )
        return hub_pb2.ListTasksResponse(tasks=tasks)

    @unary_boundary
    async def GetTask(self, request: hub_pb2.GetTaskRequest, context: Ctx) -> hub_pb2.GetTaskResponse:
        """One task."""
        self._caller(context)
        return hub_pb2.GetTaskResponse(task=await self.core.tasks.get(request.task_id))

    @unary_boundary
    async def WaitTask(self, request: hub_pb2.WaitTaskRequest, context: Ctx) -> hub_pb2.WaitTaskResponse:
        """Wait for a task to end."""
        self._caller(context)
        timeout = request.timeout_seconds or 300.0
        if timeout < 0:
            raise InvalidArgument("timeout_seconds must not be negative.")
        task, timed_out = await self.core.tasks.wait(request.task_id, timeout)
        return hub_pb2.WaitTaskResponse(task=task, timed_out=timed_out and task.state not in TASK_TERMINAL)

    @unary_boundary
    async def CancelTask(self, request: hub_pb2.CancelTaskRequest, context: Ctx) -> hub_pb2.CancelTaskResponse:
        """Ask a task's owner to cancel."""
        task, envelope_id = await self.ops.tasks.cancel_task(self._caller(context), request.task_id, request.reason)
        return hub_pb2.CancelTaskResponse(task=task, envelope_id=envelope_id)

    # -- context ------------------------------------------------------------------------

    @unary_boundary
    async def SearchContext(self, request: hub_pb2.SearchContextRequest, context: Ctx) -> hub_pb2.SearchContextResponse:
        """Search past text."""
        excerpts = await self.ops.context.search_context(
            self._caller(context), request.query, request.channel_id, request.limit
        )
        return hub_pb2.SearchContextResponse(excerpts=excerpts)

    @unary_boundary
    async def QuoteContext(self, request: hub_pb2.QuoteContextRequest, context: Ctx) -> hub_pb2.QuoteContextResponse:
        """A speaker's latest texts."""
        excerpts = await self.ops.context.quote_context(
            self._caller(context), request.speaker, request.recent_n, request.channel_id
        )
        return hub_pb2.QuoteContextResponse(excerpts=excerpts)

    # -- tools --------------------------------------------------------------------------

    @unary_boundary
    async def ListTools(self, request: hub_pb2.ListToolsRequest, context: Ctx) -> hub_pb2.ListToolsResponse:
        """Schemas of the tools usable now."""
        tools = self.ops.tools.list_tools(
            self._caller(context), request.channel_id, include_plugin=not request.exclude_plugin
        )
        return hub_pb2.ListToolsResponse(tools=tools)

    @unary_boundary
    async def CallTool(self, request: hub_pb2.CallToolRequest, context: Ctx) -> hub_pb2.CallToolResponse:
        """Run one tool."""
        result = await self.tool_calls.call_tool(
            self._caller(context), request.name, request.arguments_json, request.channel_id, request.task_id
        )
        return hub_pb2.CallToolResponse(result_json=result)

    @unary_boundary
    async def Delegate(self, request: hub_pb2.DelegateRequest, context: Ctx) -> hub_pb2.DelegateResponse:
        """One-shot consultation."""
        text, channel_id, envelope_id = await self.ops.messages.delegate(
            self._caller(context),
            request.target,
            request.prompt,
            capability=request.capability,
            timeout=request.timeout_seconds or 300.0,
            causation_id=request.causation_id,
        )
        return hub_pb2.DelegateResponse(text=text, channel_id=channel_id, envelope_id=envelope_id)

    @unary_boundary
    async def Say(self, request: hub_pb2.SayRequest, context: Ctx) -> hub_pb2.SayResponse:
        """Post text."""
        wire = await self.ops.messages.say(
            self._caller(context),
            request.content,
            list(request.audience),
            request.channel_id,
            causation_id=request.causation_id if request.HasField("causation_id") else None,
        )
        return hub_pb2.SayResponse(envelope=wire)

    # -- audit --------------------------------------------------------------------------

    def _is_operator(self, context: Ctx) -> bool:
        digest = self._operator_digest
        return bool(digest) and hmac.compare_digest(hash_secret(bearer(context)), digest)

    def _require_operator(self, context: Ctx) -> None:
        if self._is_operator(context):
            return
        self._caller(context)  # Unauthenticated for a missing or unknown credential
        raise PermissionDenied(
            "this call is for the hub's operator: send the operator token as 'authorization: Bearer <token>' "
            "(python -m hubsvc keeps it in <data-dir>/hub-operator.token), not an agent credential."
        )

    @unary_boundary
    async def ListAudit(self, request: hub_pb2.ListAuditRequest, context: Ctx) -> hub_pb2.ListAuditResponse:
        """The audit log (operator only)."""
        self._require_operator(context)
        records = await self.ops.audit.list_audit(request.kind, request.subject_id, request.after_id, request.limit)
        return hub_pb2.ListAuditResponse(records=records)
