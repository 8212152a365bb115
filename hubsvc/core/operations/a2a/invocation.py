"""InvokeAgent: check a call, record its execution, consult the target (or call the outside agent)
and wait for its outcome.

An invocation is a consulting channel from the caller to the target whose question
carries an :class:`A2ADispatch` (``event_data["a2a"]``); the target's EV_TEXT reply
(optionally with an :class:`A2AReply`) ends it. Every invocation is recorded as an
:class:`Execution` linked to the execution the caller was running in (through the call
token it presents) and to a shared root session. A call to an outside A2A agent is made by
the hub instead (:mod:`hubsvc.core.operations.a2a.outside`): the same execution record,
without a channel.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from agentnet.v1 import a2a_pb2, hub_pb2
from google.protobuf.json_format import MessageToDict

from hubsvc.core.executions import Running
from hubsvc.core.hub import HubCore
from hubsvc.core.operations.a2a.outside import OutsideAgents
from hubsvc.core.operations.a2a.rules import (
    CANCEL_REASON,
    CANCELED_TEXT,
    check_custom_headers,
    matches_any,
    may_call,
)
from hubsvc.core.operations.a2a.tokens import CallTokenOps
from hubsvc.core.operations.messages import MessageOps
from hubsvc.core.registry import AgentEntry
from hubsvc.core.remote_a2a import card_base, is_url
from hubsvc.core.util import check_seconds, new_id
from netkernel.a2a_outcome import reply_outcome
from netkernel.channel_types import CONSULTING_TYPE
from netkernel.envelope import text_envelope
from netkernel.errors import (
    AgentNetError,
    ChannelClosed,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Timeout,
)
from netkernel.wire import INVOCATION_STATUS, envelope_from_wire


@dataclass
class _Started:
    """A call checked and recorded as running, waiting for its outcome."""

    record: a2a_pb2.Execution
    target_id: str
    target_name: str
    timeout: float
    endpoint: a2a_pb2.RemoteA2AAgent | None = None
    """Where an outside target lives (None: a hub agent, consulted in the record's channel)."""
    request: hub_pb2.InvokeAgentRequest | None = None
    """What to send an outside target."""
    remote_task: tuple[str, str] = ("", "")
    """The outside target's task and context the call continues ("": a new task)."""


class Invocations:
    """InvokeAgent for hub agents and outside agents alike."""

    def __init__(self, core: HubCore, messages: MessageOps, outside: OutsideAgents, tokens: CallTokenOps) -> None:
        self.core = core
        self.messages = messages
        self.outside = outside
        self.tokens = tokens

    async def invoke(self, caller: str, request: hub_pb2.InvokeAgentRequest) -> hub_pb2.InvokeAgentResponse:
        """Run one call: check it, record a child execution, consult the target (or call the outside
        agent), wait for the outcome (counted by outcome in the hub's metrics). A ``detach`` call
        returns once started (RUNNING); the hub then waits for its outcome in the background."""
        try:
            started = await self._start(caller, request)
        except AgentNetError as err:
            self.core.recorder.a2a_call(err.reason)
            raise
        except Exception:
            self.core.recorder.a2a_call("INTERNAL")
            raise
        if request.detach:
            self.core.spawn(self._finish(caller, started), "a2a-detached")
            record = started.record
            return hub_pb2.InvokeAgentResponse(
                status=a2a_pb2.INVOCATION_STATUS_RUNNING,
                execution_id=record.execution_id,
                root_session_id=record.root_session_id,
            )
        return await self._finish(caller, started)

    async def _finish(self, caller: str, started: _Started) -> hub_pb2.InvokeAgentResponse:
        """Wait for a started call's outcome, record it and count it."""
        log = self.core.executions
        record = started.record
        try:
            if started.endpoint is not None:
                assert started.request is not None
                status, result, error = await self.outside.call(
                    record, started.endpoint, started.request, started.timeout, started.remote_task
                )
            else:
                status, result, error = await self._outcome(
                    caller, record.channel_id, started.target_id, started.target_name, started.timeout
                )
        except asyncio.CancelledError:
            log.end(record, a2a_pb2.INVOCATION_STATUS_FAILED, CANCELED_TEXT)
            self.core.spawn(self._abandon(caller, record), "a2a-cancelled")
            self.core.recorder.a2a_call("CANCELLED")
            self._forget(record)
            raise
        except Exception as err:
            log.end(record, a2a_pb2.INVOCATION_STATUS_FAILED, f"{type(err).__name__}: {err}")
            try:
                await log.save(record)
            finally:
                self._forget(record)
            self.core.recorder.a2a_call(getattr(err, "reason", "INTERNAL"))
            raise
        if started.endpoint is not None and status != a2a_pb2.INVOCATION_STATUS_CANCELED:
            stored = await log.get(record.execution_id)
            if stored is not None and stored.status == a2a_pb2.INVOCATION_STATUS_CANCELED:
                # CancelExecution on another replica recorded it CANCELED while the outside agent answered.
                status, result, error = stored.status, "", stored.error
        log.end(record, status, error)
        record.result = result
        self.core.audit(
            "a2a_invoked",
            caller,
            started.target_id,
            {"execution_id": record.execution_id, "status": a2a_pb2.InvocationStatus.Name(status)},
        )
        try:
            await log.save(record)  # shares its group commit with the audit record
        finally:
            self._forget(record)
        self.core.recorder.a2a_call(INVOCATION_STATUS.name_of(status, "failed").replace("-", "_"))
        return hub_pb2.InvokeAgentResponse(
            status=status,
            result=result,
            error=error,
            execution_id=record.execution_id,
            root_session_id=record.root_session_id,
        )

    def _forget(self, record: a2a_pb2.Execution) -> None:
        """The call ended here: no longer running on this replica; wake CancelExecution waiting for it."""
        self.outside.forget(record.execution_id)
        running = self.core.executions.running.pop(record.execution_id, None)
        if running is not None:
            running.ended.set()

    async def _start(self, caller: str, request: hub_pb2.InvokeAgentRequest) -> _Started:
        """Check a call and record its execution as running; for a hub agent, open its consulting
        channel; for an outside agent, find the remote task it continues."""
        timeout = self._timeout(request)
        if not request.message.strip():
            raise InvalidArgument("message is empty; say what the agent should do.", metadata={"field": "message"})
        check_custom_headers(request.custom_headers)
        continued = await self._continued(caller, request) if request.continues_execution_id else None
        parent = (
            await self.tokens.verify(caller, request.call_token) if request.call_token and continued is None else None
        )
        target_id, target_name, endpoint = await self._resolve(
            caller, continued.target_id if continued else request.agent_id, request.skill
        )
        if endpoint is not None:
            self.outside.remote.policy.check(
                endpoint.url, "the agent's interface"
            )  # refused before anything is recorded
        if continued is not None:
            depth = await self.core.executions.depth_of(continued)
        else:
            depth = parent.depth + 1 if parent is not None else 1
        self.core.rules.check_call_depth("invoke", caller, depth, target_name)
        if continued is not None:
            root = continued.root_session_id
        elif parent is not None:
            root = parent.record.root_session_id
        else:
            root = request.root_session_id or new_id()
            await self.core.executions.require_member(caller, root, "add calls to it")
        question = text_envelope("", caller, request.message, depth=depth)
        if continued is not None:
            parent_id = continued.parent_execution_id
        else:
            parent_id = parent.record.execution_id if parent is not None else ""
        record = a2a_pb2.Execution(
            execution_id=new_id(),
            parent_execution_id=parent_id,
            root_session_id=root,
            caller_id=caller,
            target_id=target_id,
            skill=request.skill,
            continues_execution_id=continued.execution_id if continued is not None else "",
        )
        started = _Started(record, target_id, target_name, timeout, endpoint, request)
        log = self.core.executions
        log.start(record)
        log.running[record.execution_id] = Running(record, depth)
        recorded: list[asyncio.Future[None]] = []
        try:
            if endpoint is not None:
                started.remote_task = await self.outside.task_to_continue(
                    record, continued, joined=parent is not None or bool(request.root_session_id)
                )
                # The call's question is the caller's envelope, as a channel seed would be; outside agents
                # have no channel to admit it into, so only its rate token is taken (last: a refused call
                # spends none) and given back if the call's record is not stored.
                charged = [caller] if self.core.rate.take(caller, "", question.event_type) else []
                self.outside.starting(record.execution_id)
                recorded.append(log.submit(record))  # running, before anything is sent
                try:
                    await recorded[0]
                except Exception as err:  # the call was not recorded, so it never started
                    self.core.admission.refund(charged, err)
                    raise
                return started
            # No call token here: the dispatch is stored in the channel's WAL (see the module doc).
            dispatch = a2a_pb2.A2ADispatch(
                execution_id=record.execution_id,
                root_session_id=root,
                message=request.message,
                skill=request.skill,
                custom_headers=dict(request.custom_headers),
            )
            # Recorded as running once the policy allowed the call (a refused call never started:
            # nothing is recorded), in the same group commit as the channel it opens (writes commit
            # in order, so the channel's commit implies this one).
            ch = await self.core.open_channel(
                caller,
                type=CONSULTING_TYPE,
                targets=[target_id],
                intent=f"a2a: {request.skill}" if request.skill else "a2a",
                seed=question,
                dispatch=MessageToDict(dispatch, preserving_proto_field_name=True),
                action="invoke",
                on_checked=lambda: recorded.append(log.submit(record)),
            )
            await recorded[0]
            record.channel_id = ch.channel_id
            await log.save(record)  # the running record names its channel (GetExecution, CancelExecution)
        except asyncio.CancelledError:
            if recorded:  # else cancelled while the policy was asked: the call never started
                log.end(record, a2a_pb2.INVOCATION_STATUS_FAILED, CANCELED_TEXT)
                self.core.spawn(self._abandon(caller, record), "a2a-cancelled")
            self._forget(record)
            raise
        except Exception as err:
            if recorded:  # else refused before the call started (a rule, the arbiter, the inbox cap): nothing to end
                log.end(record, a2a_pb2.INVOCATION_STATUS_FAILED, f"{type(err).__name__}: {err}")
                await log.save(record)
            self._forget(record)
            raise
        return started

    async def _continued(self, caller: str, request: hub_pb2.InvokeAgentRequest) -> a2a_pb2.Execution:
        """The input-required execution of ``caller`` that ``request`` answers (checked)."""
        ref = request.continues_execution_id
        row = await self.core.executions.get(ref)
        if row is None:
            raise NotFound(
                f"no execution {ref!r}; continue an execution InvokeAgent returned.", metadata={"execution_id": ref}
            )
        if row.caller_id != caller:
            raise PermissionDenied(
                "only the caller of an execution may answer its question.", metadata={"execution_id": ref}
            )
        if request.agent_id and not await self._names(request.agent_id, row.target_id):
            raise InvalidArgument(
                "agent_id names another agent than the execution you continue; leave it empty or name its target.",
                metadata={"field": "agent_id"},
            )
        if row.status != a2a_pb2.INVOCATION_STATUS_INPUT_REQUIRED:
            raise FailedPrecondition(
                f"execution {ref!r} is {INVOCATION_STATUS.name_of(row.status, 'failed')}, not input-required; only a "
                "call that asked a question can be continued.",
                metadata={"execution_id": ref},
            )
        if await self.core.executions.continuation_of(row) is not None:
            raise FailedPrecondition(
                f"execution {ref!r} was already answered; continue the latest execution of the conversation.",
                metadata={"execution_id": ref},
            )
        return row

    async def _names(self, ref: str, target_id: str) -> bool:
        """Whether the agent reference ``ref`` (an id, a name, or an outside agent's URL) names ``target_id``."""
        if ref == target_id:
            return True
        if is_url(ref):
            return is_url(target_id) and ref.rstrip("/") in (target_id, card_base(target_id))
        return (await self.core.registry.find(ref)).agent_id == target_id

    async def _resolve(self, caller: str, ref: str, skill: str) -> tuple[str, str, a2a_pb2.RemoteA2AAgent | None]:
        """The target's id, name and, for an outside agent, where it lives. A URL names the registered
        remote_agent identity with that card or interface URL (its visibility rules apply), else an
        ad-hoc call to the card there (the operator's --a2a-outbound-allow is the only gate)."""
        if not is_url(ref):
            target = await self._target(caller, ref, skill)
            remote = target.record.remote_a2a if target.record.HasField("remote_a2a") else None
            return target.agent_id, target.name, remote
        for entry in self.core.registry.entries():
            remote = entry.record.remote_a2a
            if entry.record.HasField("remote_a2a") and ref.rstrip("/") in (
                remote.card_url,
                remote.url.rstrip("/"),
                card_base(remote.card_url),
            ):
                target = await self._target(caller, entry.agent_id, skill)
                return target.agent_id, target.name, remote
        fetched = await self.outside.remote.fetch_card(ref)
        offered = [s.id or s.name for s in fetched.card.skills]
        if skill and not matches_any(offered, [skill]):
            raise InvalidArgument(
                f"the A2A agent at {ref} does not offer skill {skill!r}; it offers {offered}.",
                metadata={"field": "skill"},
            )
        return fetched.endpoint.card_url, fetched.card.name or ref, fetched.endpoint

    def _timeout(self, request: hub_pb2.InvokeAgentRequest) -> float:
        if not request.HasField("timeout_seconds"):
            return self.core.options.a2a_default_timeout
        return check_seconds(
            request.timeout_seconds, "timeout_seconds", self.core.options.max_wait_seconds, absent="the default"
        )

    async def _target(self, caller: str, ref: str, skill: str) -> AgentEntry:
        """The callee ``ref``, checked: not the caller, accepting the caller, offering ``skill``.

        A refusal is decided on the store's records: with replicas, this one's copies of the two
        identities may lag an A2A setting changed through another replica a moment ago (the change
        feed brings it soon after), so they are read again first. Calls that pass read nothing."""
        if not ref:
            raise InvalidArgument("agent_id is empty; pick one from DiscoverAgents.", metadata={"field": "agent_id"})
        registry = self.core.registry
        target = await registry.find(ref)
        if target.agent_id == caller:
            raise InvalidArgument("an agent cannot invoke itself; pick another agent from DiscoverAgents.")
        if not self._accepts(caller, target, skill):
            await registry.reload(caller)
            await registry.reload(target.agent_id)
            target = registry.resolve(target.agent_id)  # NOT_FOUND when it was removed meanwhile
        if not may_call(registry.get(caller).record, target.record):
            raise PermissionDenied(
                f"agent {target.name!r} does not accept A2A calls from you: its A2A is disabled, it belongs to "
                "another project, or you are not among its allowed callers. DiscoverAgents lists who you may call.",
                metadata={"agent_id": target.agent_id},
            )
        if skill and not matches_any(target.record.a2a.skills, [skill]):
            raise InvalidArgument(
                f"agent {target.name!r} does not offer skill {skill!r}; it offers {list(target.record.a2a.skills)}.",
                metadata={"field": "skill"},
            )
        return target

    def _accepts(self, caller: str, target: AgentEntry, skill: str) -> bool:
        """Whether this replica's copies say ``target`` takes ``caller``'s call for ``skill``."""
        if not may_call(self.core.registry.get(caller).record, target.record):
            return False
        return not skill or matches_any(target.record.a2a.skills, [skill])

    async def _outcome(
        self, caller: str, channel_id: str, target_id: str, target_name: str, timeout: float
    ) -> tuple[a2a_pb2.InvocationStatus.ValueType, str, str]:
        """A hub agent's answer in the call's consulting channel (CANCELED when CancelExecution closed it)."""
        try:
            reply = await self.messages.await_reply(
                caller, channel_id, target_id, timeout, timeout_reason="a2a_timeout"
            )
        except Timeout:
            return a2a_pb2.INVOCATION_STATUS_FAILED, "", f"{target_name} did not answer within {timeout:g}s"
        except ChannelClosed as err:
            if (err.metadata or {}).get("reason") == CANCEL_REASON:
                return a2a_pb2.INVOCATION_STATUS_CANCELED, "", CANCELED_TEXT
            return a2a_pb2.INVOCATION_STATUS_FAILED, "", err.message
        status, result, error = reply_outcome(envelope_from_wire(reply).event_data, target_name)
        return INVOCATION_STATUS.by_name[status], result, error

    async def _abandon(self, caller: str, record: a2a_pb2.Execution) -> None:
        """Close the channel of a call its caller gave up on, then record the call failed (in that
        order: whoever reads the failed record finds its channel closed)."""
        try:
            if record.channel_id:
                try:
                    await self.core.close_channel(caller, record.channel_id, "a2a_cancelled")
                except ChannelClosed:
                    pass  # already ended
        finally:
            await self.core.executions.save(record)
