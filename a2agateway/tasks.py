"""A2A tasks from hub executions, and A2A stream events from a call's consulting channel (pure).

A task is a chain of executions: the first (whose id is the task id) and each execution that
answered the previous one's question (``continues_execution_id``). The task's state is the last
one's. A stream's events are derived from the last execution's channel WAL, one envelope at a
time, so the same WAL always gives the same events and each event is named by where it comes
from: ``<execution_id>:<seq>:<index>`` (its ``eventId`` metadata), which a resuming subscriber
hands back as ``Last-Event-ID``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from a2a.types import a2a_pb2 as a2a
from agentnet.v1 import a2a_pb2 as hub_a2a
from agentnet.v1 import envelope_pb2
from google.protobuf import struct_pb2, timestamp_pb2
from google.protobuf.json_format import MessageToDict

from netkernel.a2a_outcome import reply_outcome
from netkernel.envelope import EV_CHANNEL_CLOSED, EV_TEXT
from netkernel.wire import envelope_from_wire

Event = a2a.Task | a2a.Message | a2a.TaskStatusUpdateEvent | a2a.TaskArtifactUpdateEvent

CANCEL_REASON = "a2a_canceled"
"""The close reason of a call its caller cancelled (CancelExecution)."""
COMPLETE_REASON = "consulting_complete"
"""The close reason of a call the callee answered (its answer made the events already)."""
EVENT_ID_KEY = "eventId"
"""The metadata key of a stream event's position."""

STATES: dict[int, a2a.TaskState] = {
    hub_a2a.INVOCATION_STATUS_RUNNING: a2a.TASK_STATE_WORKING,
    hub_a2a.INVOCATION_STATUS_COMPLETED: a2a.TASK_STATE_COMPLETED,
    hub_a2a.INVOCATION_STATUS_INPUT_REQUIRED: a2a.TASK_STATE_INPUT_REQUIRED,
    hub_a2a.INVOCATION_STATUS_FAILED: a2a.TASK_STATE_FAILED,
    hub_a2a.INVOCATION_STATUS_CANCELED: a2a.TASK_STATE_CANCELED,
}
"""Hub invocation status -> A2A task state."""
ENDS_STREAM = frozenset(
    {a2a.TASK_STATE_COMPLETED, a2a.TASK_STATE_FAILED, a2a.TASK_STATE_CANCELED, a2a.TASK_STATE_INPUT_REQUIRED}
)
"""States after which a stream ends (input-required waits for the client's next message)."""


@dataclass(frozen=True)
class EventId:
    """Where a stream event comes from: the execution, the WAL seq, the index among that envelope's events."""

    execution_id: str
    seq: int
    index: int

    def __str__(self) -> str:
        return f"{self.execution_id}:{self.seq}:{self.index}"

    @classmethod
    def parse(cls, text: str) -> EventId:
        """Read ``<execution_id>:<seq>:<index>`` (ValueError when it is not one)."""
        execution_id, seq, index = text.strip().split(":")
        if not execution_id or int(seq) < 0 or int(index) < 0:
            raise ValueError(text)
        return cls(execution_id, int(seq), int(index))


def chain_of(head: hub_a2a.Execution, executions: Sequence[hub_a2a.Execution]) -> list[hub_a2a.Execution]:
    """``head`` and the executions that continued it, in order."""
    answered_by = {e.continues_execution_id: e for e in executions if e.continues_execution_id}
    chain = [head]
    while chain[-1].execution_id in answered_by and len(chain) <= len(executions):
        chain.append(answered_by[chain[-1].execution_id])
    return chain


def as_started(execution: hub_a2a.Execution) -> hub_a2a.Execution:
    """``execution`` as it was when it started (running, no outcome): what a send's first task shows,
    however soon the record was read after the call began (a fast callee may have answered already;
    its outcome then comes as the events, once, not also in the first task)."""
    started = hub_a2a.Execution()
    started.CopyFrom(execution)
    started.status = hub_a2a.INVOCATION_STATUS_RUNNING
    started.ClearField("ended_at")
    started.result = ""
    started.error = ""
    return started


def agent_message(text: str, task_id: str, context_id: str, message_id: str) -> a2a.Message:
    """A message from the agent with one text part."""
    return a2a.Message(
        message_id=message_id,
        task_id=task_id,
        context_id=context_id,
        role=a2a.ROLE_AGENT,
        parts=[a2a.Part(text=text)],
    )


def result_artifact(execution: hub_a2a.Execution, text: str) -> a2a.Artifact:
    """The answer of a completed execution as the task's artifact."""
    return a2a.Artifact(artifact_id=f"result-{execution.execution_id}", name="result", parts=[a2a.Part(text=text)])


def status_of(execution: hub_a2a.Execution, task_id: str, context_id: str) -> a2a.TaskStatus:
    """The A2A status of an execution as recorded (its question or error as the status message)."""
    state = STATES.get(execution.status, a2a.TASK_STATE_UNSPECIFIED)
    when = execution.ended_at if execution.HasField("ended_at") else execution.started_at
    status = a2a.TaskStatus(state=state, timestamp=timestamp_pb2.Timestamp(seconds=when.seconds, nanos=when.nanos))
    text = execution.result if state == a2a.TASK_STATE_INPUT_REQUIRED else execution.error
    if text and state != a2a.TASK_STATE_COMPLETED:
        status.message.CopyFrom(agent_message(text, task_id, context_id, f"status-{execution.execution_id}"))
    return status


