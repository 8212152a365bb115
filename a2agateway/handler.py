"""The A2A request handler: each A2A method as hub RPCs, made as the client's hub identity.

a2a-sdk's JSON-RPC routes and gRPC servicer call this one handler. The A2A ``tenant`` of a
request (set from the card's interface) names the hub agent. Nothing is kept here between
requests: tasks are read back from the hub's execution records, events from the call's
channel WAL (see :mod:`a2agateway.tasks`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence
from typing import NoReturn

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types import a2a_pb2 as a2a
from a2a.utils.errors import (
    ContentTypeNotSupportedError,
    ExtendedAgentCardNotConfiguredError,
    PushNotificationNotSupportedError,
)
from agentnet.v1 import a2a_pb2 as hub_a2a
from agentnet.v1 import hub_pb2

from a2agateway.cards import Cards
from a2agateway.hub import RPC_TIMEOUT, HubLink
from a2agateway.refusals import as_a2a_error, grpc_context, not_cancelable, refuse, task_not_found
from a2agateway.tasks import (
    ENDS_STREAM,
    EVENT_ID_KEY,
    Event,
    EventId,
    as_started,
    chain_of,
    metadata_headers,
    record_events,
    task_of,
    wal_events,
)
from netkernel.errors import (
    AgentNetError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unauthenticated,
)
from servicekit.auth import bearer_token

LAST_EVENT_ID = "last-event-id"
"""The header (gRPC metadata key) a resuming subscriber names the last event it received with."""
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 100
NO_TOKEN = (
    "this gateway needs 'Authorization: Bearer <hub credential>' (the credential Register or RegisterHuman "
    "returned): every call runs as that hub identity."
)
RUNNING = hub_a2a.INVOCATION_STATUS_RUNNING
RECORD_POLL_MAX = 1.0
"""Longest pause, in seconds, between reads of a running call to an outside A2A agent (it has no channel
to follow, so the gateway reads its execution record until it ends)."""


def caller_of(token: str) -> str:
    """The agent id a hub credential belongs to: the part before its dot (the hub checks the rest
    on every call, so a forged prefix gets nothing)."""
    return token.partition(".")[0]


class GatewayHandler(RequestHandler):
    """A2A methods on the hub's A2A RPCs (InvokeAgent, GetExecution, ListExecutions, CancelExecution, ReadWal)."""

    def __init__(self, hub: HubLink, cards: Cards, list_limit: int) -> None:
        self.hub = hub
        self.cards = cards
        self.list_limit = list_limit

    # -- who and what ---------------------------------------------------------------------

    @staticmethod
    def _header(context: ServerCallContext, name: str) -> str:
        call = grpc_context(context)
        if call is not None:
            for key, value in call.invocation_metadata() or ():
                if key.lower() == name:
                    return value.decode() if isinstance(value, bytes) else str(value)
            return ""
        headers = context.state.get("headers") or {}
        return str(headers.get(name, ""))

    def _token(self, context: ServerCallContext) -> str:
        token = bearer_token([("authorization", self._header(context, "authorization"))])
        if not token:
            raise Unauthenticated(NO_TOKEN)
        return token

    async def _agent(self, token: str, tenant: str) -> hub_a2a.DiscoveredAgent:
        if not tenant:
            raise InvalidArgument(
                "this request names no hub agent: talk to an agent through its own card "
                "(/agents/<name>/.well-known/agent-card.json), whose interfaces name it as the tenant.",
                metadata={"field": "tenant"},
            )
        return await self.cards.find(token, tenant)

    async def _task(self, token: str, task_id: str, tenant: str) -> list[hub_a2a.Execution]:
        """The executions of task ``task_id`` (first to last) the caller started with the tenant agent."""
        if not task_id:
            raise InvalidArgument("the task id is empty.", metadata={"field": "id"})
        try:
            head = await self.hub.execution(token, task_id)
        except NotFound:
            raise task_not_found(task_id) from None
        if head.caller_id != caller_of(token) or head.continues_execution_id:
            raise task_not_found(task_id)
        if tenant and (await self._agent(token, tenant)).agent_id != head.target_id:
            raise task_not_found(task_id)
        return chain_of(head, await self.hub.executions(token, head.root_session_id, self.list_limit))

    # -- messages -------------------------------------------------------------------------

    @staticmethod
    def _text(message: a2a.Message) -> str:
        if not message.parts:
            raise InvalidArgument("the message has no parts; send one text part.", metadata={"field": "message.parts"})
        texts = []
        for part in message.parts:
            if part.WhichOneof("content") != "text":
                raise ContentTypeNotSupportedError(
                    message="hub agents take text: send text parts only (put structured data in a text part as JSON)."
                )
            texts.append(part.text)
        return "\n".join(texts)

    async def _start(
        self, token: str, params: a2a.SendMessageRequest
    ) -> tuple[list[hub_a2a.Execution], hub_a2a.DiscoveredAgent]:
        """Start the invocation a message asks for (detached: the hub waits for the answer)."""
        agent = await self._agent(token, params.tenant)
        message = params.message
        skill = params.metadata.fields.get("skill")
        request = hub_pb2.InvokeAgentRequest(
            agent_id=agent.agent_id,
            message=self._text(message),
            skill=skill.string_value if skill is not None else "",
            custom_headers=metadata_headers(message.metadata, message.extensions),
            detach=True,
        )
        earlier: list[hub_a2a.Execution] = []
        if message.task_id:
            earlier = await self._task(token, message.task_id, params.tenant)
            last = earlier[-1]
            if last.status != hub_a2a.INVOCATION_STATUS_INPUT_REQUIRED:
                state = a2a.TaskState.Name(task_of(earlier).status.state)
                raise FailedPrecondition(
                    f"task {message.task_id!r} is {state}: only an input-required task takes another message; "
                    "leave taskId out to start a new task (keep contextId to stay in the same conversation).",
                    metadata={"task_id": message.task_id},
                )
            request.agent_id = ""
            request.continues_execution_id = last.execution_id
        elif message.context_id:
            request.root_session_id = message.context_id
        started = await self.hub.rpc(token).invoke_agent(request, timeout=RPC_TIMEOUT)
        return [*earlier, as_started(await self.hub.execution(token, started.execution_id))], agent

    async def _events(
        self, token: str, chain: Sequence[hub_a2a.Execution], callee: str, after: EventId | None
    ) -> AsyncGenerator[a2a.TaskStatusUpdateEvent | a2a.TaskArtifactUpdateEvent]:
        """The events of the task's current execution (or of the one ``after`` names) after ``after``,
        live until the execution's outcome."""
        task_id, context_id = chain[0].execution_id, chain[0].root_session_id
        execution = chain[-1]
        if after is not None:
            named = [e for e in chain if e.execution_id == after.execution_id]
            if not named:
                raise InvalidArgument(
                    f"Last-Event-ID {str(after)!r} is not an event of task {task_id!r}; resubscribe without it.",
                    metadata={"field": LAST_EVENT_ID},
                )
            execution = named[0]
        if not execution.channel_id:  # a call to an outside A2A agent: its record is all there is to follow
            for event in await self._recorded_outcome(token, execution, task_id, context_id):
                if _is_after(event, after):
                    yield event
            return
        async for envelope in self.hub.follow_wal(token, execution.channel_id, after.seq if after else 0):
            for event in wal_events(envelope, execution, task_id, context_id, callee):
                if not _is_after(event, after):
                    continue
                if isinstance(event, a2a.TaskStatusUpdateEvent) and event.status.state in ENDS_STREAM:
                    # The hub records the outcome just after the answer's commit: the client is told
                    # the task ended only once GetTask and ListTasks say so too (and list its artifact).
                    await self._recorded(token, execution, patience=RPC_TIMEOUT)
                    yield event
                    return
                yield event

    async def _recorded(
        self, token: str, execution: hub_a2a.Execution, *, patience: float | None = None
    ) -> hub_a2a.Execution:
        """``execution`` once the hub recorded its outcome: read again, after a growing pause (at most
        ``RECORD_POLL_MAX`` seconds), while it runs; with ``patience``, for at most that many seconds
        (then the last record read is returned, still running)."""
        loop = asyncio.get_running_loop()
        deadline = None if patience is None else loop.time() + patience
        pause = 0.01
        while execution.status == RUNNING and (deadline is None or loop.time() < deadline):
            execution = await self.hub.execution(token, execution.execution_id)
            if execution.status != RUNNING:
                break
            await asyncio.sleep(pause)
            pause = min(pause * 2, RECORD_POLL_MAX)
        return execution

    async def _recorded_outcome(
        self, token: str, execution: hub_a2a.Execution, task_id: str, context_id: str
    ) -> list[a2a.TaskStatusUpdateEvent | a2a.TaskArtifactUpdateEvent]:
        """The events of an execution without a channel, once the hub recorded its outcome."""
        return record_events(await self._recorded(token, execution), task_id, context_id)

    async def on_message_send(self, params: a2a.SendMessageRequest, context: ServerCallContext) -> a2a.Task:
        """SendMessage: start the call; unless returnImmediately, wait for its outcome."""
        try:
            token = self._token(context)
            chain, agent = await self._start(token, params)
            task = task_of(chain)
            if params.configuration.return_immediately:
                return task
            async for event in self._events(token, chain, agent.name, None):
                _apply(task, event)
            return task
        except AgentNetError as err:
            await refuse(err, context)

    async def on_message_send_stream(
        self, params: a2a.SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        """SendStreamingMessage: the task as started, then its events until its outcome."""
        started = False
        try:
            token = self._token(context)
            chain, agent = await self._start(token, params)
            started = True
            yield task_of(chain)
            async for event in self._events(token, chain, agent.name, None):
                yield event
        except AgentNetError as err:
            await _refuse_in_stream(err, context, started)

    async def on_subscribe_to_task(
        self, params: a2a.SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        """SubscribeToTask: the task now, then its events; with Last-Event-ID, only the events after it."""
        started = False
        try:
            token = self._token(context)
            chain = await self._task(token, params.id, params.tenant)
            after = self._last_event_id(context)
            described = hub_pb2.DescribeAgentRequest(agent_id=chain[-1].target_id)
            callee = (await self.hub.rpc(token).describe_agent(described, timeout=RPC_TIMEOUT)).agent.passport.name
            if after is None:
                task = task_of(chain)
                started = True
                yield task
                if task.status.state in ENDS_STREAM:
                    return
            async for event in self._events(token, chain, callee, after):
                started = True
                yield event
        except AgentNetError as err:
            await _refuse_in_stream(err, context, started)

    def _last_event_id(self, context: ServerCallContext) -> EventId | None:
        text = self._header(context, LAST_EVENT_ID)
        if not text:
            return None
        try:
            return EventId.parse(text)
        except ValueError:
            raise InvalidArgument(
                f"Last-Event-ID {text!r} is not an event id of this gateway (<execution_id>:<seq>:<index>, the "
                "eventId metadata of the last event you received).",
                metadata={"field": LAST_EVENT_ID},
            ) from None

    # -- tasks ----------------------------------------------------------------------------

    async def on_get_task(self, params: a2a.GetTaskRequest, context: ServerCallContext) -> a2a.Task:
        """GetTask: the task as the hub recorded it."""
        try:
            token = self._token(context)
            return task_of(await self._task(token, params.id, params.tenant))
        except AgentNetError as err:
            await refuse(err, context)

    async def on_list_tasks(self, params: a2a.ListTasksRequest, context: ServerCallContext) -> a2a.ListTasksResponse:
        """ListTasks: the caller's tasks (with the tenant agent, in the context if given), newest first."""
        try:
            token = self._token(context)
            target = (await self._agent(token, params.tenant)).agent_id if params.tenant else ""
            if params.page_size < 0 or params.page_size > MAX_PAGE_SIZE:
                raise InvalidArgument(f"pageSize must be 0..{MAX_PAGE_SIZE} (0 = {DEFAULT_PAGE_SIZE}).")
            try:
                offset = int(params.page_token or "0")
            except ValueError:
                raise InvalidArgument("pageToken is not one this gateway returned.") from None
            try:
                executions = await self.hub.executions(token, params.context_id, self.list_limit)
            except PermissionDenied:
                executions = []  # a context the caller took no part in holds none of its tasks
            me = caller_of(token)
            tasks = [
                task_of(chain_of(e, executions))
                for e in executions
                if e.caller_id == me
                and not e.continues_execution_id
                and not e.parent_execution_id
                and (not target or e.target_id == target)
            ]
            if params.status:
                tasks = [t for t in tasks if t.status.state == params.status]
            if params.HasField("status_timestamp_after"):
                after = params.status_timestamp_after.ToNanoseconds()
                tasks = [t for t in tasks if t.status.timestamp.ToNanoseconds() > after]
            tasks.sort(key=lambda t: t.status.timestamp.ToNanoseconds(), reverse=True)
            size = params.page_size or DEFAULT_PAGE_SIZE
            page = tasks[offset : offset + size]
            if not params.include_artifacts:
                for task in page:
                    del task.artifacts[:]
            more = offset + size < len(tasks)
            return a2a.ListTasksResponse(
                tasks=page, next_page_token=str(offset + size) if more else "", page_size=size, total_size=len(tasks)
            )
        except AgentNetError as err:
            await refuse(err, context)

    async def on_cancel_task(self, params: a2a.CancelTaskRequest, context: ServerCallContext) -> a2a.Task:
        """CancelTask: cancel the running execution (the hub closes the callee's channel)."""
        try:
            token = self._token(context)
            chain = await self._task(token, params.id, params.tenant)
            if chain[-1].status != RUNNING:
                raise not_cancelable(params.id, f"it is {a2a.TaskState.Name(task_of(chain).status.state)}.")
            try:
                request = hub_pb2.CancelExecutionRequest(execution_id=chain[-1].execution_id)
                cancelled = (await self.hub.rpc(token).cancel_execution(request, timeout=RPC_TIMEOUT)).execution
            except FailedPrecondition as err:
                raise not_cancelable(params.id, err.message) from None
            return task_of([*chain[:-1], cancelled])
        except AgentNetError as err:
            await refuse(err, context)

    # -- not offered ----------------------------------------------------------------------

    async def on_create_task_push_notification_config(
        self, params: a2a.TaskPushNotificationConfig, context: ServerCallContext
    ) -> a2a.TaskPushNotificationConfig:
        """Not offered: stream or poll instead."""
        raise _no_push()

    async def on_get_task_push_notification_config(
        self, params: a2a.GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> a2a.TaskPushNotificationConfig:
        """Not offered."""
        raise _no_push()

    async def on_list_task_push_notification_configs(
        self, params: a2a.ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> a2a.ListTaskPushNotificationConfigsResponse:
        """Not offered."""
        raise _no_push()

    async def on_delete_task_push_notification_config(
        self, params: a2a.DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        """Not offered."""
        raise _no_push()

    async def on_get_extended_agent_card(
        self, params: a2a.GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> a2a.AgentCard:
        """Not offered: the public card of each agent is already the caller's own view."""
        raise ExtendedAgentCardNotConfiguredError(
            message="cards are already per caller: GET /agents/<name>/.well-known/agent-card.json with your token."
        )


def _no_push() -> PushNotificationNotSupportedError:
    return PushNotificationNotSupportedError(
        message="this gateway does not send push notifications: use SendStreamingMessage, SubscribeToTask or GetTask."
    )


def _is_after(event: a2a.TaskStatusUpdateEvent | a2a.TaskArtifactUpdateEvent, after: EventId | None) -> bool:
    """Whether ``event`` comes after the event ``after`` names (every event does when it is None)."""
    if after is None:
        return True
    event_id = EventId.parse(event.metadata.fields[EVENT_ID_KEY].string_value)
    return (event_id.seq, event_id.index) > (after.seq, after.index)


def _apply(task: a2a.Task, event: a2a.TaskStatusUpdateEvent | a2a.TaskArtifactUpdateEvent) -> None:
    """Fold one event into the task a blocking SendMessage returns."""
    if isinstance(event, a2a.TaskArtifactUpdateEvent):
        task.artifacts.append(event.artifact)
    else:
        task.status.CopyFrom(event.status)


async def _refuse_in_stream(err: AgentNetError, context: ServerCallContext, started: bool) -> NoReturn:
    """A refusal before or during a stream: once events went out, JSON-RPC can only send an error
    event (no HTTP status), so the refusal becomes its JSON-RPC error."""
    if started and grpc_context(context) is None:
        raise as_a2a_error(err)
    await refuse(err, context)
