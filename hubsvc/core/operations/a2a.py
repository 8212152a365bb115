"""Agent-to-agent (A2A) calls: visibility, discovery, invocation, call tokens, executions.

An invocation is a consulting channel from the caller to the target whose question
carries an :class:`A2ADispatch` (``event_data["a2a"]``); the target's EV_TEXT reply
(optionally with an :class:`A2AReply`) ends it. Every invocation is recorded as an
:class:`Execution` linked to the execution the caller was running in (through the call
token it presents) and to a shared root session.

Call tokens never enter the channel: the dispatch is part of the channel's WAL, which
every member (the caller too) and the operator read, so it names only the execution;
its target asks for a token with ``RefreshCallToken{execution_id}`` when it makes a
nested call. Tokens are stored as hashes while their execution runs
(:mod:`hubsvc.core.call_tokens`), so a token one replica issued verifies on any other; an
execution cannot outlive the hub process that runs it (its caller waits on an RPC there),
so running executions left by a stopped hub are marked failed at start, which drops their
tokens.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase

from agentnet.v1 import a2a_pb2, hub_pb2, identity_pb2
from google.protobuf.json_format import MessageToDict

from hubsvc.core.call_tokens import ExecutionEnded
from hubsvc.core.executions import Running
from hubsvc.core.hub import HubCore
from hubsvc.core.operations.messages import MessageOps
from hubsvc.core.registry import AgentEntry
from hubsvc.core.util import check_seconds, new_id
from netkernel.a2a_outcome import reply_outcome
from netkernel.envelope import text_envelope
from netkernel.errors import (
    AgentNetError,
    ChannelClosed,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Timeout,
    TokenExpired,
    Unauthenticated,
)
from netkernel.wire import INVOCATION_STATUS, envelope_from_wire

RESERVED_HEADER_PREFIX = "a2a-"
CANCEL_REASON = "a2a_canceled"
"""The close reason of a consulting channel whose caller cancelled the call (the call ends CANCELED)."""
DEFAULT_DISCOVER_LIMIT = 50


def may_call(caller: identity_pb2.AgentRecord, target: identity_pb2.AgentRecord) -> bool:
    """Whether ``caller`` may see and invoke ``target``: A2A enabled, same project, and the
    caller's name (or id) matches one of the target's ``allowed_callers`` globs (none = anyone)."""
    settings = target.a2a
    if not settings.enabled or caller.passport.project != target.passport.project:
        return False
    if not settings.allowed_callers:
        return True
    name = caller.passport.name
    return any(p == caller.agent_id or fnmatchcase(name, p) for p in settings.allowed_callers)


def matches_any(offered: Iterable[str], wanted: Iterable[str]) -> bool:
    """One discovery filter: no wanted values, or any wanted value offered (case-insensitive)."""
    wanted_set = {w.lower() for w in wanted}
    return not wanted_set or any(o.lower() in wanted_set for o in offered)


def check_custom_headers(headers: Mapping[str, str]) -> None:
    """Refuse empty keys and keys in the reserved ``a2a-`` namespace (any letter case)."""
    for key in headers:
        if not key.strip():
            raise InvalidArgument("custom header keys must not be empty.", metadata={"field": "custom_headers"})
        if key.lower().startswith(RESERVED_HEADER_PREFIX):
            raise InvalidArgument(
                f"custom header {key!r} uses the reserved 'a2a-' prefix (platform headers such as a2a-token); "
                "rename it, e.g. to 'x-" + key[len(RESERVED_HEADER_PREFIX) :] + "'.",
                metadata={"field": "custom_headers", "key": key},
            )


class A2AOps:
    """DiscoverAgents, InvokeAgent, RefreshCallToken and ListExecutions (SetA2ASettings is in agents.py)."""

    def __init__(self, core: HubCore, messages: MessageOps) -> None:
        self.core = core
        self.messages = messages

    # -- discovery ------------------------------------------------------------------------

    def discover(self, caller: str, request: hub_pb2.DiscoverAgentsRequest) -> list[a2a_pb2.DiscoveredAgent]:
        """The A2A-enabled agents of the caller's project the caller may invoke, filtered."""
        me = self.core.registry.get(caller).record
        if request.project_id and request.project_id != me.passport.project:
            raise PermissionDenied(
                f"discovery is limited to your own project ({me.passport.project!r}); "
                f"cross-project routing to {request.project_id!r} is not supported. Leave project_id empty.",
                metadata={"project_id": request.project_id},
            )
        if request.limit < 0:
            raise InvalidArgument("limit must not be negative (0 = 50).", metadata={"field": "limit"})
        limit = request.limit or DEFAULT_DISCOVER_LIMIT
        found: list[a2a_pb2.DiscoveredAgent] = []
        for entry in sorted(self.core.registry.entries(), key=lambda e: e.name):
            record = entry.record
            settings = record.a2a
            if not may_call(me, record) or self.core.expectations.hidden(entry.agent_id):
                continue
            if not (
                matches_any(settings.skills, request.skills)
                and matches_any(settings.capabilities, request.capabilities)
                and matches_any(settings.input_modes, request.input_modes)
            ):
                continue
            found.append(
                a2a_pb2.DiscoveredAgent(
                    agent_id=entry.agent_id,
                    name=entry.name,
                    description=settings.description or record.passport.description,
                    skills=settings.skills,
                    capabilities=settings.capabilities,
                    input_modes=settings.input_modes,
                )
            )
            if len(found) >= limit:
                break
        return found

    # -- invocation -----------------------------------------------------------------------

    async def invoke(self, caller: str, request: hub_pb2.InvokeAgentRequest) -> hub_pb2.InvokeAgentResponse:
        """Run one call: check it, record a child execution, consult the target, wait for the outcome
        (counted by outcome in the hub's metrics). A ``detach`` call returns once started (RUNNING);
        the hub then waits for its outcome in the background."""
        try:
            started = await self._start(caller, request)
        except AgentNetError as err:
            self.core.recorder.a2a_call(err.reason)
            raise
        except Exception:
            self.core.recorder.a2a_call("INTERNAL")
            raise
        if request.detach:
            self.core.spawn(self._finish(caller, *started), "a2a-detached")
            record = started[0]
            return hub_pb2.InvokeAgentResponse(
                status=a2a_pb2.INVOCATION_STATUS_RUNNING,
                execution_id=record.execution_id,
                root_session_id=record.root_session_id,
            )
        return await self._finish(caller, *started)

    async def _finish(
        self, caller: str, record: a2a_pb2.Execution, target: AgentEntry, timeout: float
    ) -> hub_pb2.InvokeAgentResponse:
        """Wait for a started call's outcome, record it and count it."""
        log = self.core.executions
        try:
            status, result, error = await self._outcome(caller, record.channel_id, target, timeout)
        except asyncio.CancelledError:
            log.end(record, a2a_pb2.INVOCATION_STATUS_FAILED, "the caller cancelled the call")
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
        log.end(record, status, error)
        record.result = result
        self.core.audit(
            "a2a_invoked",
            caller,
            target.agent_id,
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
        running = self.core.executions.running.pop(record.execution_id, None)
        if running is not None:
            running.ended.set()

    async def _start(
        self, caller: str, request: hub_pb2.InvokeAgentRequest
    ) -> tuple[a2a_pb2.Execution, AgentEntry, float]:
        """Check a call, record its execution as running and open its consulting channel."""
        timeout = self._timeout(request)
        if not request.message.strip():
            raise InvalidArgument("message is empty; say what the agent should do.", metadata={"field": "message"})
        check_custom_headers(request.custom_headers)
        continued = await self._continued(caller, request) if request.continues_execution_id else None
        parent = (
            await self._verify_token(caller, request.call_token) if request.call_token and continued is None else None
        )
        target = self._target(caller, continued.target_id if continued else request.agent_id, request.skill)
        if continued is not None:
            depth = await self.core.executions.depth_of(continued)
        else:
            depth = parent.depth + 1 if parent is not None else 1
        self.core.rules.check_call_depth("invoke", caller, depth, target.name)
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
            target_id=target.agent_id,
            skill=request.skill,
            continues_execution_id=continued.execution_id if continued is not None else "",
        )
        log = self.core.executions
        log.start(record)
        log.running[record.execution_id] = Running(record, depth)
        recorded: list[asyncio.Future[None]] = []
        try:
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
                type="consulting",
                targets=[target.agent_id],
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
                log.end(record, a2a_pb2.INVOCATION_STATUS_FAILED, "the caller cancelled the call")
                self.core.spawn(self._abandon(caller, record), "a2a-cancelled")
            self._forget(record)
            raise
        except Exception as err:
            if recorded:  # else refused before the call started (a rule, the arbiter, the inbox cap): nothing to end
                log.end(record, a2a_pb2.INVOCATION_STATUS_FAILED, f"{type(err).__name__}: {err}")
                await log.save(record)
            self._forget(record)
            raise
        return record, target, timeout

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
        if request.agent_id and self.core.registry.resolve(request.agent_id).agent_id != row.target_id:
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

    def _timeout(self, request: hub_pb2.InvokeAgentRequest) -> float:
        if not request.HasField("timeout_seconds"):
            return self.core.options.a2a_default_timeout
        return check_seconds(
            request.timeout_seconds, "timeout_seconds", self.core.options.max_wait_seconds, absent="the default"
        )

    def _target(self, caller: str, ref: str, skill: str) -> AgentEntry:
        """The callee ``ref``, checked: not the caller, accepting the caller, offering ``skill``."""
        if not ref:
            raise InvalidArgument("agent_id is empty; pick one from DiscoverAgents.", metadata={"field": "agent_id"})
        target = self.core.registry.resolve(ref)
        if target.agent_id == caller:
            raise InvalidArgument("an agent cannot invoke itself; pick another agent from DiscoverAgents.")
        if not may_call(self.core.registry.get(caller).record, target.record):
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

    async def _outcome(
        self, caller: str, channel_id: str, target: AgentEntry, timeout: float
    ) -> tuple[a2a_pb2.InvocationStatus.ValueType, str, str]:
        try:
            reply = await self.messages.await_reply(
                caller, channel_id, target.agent_id, timeout, timeout_reason="a2a_timeout"
            )
        except Timeout:
            return a2a_pb2.INVOCATION_STATUS_FAILED, "", f"{target.name} did not answer within {timeout:g}s"
        except ChannelClosed as err:
            if (err.metadata or {}).get("reason") == CANCEL_REASON:
                return a2a_pb2.INVOCATION_STATUS_CANCELED, "", "the caller cancelled the call"
            return a2a_pb2.INVOCATION_STATUS_FAILED, "", err.message
        status, result, error = reply_outcome(envelope_from_wire(reply).event_data, target.name)
        return INVOCATION_STATUS.by_name[status], result, error

    async def _abandon(self, caller: str, record: a2a_pb2.Execution) -> None:
        """Record a call its caller gave up on and close its channel."""
        await self.core.executions.save(record)
        if record.channel_id:
            try:
                await self.core.close_channel(caller, record.channel_id, "a2a_cancelled")
            except ChannelClosed:
                pass  # already ended

    # -- executions -----------------------------------------------------------------------

    async def get_execution(self, viewer: str, execution_id: str) -> a2a_pb2.Execution:
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
        """Cancel a running execution ``caller`` made: close its channel; it ends CANCELED."""
        record = await self.get_execution(caller, execution_id)
        if record.caller_id != caller:
            raise PermissionDenied(
                "only the caller of an execution may cancel it.", metadata={"execution_id": execution_id}
            )
        if record.status != a2a_pb2.INVOCATION_STATUS_RUNNING or not record.channel_id:
            raise FailedPrecondition(
                f"execution {execution_id!r} is not running (it is "
                f"{INVOCATION_STATUS.name_of(record.status, 'running')}); only a running call can be cancelled.",
                metadata={"execution_id": execution_id},
            )
        running = self.core.executions.running.get(execution_id)
        try:
            await self.core.close_channel(caller, record.channel_id, CANCEL_REASON)
        except ChannelClosed:
            raise FailedPrecondition(
                f"execution {execution_id!r} has already ended; GetExecution shows its outcome.",
                metadata={"execution_id": execution_id},
            ) from None
        if running is not None:
            await running.ended.wait()  # this replica waits for the outcome: recorded CANCELED
        return await self.get_execution(caller, execution_id)

    async def list_executions(self, viewer: str | None, root_session_id: str, limit: int) -> list[a2a_pb2.Execution]:
        """An execution tree the viewer took part in (any tree, or every execution, for the operator: None)."""
        return await self.core.executions.list(viewer, root_session_id, limit)

    # -- call tokens ----------------------------------------------------------------------

    async def _issue(self, running: Running) -> tuple[str, float]:
        try:
            return await self.core.call_tokens.issue(running)
        except ExecutionEnded:
            raise self._not_running(running.record.execution_id) from None

    @staticmethod
    def _not_running(execution_id: str) -> FailedPrecondition:
        return FailedPrecondition(
            f"execution {execution_id!r} is not running (it has ended, or never existed); a call token is "
            "issued only while you answer the A2A dispatch with that execution_id.",
            metadata={"execution_id": execution_id},
        )

    async def _answering(self, caller: str, execution_id: str) -> Running:
        """The running execution ``execution_id`` (on any replica), which ``caller`` must be the target of."""
        running = await self.core.executions.find_running(execution_id)
        if running is None:
            raise self._not_running(execution_id)
        if running.record.target_id != caller:
            raise PermissionDenied(
                "this execution is another agent's A2A call; ask for a token of the dispatch you are answering.",
                metadata={"execution_id": execution_id},
            )
        return running

    async def _lookup(self, caller: str, token: str) -> tuple[Running, float]:
        found = await self.core.call_tokens.lookup(token)
        if found is None:
            raise Unauthenticated(
                "unknown call token, or its call has already ended; use the call_token of the A2A dispatch "
                "you are answering, and only while you answer it.",
                metadata={"field": "call_token"},
            )
        running, expires_at = found
        if running.record.target_id != caller:
            raise PermissionDenied(
                "this call token was issued to another agent; use the token of your own A2A dispatch.",
                metadata={"field": "call_token"},
            )
        return running, expires_at

    async def _verify_token(self, caller: str, token: str) -> Running:
        running, expires_at = await self._lookup(caller, token)
        if self.core.clock() >= expires_at:
            raise TokenExpired(
                "your call token has expired; exchange it with RefreshCallToken and retry "
                "(the Python SDK does this for you).",
                metadata={"execution_id": running.record.execution_id},
            )
        return running

    async def refresh(self, caller: str, token: str, execution_id: str = "") -> tuple[str, float]:
        """A fresh call token: for the running execution ``execution_id`` the caller is the
        target of, or in exchange for ``token`` (still valid or expired within the grace period)."""
        if bool(token) == bool(execution_id):
            raise InvalidArgument(
                "set exactly one of execution_id (the A2A dispatch you are answering) and call_token "
                "(a token to exchange).",
                metadata={"field": "execution_id" if execution_id else "call_token"},
            )
        if execution_id:
            return await self._issue(await self._answering(caller, execution_id))
        running, expires_at = await self._lookup(caller, token)
        if self.core.clock() >= expires_at + self.core.options.a2a_token_grace:
            raise TokenExpired(
                f"this call token expired more than {self.core.options.a2a_token_grace:g}s ago and can no longer be "
                "refreshed.",
                metadata={"execution_id": running.record.execution_id},
            )
        return await self._issue(running)