def task_of(chain: Sequence[hub_a2a.Execution]) -> a2a.Task:
    """The A2A task of a chain of executions: the last one's state, every completed answer as an artifact."""
    head, last = chain[0], chain[-1]
    task = a2a.Task(id=head.execution_id, context_id=head.root_session_id)
    task.status.CopyFrom(status_of(last, task.id, task.context_id))
    for execution in chain:
        if execution.status == hub_a2a.INVOCATION_STATUS_COMPLETED:
            task.artifacts.append(result_artifact(execution, execution.result))
    task.metadata.update({"hubExecutionId": last.execution_id, "hubAgentId": last.target_id})
    return task


def _stamp(event: a2a.TaskStatusUpdateEvent | a2a.TaskArtifactUpdateEvent, event_id: EventId) -> None:
    event.metadata.update({EVENT_ID_KEY: str(event_id)})


def record_events(
    execution: hub_a2a.Execution, task_id: str, context_id: str
) -> list[a2a.TaskStatusUpdateEvent | a2a.TaskArtifactUpdateEvent]:
    """The A2A events of an ended execution as the hub recorded it (a call to an outside A2A agent has
    no consulting channel to read): its answer as the artifact when completed, then its final status;
    stamped with seq 0."""
    events: list[a2a.TaskStatusUpdateEvent | a2a.TaskArtifactUpdateEvent] = []
    if execution.status == hub_a2a.INVOCATION_STATUS_COMPLETED:
        artifact = a2a.TaskArtifactUpdateEvent(task_id=task_id, context_id=context_id, last_chunk=True)
        artifact.artifact.CopyFrom(result_artifact(execution, execution.result))
        events.append(artifact)
    update = a2a.TaskStatusUpdateEvent(task_id=task_id, context_id=context_id)
    update.status.CopyFrom(status_of(execution, task_id, context_id))
    events.append(update)
    for index, event in enumerate(events):
        _stamp(event, EventId(execution.execution_id, 0, index))
    return events


def wal_events(
    envelope: envelope_pb2.Envelope, execution: hub_a2a.Execution, task_id: str, context_id: str, callee_name: str
) -> list[a2a.TaskStatusUpdateEvent | a2a.TaskArtifactUpdateEvent]:
    """The A2A events one envelope of ``execution``'s consulting channel makes, each stamped with its EventId."""
    events: list[a2a.TaskStatusUpdateEvent | a2a.TaskArtifactUpdateEvent] = []

    def status(state: a2a.TaskState, text: str = "") -> None:
        update = a2a.TaskStatusUpdateEvent(task_id=task_id, context_id=context_id)
        update.status.state = state
        if envelope.HasField("created_time"):
            update.status.timestamp.CopyFrom(envelope.created_time)
        if text:
            message_id = f"{execution.execution_id}-{envelope.seq}"
            update.status.message.CopyFrom(agent_message(text, task_id, context_id, message_id))
        events.append(update)

    if envelope.event_type == EV_TEXT and envelope.sender_id == execution.caller_id:
        status(a2a.TASK_STATE_WORKING)  # the question reached the callee's channel
    elif envelope.event_type == EV_TEXT and envelope.sender_id == execution.target_id:
        outcome, result, error = reply_outcome(envelope_from_wire(envelope).event_data, callee_name)
        if outcome == "completed":
            artifact = a2a.TaskArtifactUpdateEvent(task_id=task_id, context_id=context_id, last_chunk=True)
            artifact.artifact.CopyFrom(result_artifact(execution, result))
            events.append(artifact)
            status(a2a.TASK_STATE_COMPLETED)
        elif outcome == "input-required":
            status(a2a.TASK_STATE_INPUT_REQUIRED, result)
        else:
            status(a2a.TASK_STATE_FAILED, error)
    elif envelope.event_type == EV_CHANNEL_CLOSED:  # every end, a TTL one too (after its expired)
        reason = str(envelope_from_wire(envelope).event_data.get("reason", ""))
        if reason == CANCEL_REASON:
            status(a2a.TASK_STATE_CANCELED, "the caller cancelled the task")
        elif reason != COMPLETE_REASON:
            status(a2a.TASK_STATE_FAILED, f"{callee_name} did not answer: the call ended ({reason or 'expired'})")
    for index, event in enumerate(events):
        _stamp(event, EventId(execution.execution_id, envelope.seq, index))
    return events


def metadata_headers(metadata: struct_pb2.Struct, extensions: Sequence[str]) -> dict[str, str]:
    """Custom headers from a message's metadata (string values as they are, others as JSON) and its
    extension URIs (``x-a2a-extensions``, comma-separated)."""
    headers: dict[str, str] = {}
    for key, value in metadata.fields.items():
        kind = value.WhichOneof("kind")
        if kind == "string_value":
            headers[key] = value.string_value
        else:
            headers[key] = json.dumps(MessageToDict(value), separators=(",", ":"), sort_keys=True)
    if extensions:
        headers["x-a2a-extensions"] = ",".join(extensions)
    return headers
