"""Agent-to-agent (A2A) calls: visibility, discovery, invocation, call tokens, executions.

An invocation is a consulting channel from the caller to the target whose question
carries an :class:`A2ADispatch` (``event_data["a2a"]``); the target's EV_TEXT reply
(optionally with an :class:`A2AReply`) ends it. Every invocation is recorded as an
:class:`Execution` linked to the execution the caller was running in (through the call
token it presents) and to a shared root session. A call to an outside A2A agent (a
``remote_agent`` identity, or a URL) is made by the hub instead (:mod:`hubsvc.core.remote_a2a`):
the same execution record, without a channel.

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
from dataclasses import dataclass
from fnmatch import fnmatchcase

from agentnet.v1 import a2a_pb2, hub_pb2, identity_pb2
from google.protobuf.json_format import MessageToDict

from hubsvc.core.call_tokens import ExecutionEnded
from hubsvc.core.executions import Running
from hubsvc.core.hub import HubCore
from hubsvc.core.operations.messages import MessageOps
from hubsvc.core.registry import AgentEntry
from hubsvc.core.remote_a2a import Outcome, RemoteA2A, RemoteCard, card_base, is_url, name_from_card
from hubsvc.core.util import check_seconds, new_id, to_timestamp
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
    TokenExpired,
    Unauthenticated,
)
from netkernel.wire import INVOCATION_STATUS, envelope_from_wire

RESERVED_HEADER_PREFIX = "a2a-"
CANCEL_REASON = "a2a_canceled"
"""The close reason of a consulting channel whose caller cancelled the call (the call ends CANCELED)."""
DEFAULT_DISCOVER_LIMIT = 50
CANCELED_TEXT = "the caller cancelled the call"
_CONTINUATION_SCAN = 1000
"""Executions of a root session looked through for a remote task to continue."""


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


class A2AOps:
    """DiscoverAgents, InvokeAgent, executions, call tokens and outside agents (SetA2ASettings is in agents.py)."""

    def __init__(self, core: HubCore, messages: MessageOps) -> None:
        self.core = core
        self.messages = messages
        self.remote = RemoteA2A(core.options)
        """Outbound calls to outside A2A agents (off unless --a2a-outbound-allow names destinations)."""
        self._remote_cancels: dict[str, asyncio.Event] = {}
        """Set to cancel a call to an outside agent running on this replica (CancelExecution)."""

    # -- outside A2A agents ---------------------------------------------------------------

    async def register_remote(
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

    async def refresh_remote(self, caller: str) -> identity_pb2.AgentRecord:
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
                status, result, error = await self._call_remote(started)
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
        self._remote_cancels.pop(record.execution_id, None)
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
            await self._verify_token(caller, request.call_token) if request.call_token and continued is None else None
        )
        target_id, target_name, endpoint = await self._resolve(
            caller, continued.target_id if continued else request.agent_id, request.skill
        )
        if endpoint is not None:
            self.remote.policy.check(endpoint.url, "the agent's interface")  # refused before anything is recorded
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
                started.remote_task = await self._remote_task(
                    record, continued, joined=parent is not None or bool(request.root_session_id)
                )
                charged: list[str] = []
                self.core.intake.count(caller, question, charged)  # last check: a refused call spends no rate token
                self._remote_cancels[record.execution_id] = asyncio.Event()
                recorded.append(log.submit(record))  # running, before anything is sent
                try:
                    await recorded[0]
                except Exception as err:  # the call was not recorded, so it never started
                    self.core.intake.uncount(charged, err)
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
        if request.agent_id and not self._names(request.agent_id, row.target_id):
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

    def _names(self, ref: str, target_id: str) -> bool:
        """Whether the agent reference ``ref`` (an id, a name, or an outside agent's URL) names ``target_id``."""
        if ref == target_id:
            return True
        if is_url(ref):
            return is_url(target_id) and ref.rstrip("/") in (target_id, card_base(target_id))
        return self.core.registry.resolve(ref).agent_id == target_id

    def _is_remote(self, target_id: str) -> bool:
        """Whether an execution's target is an outside A2A agent (an ad-hoc URL or a remote_agent identity)."""
        if is_url(target_id):
            return True
        record = self.core.registry.record_of(target_id)
        return record is not None and record.HasField("remote_a2a")

    async def _call_remote(self, started: _Started) -> tuple[a2a_pb2.InvocationStatus.ValueType, str, str]:
        """A call to an outside A2A agent, made by the hub; CancelExecution on this replica ends it CANCELED
        (the outside agent's task itself is not cancelled)."""
        record, request, endpoint = started.record, started.request, started.endpoint
        assert request is not None and endpoint is not None
        task_id, context_id = started.remote_task
        canceled = self._remote_cancels.setdefault(record.execution_id, asyncio.Event())
        sending = asyncio.ensure_future(
            self.remote.send(
                endpoint,
                request.message,
                skill=request.skill,
                headers=request.custom_headers,
                timeout=started.timeout,
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

    async def _remote_task(
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

    async def _resolve(self, caller: str, ref: str, skill: str) -> tuple[str, str, a2a_pb2.RemoteA2AAgent | None]:
        """The target's id, name and, for an outside agent, where it lives. A URL names the registered
        remote_agent identity with that card or interface URL (its visibility rules apply), else an
        ad-hoc call to the card there (the operator's --a2a-outbound-allow is the only gate)."""
        if not is_url(ref):
            target = self._target(caller, ref, skill)
            remote = target.record.remote_a2a if target.record.HasField("remote_a2a") else None
            return target.agent_id, target.name, remote
        for entry in self.core.registry.entries():
            remote = entry.record.remote_a2a
            if entry.record.HasField("remote_a2a") and ref.rstrip("/") in (
                remote.card_url,
                remote.url.rstrip("/"),
                card_base(remote.card_url),
            ):
                target = self._target(caller, entry.agent_id, skill)
                return target.agent_id, target.name, remote
        fetched = await self.remote.fetch_card(ref)
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
        """Cancel a running execution ``caller`` made; it ends CANCELED. A hub agent's call: close its
        channel. An outside agent's call: stop waiting for its answer (the remote task is not cancelled)."""
        record = await self.get_execution(caller, execution_id)
        if record.caller_id != caller:
            raise PermissionDenied(
                "only the caller of an execution may cancel it.", metadata={"execution_id": execution_id}
            )
        remote = self._is_remote(record.target_id)
        if record.status != a2a_pb2.INVOCATION_STATUS_RUNNING or not (record.channel_id or remote):
            raise FailedPrecondition(
                f"execution {execution_id!r} is not running (it is "
                f"{INVOCATION_STATUS.name_of(record.status, 'running')}); only a running call can be cancelled.",
                metadata={"execution_id": execution_id},
            )
        running = self.core.executions.running.get(execution_id)
        if remote:
            await self._cancel_remote(record, running)
            return await self.get_execution(caller, execution_id)
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

    async def _cancel_remote(self, record: a2a_pb2.Execution, running: Running | None) -> None:
        """End a call to an outside agent CANCELED: the replica that runs it stops waiting; from
        another replica, the record is written CANCELED (which the running replica then keeps)."""
        canceled = self._remote_cancels.get(record.execution_id)
        if canceled is not None and running is not None:
            canceled.set()
            await running.ended.wait()
            return
        self.core.executions.end(record, a2a_pb2.INVOCATION_STATUS_CANCELED, CANCELED_TEXT)
        await self.core.executions.save(record)

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
