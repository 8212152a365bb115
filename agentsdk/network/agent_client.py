"""AgentClient: an LLM agent on the network, and the default envelope handler.

The default handler does the "receive → auto-ack invites → run the LLM with the
adapter's tools → post the round-end envelope" wiring (described in ``docs/network.md``). It is decomposed into
public hooks (:func:`read_wal_until`, :func:`resolve_view_policy`,
:func:`stamp_dependencies`) so custom handlers can reuse the standard pre-LLM
wiring. ``client.on_envelope(cb)`` replaces it; ``client.on_envelope(client._run_default_handler)``
restores it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentnet.v1 import hub_pb2, task_pb2
from opentelemetry import trace

from agentsdk.a2a.context import Dispatch, dispatch_scope
from agentsdk.a2a.tools import REQUEST_INPUT_TOOL
from agentsdk.events import (
    BaseEvent,
    ImageInput,
    TaskCancelled,
    TaskCompleted,
    TaskFailed,
    TaskProgress,
    TaskStarted,
    TextInput,
)
from agentsdk.model_check import attempts_of
from agentsdk.network._chunks import DEFAULT_MAX_CHUNK_BYTES, ChunkRelay
from agentsdk.network.adapters import adapter_for
from agentsdk.network.channel import Channel, ChannelMetadata
from agentsdk.network.clients import EnvelopeCallback, NetworkClient, call_back
from agentsdk.network.deps import AGENT_CLIENT_DEP, CHANNEL_DEP, CHANNEL_STATE_DEP, HUB_DEP, TASK_DEP
from agentsdk.network.turn_context import cause_scope, current_task, delivered_can_send, task_scope
from agentsdk.network.views import ViewPolicy
from agentsdk.stream import Stream
from netkernel.envelope import EV_CHANNEL_INVITE, EV_PACKET, EV_TEXT, Envelope
from netkernel.errors import AgentNetError, InvalidArgument
from netkernel.identity import Passport
from netkernel.images import envelope_images
from netkernel.turn_failure import describe

if TYPE_CHECKING:
    from agentsdk.agent import Agent
    from agentsdk.network.hub_client import HubClient
    from agentsdk.network.plugin import NetworkPlugin

log = logging.getLogger("agentnet.sdk")

ATTR_TASK_ID = "agentnet.task_id"
ATTR_CHECKPOINT_BYTES = "agentnet.checkpoint.bytes"
ATTR_CHECKPOINT_HIT = "agentnet.checkpoint.hit"
"""Attributes of the ``checkpoint.write`` / ``checkpoint.read`` span events (AG2's ``ag2.checkpoint.*``)."""

REPORT_TIMEOUT = 10.0
"""Seconds a failed turn's report may take (the handler's worker waits for it before the next envelope)."""


@dataclass
class Task:
    """A task the agent owns, mirrored to the hub (``async with client.task(...)``).

    Every report is also published to the agent's observers as a ``Task*`` event
    (:mod:`agentsdk.events`): TaskStarted, TaskProgress, TaskCompleted, TaskFailed, TaskCancelled.
    """

    task_id: str
    client: AgentClient
    title: str = ""
    channel_id: str = ""
    ended: bool = False
    resumed_state: dict[str, Any] | None = None
    """The checkpoint of the ``resume_from`` task read on entry (None: no ``resume_from``, or that
    task had no checkpoint); the exact object its owner last passed to :meth:`checkpoint`."""

    async def checkpoint(self, state: dict[str, Any]) -> None:
        """Save ``state`` (a JSON object) as this task's checkpoint on the hub, replacing the last one.

        Durable in the hub's store: after a restart the owner reads it back with
        ``agent.task(..., resume_from=<this task_id>)`` (``task.resumed_state``) or
        :meth:`AgentClient.read_task_checkpoint`. A no-op once the task ended, as in AG2."""
        if self.ended:
            return
        await self.client.checkpoint_task(self.task_id, state)

    async def progress(self, payload: Any) -> None:
        """Report progress (any JSON value)."""
        await self.client._report(self, task_pb2.TASK_EVENT_KIND_PROGRESS, payload=payload)

    async def complete(self, result: Any = None) -> None:
        """End successfully with ``result``."""
        await self.client._report(self, task_pb2.TASK_EVENT_KIND_COMPLETED, payload=result)

    async def fail(self, error: str) -> None:
        """End with an error."""
        await self.client._report(self, task_pb2.TASK_EVENT_KIND_FAILED, error=error)

    async def cancel(self, reason: str = "") -> None:
        """End because a cancel request was accepted.

        The hub posts the owner's terminal ``ag2.task.cancelled`` envelope
        (``{"task_id", "reason"}``) into the task's channel, when it has a live one. A no-op once
        the task ended (completed, failed or cancelled), as in AG2."""
        if self.ended:
            return
        await self.client._report(self, task_pb2.TASK_EVENT_KIND_CANCELLED, error=reason or "cancelled")

    async def _reported(self, kind: task_pb2.TaskEventKind.ValueType, payload: Any = None, error: str = "") -> None:
        """Record a report the hub accepted: mark the task ended and tell the agent's observers."""
        if kind not in (task_pb2.TASK_EVENT_KIND_STARTED, task_pb2.TASK_EVENT_KIND_PROGRESS):
            self.ended = True
        await self.client.agent.publish(_task_event(self, kind, payload, error))


class HubBackedCheckpointStore:
    """Task checkpoints kept by the hub, as AG2's ``HubBackedCheckpointStore``: ``write`` / ``read``
    by task id through an agent's client (CheckpointTask / ReadTaskCheckpoint; only the task's owner
    may use them). ``Task.checkpoint`` and ``agent.task(..., resume_from=...)`` use the same calls."""

    def __init__(self, client: AgentClient) -> None:
        self._client = client

    async def write(self, task_id: str, state: dict[str, Any]) -> None:
        """Save ``state`` as the checkpoint of the client's running task ``task_id``."""
        await self._client.checkpoint_task(task_id, dict(state))

    async def read(self, task_id: str) -> dict[str, Any] | None:
        """The last checkpoint of the client's task ``task_id``, None when it has none."""
        return await self._client.read_task_checkpoint(task_id)


def _task_event(task: Task, kind: task_pb2.TaskEventKind.ValueType, payload: Any, error: str) -> BaseEvent:
    if kind == task_pb2.TASK_EVENT_KIND_STARTED:
        return TaskStarted(task.task_id, task.title)
    if kind == task_pb2.TASK_EVENT_KIND_PROGRESS:
        return TaskProgress(task.task_id, payload)
    if kind == task_pb2.TASK_EVENT_KIND_COMPLETED:
        return TaskCompleted(task.task_id, payload)
    if kind == task_pb2.TASK_EVENT_KIND_FAILED:
        return TaskFailed(task.task_id, error)
    return TaskCancelled(task.task_id, error)


class AgentClient(NetworkClient):
    """A registered LLM agent: its Agent, its hub identity and its envelope handler."""

    def __init__(self, hub: HubClient, agent_id: str, credential: str, passport: Passport, agent: Agent) -> None:
        NetworkClient.__init__(self, hub, agent_id, credential, passport)
        self.agent = agent
        agent.network = self
        self.plugin: NetworkPlugin | None = None
        self.view_policies: dict[str, ViewPolicy] = {}
        """Per-channel view overrides (channel_id -> view)."""
        self.view_policy: ViewPolicy | None = None
        """A view for every channel of this agent (None = each adapter's default)."""
        self.stream_chunks = True
        """When the model streams (``OpenAIConfig(streaming=True)``), post its text into the channel
        as ``ag2.msg.chunk`` envelopes while a handler turn runs (docs/network.md "Streaming a reply")."""
        self._max_chunk_bytes = DEFAULT_MAX_CHUNK_BYTES
        self._on_envelope: EnvelopeCallback = self._run_default_handler

    async def disconnect(self) -> None:
        """Stop receiving, then stop the agent's MCP servers (:meth:`Agent.stop`; they restart on its next turn)."""
        await super().disconnect()
        await self.agent.stop()

    @property
    def max_chunk_bytes(self) -> int:
        """The longest delta one ``ag2.msg.chunk`` envelope carries, in UTF-8 bytes (default 4096; at least 4)."""
        return self._max_chunk_bytes

    @max_chunk_bytes.setter
    def max_chunk_bytes(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 4:
            raise InvalidArgument(
                f"max_chunk_bytes must be an integer of at least 4 (one UTF-8 character); got {value!r}"
            )
        self._max_chunk_bytes = value

    def on_envelope(self, callback: EnvelopeCallback) -> None:
        """Replace the envelope handler; it is called with ``(envelope,)``.

        A coroutine function is awaited; a plain function works too (it runs on the event loop,
        so keep it short)."""
        self._on_envelope = callback

    async def _run_default_handler(self, envelope: Envelope) -> None:
        await default_handler(envelope, self)

    async def _handle(self, envelope: Envelope) -> None:
        try:
            await call_back(self._on_envelope, envelope)
        except Exception as exc:
            if envelope.event_type in (EV_TEXT, EV_PACKET):
                await self.report_turn_failure(envelope, exc)
            raise

    async def report_turn_failure(self, envelope: Envelope, exc: BaseException) -> bool:
        """Tell the hub that this agent's turn on ``envelope`` failed with ``exc`` (ReportTurnFailure).

        The handler does it by itself when a turn on an ``ag2.msg.text`` / ``ag2.packet`` raises (the
        model call after the ``openai`` client's retries, a tool, the handler); a custom handler that
        catches its own errors may call it. Only the exception's class and its message (redacted of
        anything shaped like a credential, clipped) are sent, never the prompt. The channel's members
        get an ``ag2.channel.turn_failed`` event and, by the channel's ``on_turn_failed`` policy, a
        consulting channel closes (docs/hub.md "Failed turns"). Returns whether the event was posted;
        a report the hub refuses is logged, never raised."""
        error_class, message = describe(exc)
        request = hub_pb2.ReportTurnFailureRequest(
            channel_id=envelope.channel_id,
            envelope_id=envelope.envelope_id,
            error_class=error_class,
            message=message,
            attempts=attempts_of(exc, self.agent.config),
        )
        try:
            response = await self.rpc.report_turn_failure(request, timeout=REPORT_TIMEOUT)
        except AgentNetError as err:
            log.warning("could not report the failed turn on %s: %s", envelope.envelope_id, err.message)
            return False
        return response.posted

    # -- tools and tasks ----------------------------------------------------------------

    def turn_dependencies(self) -> dict[Any, Any]:
        """What every turn of this agent gets injected, wherever it runs: AGENT_CLIENT_DEP,
        HUB_DEP and, inside ``agent.task(...)``, TASK_DEP (this context's own task)."""
        deps: dict[Any, Any] = {AGENT_CLIENT_DEP: self, HUB_DEP: self.hub}
        task = current_task()
        if isinstance(task, Task) and task.client is self:
            deps[TASK_DEP] = task
        return deps

    async def checkpoint_task(self, task_id: str, state: dict[str, Any]) -> None:
        """Save ``state`` (a JSON object, at most the hub's --max-checkpoint-bytes) as the checkpoint
        of this agent's running task ``task_id`` (CheckpointTask).

        Then adds a ``checkpoint.write`` event (``agentnet.task_id``, ``agentnet.checkpoint.bytes``) to
        the current span (a handler turn's, or the caller's own), as AG2 does: checkpoints travel outside
        any envelope, so this is where a trace shows them."""
        state_json = json.dumps(state)
        await self.rpc.checkpoint_task(hub_pb2.CheckpointTaskRequest(task_id=task_id, state_json=state_json))
        trace.get_current_span().add_event(
            "checkpoint.write",
            {ATTR_TASK_ID: task_id, ATTR_CHECKPOINT_BYTES: len(state_json.encode())},
        )

    async def read_task_checkpoint(self, task_id: str) -> dict[str, Any] | None:
        """The last checkpoint of this agent's task ``task_id`` (running or ended), None when it has none
        (ReadTaskCheckpoint; only the task's owner may read it).

        Adds a ``checkpoint.read`` event (``agentnet.task_id``, ``agentnet.checkpoint.hit``) to the current
        span, as AG2 does (on a ``resume_from`` read, the link from the new task to the one it resumes)."""
        response = await self.rpc.read_task_checkpoint(hub_pb2.ReadTaskCheckpointRequest(task_id=task_id))
        hit: dict[str, str | bool] = {ATTR_TASK_ID: task_id, ATTR_CHECKPOINT_HIT: response.found}
        trace.get_current_span().add_event("checkpoint.read", hit)
        if not response.found:
            return None
        state: dict[str, Any] = json.loads(response.state_json)
        return state

    @asynccontextmanager
    async def task(
        self,
        title: str = "",
        *,
        channel_id: str = "",
        ttl: float | None = None,
        resume_from: str | None = None,
        capability: str = "",
    ) -> AsyncIterator[Task]:
        """Own a task for the block, mirrored to the hub; inside, tools see it as TaskInject.

        ``capability`` tags the task (AG2's ``capability=``): when it ends, the hub counts its outcome in
        this agent's ``Resume.observed[capability]`` (see :meth:`HubClient.get_resume`).

        ``resume_from`` names an earlier task of this agent (e.g. one a crashed run left): its
        last checkpoint is read before the new task starts and is ``task.resumed_state``.

        The task is current for this block's context only (a context variable): concurrent
        blocks, each in its own asyncio task, see their own task, and ``agent.ask`` inside
        the block gets the network tools with it.

        STARTED on entry, COMPLETED on a clean exit (unless ended inside), FAILED when the block raises.
        """
        resumed = await self.read_task_checkpoint(resume_from) if resume_from is not None else None
        request = hub_pb2.ReportTaskRequest(
            kind=task_pb2.TASK_EVENT_KIND_STARTED, title=title, channel_id=channel_id, capability=capability
        )
        if ttl is not None:
            request.ttl_seconds = ttl
        response = await self.rpc.report_task(request)
        task = Task(response.task.task_id, self, title, channel_id, resumed_state=resumed)
        await task._reported(task_pb2.TASK_EVENT_KIND_STARTED)
        with task_scope(task):
            try:
                yield task
            except BaseException as exc:
                if not task.ended:
                    await task.fail(f"{type(exc).__name__}: {exc}")
                raise
            else:
                if not task.ended:
                    await task.complete()

    async def _report(
        self, task: Task, kind: task_pb2.TaskEventKind.ValueType, *, payload: Any = None, error: str = ""
    ) -> None:
        request = hub_pb2.ReportTaskRequest(
            task_id=task.task_id,
            kind=kind,
            payload_json=json.dumps(payload) if payload is not None else "",
            error=error,
        )
        await self.rpc.report_task(request)
        await task._reported(kind, payload, error)


# -- the default handler and its hooks ------------------------------------------------------


async def read_wal_until(client: NetworkClient, envelope: Envelope) -> list[Envelope]:
    """The channel's WAL (as ``client`` may see it) before ``envelope``, excluding it.

    Read through the client's transcript cache: each turn asks the hub only for the
    envelopes admitted since the previous read (:meth:`NetworkClient.read_wal_before`)."""
    return await client.read_wal_before(envelope.channel_id, envelope.seq)


def resolve_view_policy(client: NetworkClient, metadata: ChannelMetadata) -> ViewPolicy:
    """The view this participant uses in this channel.

    A per-channel override, the client's own view, or the adapter's default (the view
    the hub named in DescribeChannel).
    """
    if isinstance(client, AgentClient):
        override = client.view_policies.get(metadata.channel_id) or client.view_policy
        if override is not None:
            return override
    return adapter_for(metadata.type).default_view(metadata)


def stamp_dependencies(client: NetworkClient, channel: Channel, state: Any) -> dict[Any, Any]:
    """The turn's dependencies: CHANNEL_DEP, AGENT_CLIENT_DEP, HUB_DEP, CHANNEL_STATE_DEP (+ TASK_DEP in a task)."""
    deps: dict[Any, Any] = {
        CHANNEL_DEP: channel,
        AGENT_CLIENT_DEP: client,
        HUB_DEP: client.hub,
        CHANNEL_STATE_DEP: state,
    }
    if isinstance(client, AgentClient):
        deps.update(client.turn_dependencies())
    return deps


async def _superseded(client: NetworkClient, envelope: Envelope) -> bool:
    later = await client.read_wal(envelope.channel_id, from_seq=envelope.seq + 1)
    return any(e.event_type in (EV_TEXT, EV_PACKET) and e.sender_id != client.agent_id for e in later)


async def accept_invite(client: NetworkClient, channel_id: str) -> None:
    """Ack an invite the way every handler does: a refusal is logged, not raised (the channel then
    closes on the hub's invite timeout)."""
    try:
        await client.ack_invite(channel_id)
    except AgentNetError as err:
        log.warning("could not ack the invite to %s: %s", channel_id, err.message)


async def default_handler(envelope: Envelope, client: NetworkClient) -> None:
    """The standard handler: ack invites; run a turn on EV_TEXT / EV_PACKET; ignore the rest.

    A question carrying an A2A dispatch is answered inside :func:`~agentsdk.a2a.dispatch_scope`
    (custom headers readable, nested calls linked) with the ``request_input`` tool offered; a
    turn that raises answers the call as failed."""
    if envelope.event_type == EV_CHANNEL_INVITE:
        await accept_invite(client, envelope.channel_id)
        return
    if envelope.event_type not in (EV_TEXT, EV_PACKET) or not isinstance(client, AgentClient):
        return
    await _process_substantive(envelope, client)


def _turn_input(envelope: Envelope, text: str, client: NetworkClient, policy: ViewPolicy) -> str | list[BaseEvent]:
    """What the turn asks the model: the envelope's text (labelled with the sender's name under a
    named view), then the images it carries, if any."""
    if policy.name.startswith("named"):
        label = f"[{client.hub.name_for(envelope.sender_id)}]:"
        text = f"{label} {text}" if text else label
    images = envelope_images(envelope)
    if not images:
        return text
    parts: list[BaseEvent] = [TextInput(text)] if text else []
    parts.extend(ImageInput.from_event_data(item) for item in images)
    return parts


async def _process_substantive(envelope: Envelope, client: AgentClient) -> None:
    may_post = delivered_can_send(envelope.envelope_id)  # the hub said so in the delivery: no CanSend call
    if may_post is None:
        may_post = await client.can_send(envelope.channel_id, causation_id=envelope.envelope_id)
    if not may_post:
        return  # not our turn, or the channel is closing
    metadata, state, _expected = await client.channel_info(envelope.channel_id)
    if metadata.last_seq > envelope.seq:  # something came after it: perhaps our own reply already
        if await client.find_reply(envelope.channel_id, envelope.envelope_id) is not None:
            return  # answered before (a redelivery after a crash, before the ack was stored): no second reply
        if await _superseded(client, envelope):
            return  # a newer substantive envelope arrived meanwhile; its own turn answers it
    adapter = adapter_for(metadata.type)
    wal = await read_wal_until(client, envelope)
    policy = resolve_view_policy(client, metadata)
    history = await policy.project(
        wal,
        participant_id=client.agent_id,
        channel=metadata,
        render_envelope=adapter.render_envelope,
        name_for=client.hub.name_for,
    )
    channel = Channel(metadata, client)
    deps = stamp_dependencies(client, channel, state)
    tools = adapter.tools_for(client, metadata, state, client.agent_id)
    dispatch = Dispatch.from_envelope(envelope)
    if dispatch is not None:
        tools = [*tools, REQUEST_INPUT_TOOL]
    turn_input = _turn_input(envelope, adapter.extract_turn_input(envelope), client, policy)
    relay = (
        ChunkRelay(client, envelope.channel_id, envelope.envelope_id, max_chunk_bytes=client.max_chunk_bytes)
        if client.stream_chunks
        else None
    )
    with dispatch_scope(dispatch), cause_scope(envelope.envelope_id):
        try:
            reply = await client.agent.ask(
                turn_input,
                tools=tools,
                dependencies=deps,
                stream=Stream(stream_id=envelope.channel_id, events=history),
                on_chunk=relay.add if relay is not None else None,
            )
        except Exception as exc:
            if dispatch is None:
                raise
            log.exception("agent %s failed to answer A2A call %s", client.name, dispatch.execution_id)
            await client.send_envelope(dispatch.failure(client.agent_id, exc))
            return
        finally:
            if relay is not None:
                await relay.finish()
    out = adapter.build_round_envelope(
        metadata=metadata, sender_id=client.agent_id, reply=reply, events=reply.events, state=state, hub=client.hub
    )
    if dispatch is not None and dispatch.input_question is not None:
        out = dispatch.reply(client.agent_id, dispatch.input_question, status="input-required")
    if out is not None:
        out.causation_id = envelope.envelope_id
        await client.send_envelope(out)
