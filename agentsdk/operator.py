"""OperatorClient: the hub's operator reads (``agentnet.v1.OperatorService``), one typed method each.

What the ``agentnet`` command line and an operator console are built on. Every call carries a
bearer secret: the hub's operator token (``<data-dir>/hub-operator.token``). :class:`AgentView`
makes the same reads with an agent's credential through ``HubService``, answered as the hub
answers that agent (what the command line shows with ``--credential-file``). Failures raise the hub's domain
exception (:mod:`netkernel.errors`):
``Unauthenticated`` without a valid secret, ``PermissionDenied`` for an agent credential on an
operator call, ``NotFound``, ``Unavailable`` for an unreachable hub.

``target`` is one ``host:port`` or several replicas (:mod:`agentsdk.targets`); ``tls`` as in
:mod:`agentsdk.tls`. Both make every call through the typed layer (:class:`agentsdk.rpc.OperatorRpc`,
:class:`agentsdk.rpc.HubRpc`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from agentnet.v1 import (
    a2a_pb2,
    channel_pb2,
    envelope_pb2,
    hub_pb2,
    identity_pb2,
    operator_pb2,
    task_pb2,
)

from agentsdk.rpc import HubRpc, OperatorRpc
from agentsdk.targets import HubTargets
from agentsdk.tls import TlsSetting
from agentsdk.transport import ClosedOnExit, HubConnection
from netkernel.call_tree import execution_subtree
from netkernel.errors import NotFound

NAMES_AT_ONCE = 1000
"""Agent ids :meth:`OperatorClient.names` looks up in one call (the hub's default largest page)."""
AUDIT_WINDOW = 10_000
"""Audit ids :meth:`OperatorClient.latest_audit` reads at a time (ListAudit's largest limit: a window is
always read whole)."""

__all__ = [
    "AgentView",
    "OperatorClient",
    "OperatorOnly",
    "execution_children",
    "execution_subtree",
    "write_backup",
]


T = TypeVar("T")


async def every_page(read: Callable[[str], Awaitable[tuple[Sequence[T], str]]], limit: int = 0) -> list[T]:
    """The items of a paged list, page after page: ``read(page_token)`` gives a page's items and the
    next page's token ("" = none), first with ""; stops once ``limit`` items came (0 = all)."""
    out: list[T] = []
    token = ""
    while True:
        items, token = await read(token)
        out.extend(items)
        if not token or (limit and len(out) >= limit):
            return out[:limit] if limit else out


class OperatorClient(ClosedOnExit):
    """The operator's view of one hub (or of its replicas), authenticated with ``secret``.

    ``timeout`` bounds each unary call (streams have none). Use ``async with`` or :meth:`close`."""

    def __init__(
        self, target: HubTargets, secret: str, *, tls: TlsSetting = None, timeout: float | None = 30.0
    ) -> None:
        self._connection = HubConnection(target, tls)
        self.target = self._connection.target
        """The gRPC target."""
        self._operator = OperatorRpc(self._connection, secret)
        self._hub = HubRpc(self._connection, secret)
        """HubService's operator calls (SetRule, GetRule, ListAudit) with the same token."""
        self._timeout = timeout

    async def close(self) -> None:
        """Close the connection (every stream on it ends)."""
        await self._connection.close()

    # -- unary reads --------------------------------------------------------------------

    async def status(self) -> operator_pb2.GetStatusResponse:
        """Version, store, uptime and counts."""
        return await self._operator.get_status(operator_pb2.GetStatusRequest(), timeout=self._timeout)

    async def list_agents(
        self, *, online_only: bool = False, page_size: int = 0, page_token: str = "", agent_ids: Iterable[str] = ()
    ) -> operator_pb2.OperatorServiceListAgentsResponse:
        """One page of every identity (or only those of ``agent_ids``), by name."""
        request = operator_pb2.OperatorServiceListAgentsRequest(
            online_only=online_only, page_size=page_size, page_token=page_token, agent_ids=list(agent_ids)
        )
        return await self._operator.list_agents(request, timeout=self._timeout)

    async def agents(self, *, online_only: bool = False, limit: int = 0) -> list[identity_pb2.AgentSummary]:
        """Every identity (at most ``limit``; 0 = all), page after page."""

        async def read(token: str) -> tuple[Sequence[identity_pb2.AgentSummary], str]:
            page = await self.list_agents(online_only=online_only, page_token=token)
            return page.agents, page.next_page_token

        return await every_page(read, limit)

    async def names(self, agent_ids: Iterable[str]) -> dict[str, str]:
        """agent id → name of those of ``agent_ids`` the hub knows: batched ListAgents lookups (of
        at most :data:`NAMES_AT_ONCE` distinct ids, paged at the hub's page size), not a call per id."""
        ids = sorted({a for a in agent_ids if a})
        out: dict[str, str] = {}
        for i in range(0, len(ids), NAMES_AT_ONCE):
            chunk = ids[i : i + NAMES_AT_ONCE]

            async def read(token: str, chunk: list[str] = chunk) -> tuple[Sequence[identity_pb2.AgentSummary], str]:
                page = await self.list_agents(agent_ids=chunk, page_token=token)  # the hub's page size
                return page.agents, page.next_page_token

            out.update((a.agent_id, a.name) for a in await every_page(read))
        return out

    async def describe_agent(self, agent: str) -> identity_pb2.AgentRecord:
        """One identity's record, by id or passport name."""
        response = await self._operator.describe_agent(
            operator_pb2.OperatorServiceDescribeAgentRequest(agent=agent), timeout=self._timeout
        )
        return response.agent

    async def list_channels(
        self,
        *,
        states: Iterable[channel_pb2.ChannelState.ValueType] = (),
        type: str = "",
        page_size: int = 0,
        page_token: str = "",
    ) -> operator_pb2.OperatorServiceListChannelsResponse:
        """One page of every channel, newest first."""
        request = operator_pb2.OperatorServiceListChannelsRequest(
            states=list(states), type=type, page_size=page_size, page_token=page_token
        )
        return await self._operator.list_channels(request, timeout=self._timeout)

    async def channels(
        self, *, states: Iterable[channel_pb2.ChannelState.ValueType] = (), type: str = "", limit: int = 0
    ) -> list[channel_pb2.ChannelMetadata]:
        """Every channel newest first (at most ``limit``; 0 = all), page after page."""
        return (await self.channels_and_turns(states=states, type=type, limit=limit))[0]

    async def channels_and_turns(
        self, *, states: Iterable[channel_pb2.ChannelState.ValueType] = (), type: str = "", limit: int = 0
    ) -> tuple[list[channel_pb2.ChannelMetadata], dict[str, list[str]]]:
        """:meth:`channels`, and whose turn it is in each live one (channel id → the agent ids expected to
        speak next; no entry: anyone, or an ended channel), from the same pages."""
        wanted = list(states)
        turns: dict[str, list[str]] = {}

        async def read(token: str) -> tuple[Sequence[channel_pb2.ChannelMetadata], str]:
            page = await self.list_channels(states=wanted, type=type, page_token=token)
            turns.update((cid, list(turn.expected_next)) for cid, turn in page.turns.items())
            return page.channels, page.next_page_token

        found = await every_page(read, limit)
        return found, {c.channel_id: turns[c.channel_id] for c in found if turns.get(c.channel_id)}

    async def describe_channel(self, channel_id: str) -> operator_pb2.OperatorServiceDescribeChannelResponse:
        """One channel: metadata, whose turn it is, adapter state."""
        return await self._operator.describe_channel(
            operator_pb2.OperatorServiceDescribeChannelRequest(channel_id=channel_id), timeout=self._timeout
        )

    async def list_tasks(
        self, *, include_ended: bool = False, page_size: int = 0, page_token: str = ""
    ) -> operator_pb2.OperatorServiceListTasksResponse:
        """One page of every task, newest first."""
        request = operator_pb2.OperatorServiceListTasksRequest(
            include_ended=include_ended, page_size=page_size, page_token=page_token
        )
        return await self._operator.list_tasks(request, timeout=self._timeout)

    async def tasks(self, *, include_ended: bool = False, limit: int = 0) -> list[task_pb2.TaskMetadata]:
        """Every task newest first (at most ``limit``; 0 = all), page after page."""

        async def read(token: str) -> tuple[Sequence[task_pb2.TaskMetadata], str]:
            page = await self.list_tasks(include_ended=include_ended, page_token=token)
            return page.tasks, page.next_page_token

        return await every_page(read, limit)

    async def get_task(self, task_id: str) -> task_pb2.TaskMetadata:
        """One task."""
        response = await self._operator.get_task(
            operator_pb2.OperatorServiceGetTaskRequest(task_id=task_id), timeout=self._timeout
        )
        return response.task

    async def list_executions(
        self, *, root_session_id: str = "", execution_id: str = "", limit: int = 0
    ) -> operator_pb2.OperatorServiceListExecutionsResponse:
        """A root session's A2A call tree, or one execution's subtree, in start order."""
        request = operator_pb2.OperatorServiceListExecutionsRequest(limit=limit)
        if root_session_id:
            request.root_session_id = root_session_id
        if execution_id:
            request.execution_id = execution_id
        return await self._operator.list_executions(request, timeout=self._timeout)

    async def set_rule(self, agent_id: str, rule: dict[str, Any] | None) -> identity_pb2.AgentRecord:
        """Replace identity ``agent_id``'s own governance rule (HubService.SetRule; None removes it):
        validated, audited as ``rule_set`` by "operator", enforced from that identity's next call."""
        request = hub_pb2.SetRuleRequest(agent_id=agent_id, rule_json=json.dumps(rule) if rule is not None else "")
        response = await self._hub.set_rule(request, timeout=self._timeout)
        return response.agent

    async def get_rule(self, agent_id: str) -> hub_pb2.GetRuleResponse:
        """The rules governing identity ``agent_id`` and what they combine to (HubService.GetRule)."""
        request = hub_pb2.GetRuleRequest(agent_id=agent_id)
        return await self._hub.get_rule(request, timeout=self._timeout)

    async def list_audit(
        self, *, kind: str = "", subject_id: str = "", after_id: int = 0, limit: int = 0
    ) -> list[hub_pb2.AuditRecord]:
        """Audit records after ``after_id`` in id order (HubService.ListAudit; 0 = 100)."""
        request = hub_pb2.ListAuditRequest(kind=kind, subject_id=subject_id, after_id=after_id, limit=limit)
        response = await self._hub.list_audit(request, timeout=self._timeout)
        return list(response.records)

    async def newest_audit_id(self, *, kind: str = "", subject_id: str = "") -> int:
        """The id of the newest audit record matching the filters (0 = none), in about 2·log2(id) reads
        (ListAudit reads forward from an id only)."""

        async def any_after(audit_id: int) -> bool:
            return bool(await self.list_audit(kind=kind, subject_id=subject_id, after_id=audit_id, limit=1))

        if not await any_after(0):
            return 0
        low, high = 0, 64
        while await any_after(high):  # a record above `high`: look twice as far
            low, high = high, high * 2
        while high - low > 1:  # a record above `low`, none above `high`
            middle = (low + high) // 2
            if await any_after(middle):
                low = middle
            else:
                high = middle
        return high

    async def latest_audit(
        self, *, kind: str = "", subject_id: str = "", limit: int = 100
    ) -> list[hub_pb2.AuditRecord]:
        """The newest ``limit`` audit records matching the filters, in id order: windows of ids read
        backwards from the newest until ``limit`` records are found or the log's start is reached."""
        newest = await self.newest_audit_id(kind=kind, subject_id=subject_id)
        found: list[hub_pb2.AuditRecord] = []
        end = newest
        while end > 0 and len(found) < limit:
            start = max(0, end - AUDIT_WINDOW)
            page = await self.list_audit(kind=kind, subject_id=subject_id, after_id=start, limit=AUDIT_WINDOW)
            found = [r for r in page if r.audit_id <= end] + found
            end = start
        return found[-limit:]

    # -- streams ------------------------------------------------------------------------

    async def read_wal(
        self,
        channel_id: str,
        *,
        from_seq: int = 0,
        until_seq: int = 0,
        limit: int = 0,
        follow: bool = False,
    ) -> AsyncIterator[envelope_pb2.Envelope]:
        """A channel's WAL from ``from_seq``; with ``follow``, then each new envelope until it ends."""
        request = operator_pb2.OperatorServiceReadWalRequest(
            channel_id=channel_id, from_seq=from_seq, until_seq=until_seq, limit=limit, follow=follow
        )
        async for response in self._operator.read_wal(request):
            yield response.envelope

    async def follow_audit(
        self, *, kind: str = "", subject_id: str = "", after_id: int = 0
    ) -> AsyncIterator[hub_pb2.AuditRecord]:
        """The audit log after ``after_id``, then each new record as it is written (until cancelled)."""
        request = operator_pb2.FollowAuditRequest(kind=kind, subject_id=subject_id, after_id=after_id)
        async for response in self._operator.follow_audit(request):
            yield response.record

    def backup(self) -> AsyncIterator[operator_pb2.BackupResponse]:
        """A consistent copy of the hub's store: its bytes in order, then the summary
        (:func:`write_backup` writes and checks it)."""
        return self._operator.backup(operator_pb2.BackupRequest())


async def write_backup(client: OperatorClient, out: Path) -> operator_pb2.BackupSummary:
    """Ask the hub for a backup (``OperatorService.Backup``) and write it to ``out`` (which must not exist):
    through ``out.part``, checked against the hub's size and SHA-256, synced, then renamed. Raises
    ``FileExistsError`` for an existing ``out`` and ``ValueError`` for a copy that does not match."""
    if await asyncio.to_thread(out.exists):
        raise FileExistsError(f"{out} exists: name a new file (a backup never overwrites one)")
    part = out.with_name(out.name + ".part")
    digest = hashlib.sha256()
    size = 0
    summary: operator_pb2.BackupSummary | None = None
    f = await asyncio.to_thread(part.open, "xb")  # FileExistsError while another backup writes there
    try:
        with f:
            async for response in client.backup():
                if response.HasField("summary"):
                    summary = response.summary
                    break
                await asyncio.to_thread(f.write, response.data)
                digest.update(response.data)
                size += len(response.data)
            f.flush()
            await asyncio.to_thread(os.fsync, f.fileno())
        if summary is None:
            raise ValueError("the hub's backup stream ended without its summary: the copy is incomplete")
        if summary.size_bytes != size or summary.sha256 != digest.hexdigest():
            raise ValueError(
                f"the copy received ({size} bytes) does not match the hub's ({summary.size_bytes} bytes, "
                f"sha256 {summary.sha256})"
            )
        os.replace(part, out)
    finally:
        part.unlink(missing_ok=True)
    return summary


def execution_children(executions: Iterable[a2a_pb2.Execution]) -> dict[str, list[a2a_pb2.Execution]]:
    """The executions by their parent execution id ("" = called from outside any A2A call), in start order."""
    items = list(executions)
    children: dict[str, list[a2a_pb2.Execution]] = {}
    ids = {e.execution_id for e in items}
    for e in items:
        parent = e.parent_execution_id if e.parent_execution_id in ids else ""
        children.setdefault(parent, []).append(e)
    return children


_LIVE_STATES = (channel_pb2.CHANNEL_STATE_PENDING, channel_pb2.CHANNEL_STATE_OPENED)
AGENT_PAGE_SIZE = 1000
"""Items per page an agent's list asks the hub for (ListAgents' largest page)."""
AGENT_LIST_LIMIT = 1000
"""Most executions an agent's call tree asks the hub for (ListExecutions has no pages)."""


_AUDIT_IS_OPERATORS = (
    "the audit log records every identity's actions, so only the operator token reads it: use --token-file "
    "(the hub's hub-operator.token) instead of an agent credential."
)


class OperatorOnly(Exception):
    """A read only the operator token may make; the message says why and what to use instead."""


class AgentView(ClosedOnExit):
    """What one agent may read of the network through ``HubService`` with its own credential: the
    same reads as :class:`OperatorClient`, answered as the hub answers that agent (identities it may
    see, its channels, tasks it owns or shares a channel with, call trees it took part in).

    Reads only the operator may make (the status counts, the audit log) raise :class:`OperatorOnly`."""

    def __init__(
        self, target: HubTargets, credential: str, *, tls: TlsSetting = None, timeout: float | None = 30.0
    ) -> None:
        self._connection = HubConnection(target, tls)
        self._hub = HubRpc(self._connection, credential)
        self._timeout = timeout
        self.agent_id = credential.split(".", 1)[0]
        """The agent this credential belongs to (a credential is ``<agent id>.<secret>``)."""

    async def close(self) -> None:
        """Close the connection."""
        await self._connection.close()

    async def status(self) -> operator_pb2.GetStatusResponse:
        """Operator only: the hub's counts cover every identity."""
        raise OperatorOnly(
            "the hub's status (version, store, counts) is for the operator: use the operator token "
            "(--token-file); with an agent credential, `status` shows the services' health and who you are."
        )

    async def list_audit(
        self, *, kind: str = "", subject_id: str = "", after_id: int = 0, limit: int = 0
    ) -> list[hub_pb2.AuditRecord]:
        """Operator only: the audit log records every identity's actions."""
        raise OperatorOnly(_AUDIT_IS_OPERATORS)

    async def latest_audit(
        self, *, kind: str = "", subject_id: str = "", limit: int = 100
    ) -> list[hub_pb2.AuditRecord]:
        """Operator only (as :meth:`list_audit`)."""
        raise OperatorOnly(_AUDIT_IS_OPERATORS)

    async def follow_audit(
        self, *, kind: str = "", subject_id: str = "", after_id: int = 0
    ) -> AsyncIterator[hub_pb2.AuditRecord]:
        """Operator only (as :meth:`list_audit`)."""
        raise OperatorOnly(_AUDIT_IS_OPERATORS)
        yield  # pragma: no cover - makes this an async generator like OperatorClient.follow_audit

    async def me(self) -> identity_pb2.AgentRecord:
        """The credential's own identity (UNAUTHENTICATED when the hub does not know the credential)."""
        return await self.describe_agent(self.agent_id)

    async def agents(self, *, online_only: bool = False, limit: int = 0) -> list[identity_pb2.AgentSummary]:
        """The identities this agent may see, by name (at most ``limit``; 0 = all), page after page."""

        async def read(token: str) -> tuple[Sequence[identity_pb2.AgentSummary], str]:
            request = hub_pb2.ListAgentsRequest(limit=AGENT_PAGE_SIZE, page_token=token)
            page = await self._hub.list_agents(request, timeout=self._timeout)
            return [a for a in page.agents if a.online or not online_only], page.next_page_token

        return await every_page(read, limit)

    async def describe_agent(self, agent: str) -> identity_pb2.AgentRecord:
        """One identity's record, by id or passport name."""
        for request in (hub_pb2.DescribeAgentRequest(agent_id=agent), hub_pb2.DescribeAgentRequest(name=agent)):
            try:
                return (await self._hub.describe_agent(request, timeout=self._timeout)).agent
            except NotFound:
                continue
        raise NotFound(f"no agent with id or name {agent!r}.", metadata={"agent": agent})

    async def channels(
        self, *, states: Iterable[channel_pb2.ChannelState.ValueType] = (), type: str = "", limit: int = 0
    ) -> list[channel_pb2.ChannelMetadata]:
        """This agent's channels newest first, filtered by state and type (at most ``limit``; 0 = all),
        page after page."""
        wanted = set(states)

        async def read(token: str) -> tuple[Sequence[channel_pb2.ChannelMetadata], str]:
            request = hub_pb2.ListChannelsRequest(
                include_ended=not wanted or not wanted <= set(_LIVE_STATES),
                type=type,
                limit=AGENT_PAGE_SIZE,
                page_token=token,
            )
            page = await self._hub.list_channels(request, timeout=self._timeout)
            return [c for c in page.channels if not wanted or c.state in wanted], page.next_page_token

        return await every_page(read, limit)

    async def channels_and_turns(
        self, *, states: Iterable[channel_pb2.ChannelState.ValueType] = (), type: str = "", limit: int = 0
    ) -> tuple[list[channel_pb2.ChannelMetadata], dict[str, list[str]]]:
        """:meth:`channels`, and whose turn it is in each live one (one DescribeChannel per live channel:
        the agents' ListChannels does not say)."""
        found = await self.channels(states=states, type=type, limit=limit)
        gate = asyncio.Semaphore(16)  # at most this many DescribeChannel calls at once

        async def turn(channel_id: str) -> tuple[str, list[str]]:
            async with gate:
                try:
                    return channel_id, list((await self.describe_channel(channel_id)).expected_next)
                except NotFound:  # ended and forgotten between the two calls
                    return channel_id, []

        live = [c.channel_id for c in found if c.state in _LIVE_STATES]
        turns = dict(await asyncio.gather(*(turn(c) for c in live)))
        return found, {cid: ids for cid, ids in turns.items() if ids}

    async def describe_channel(self, channel_id: str) -> operator_pb2.OperatorServiceDescribeChannelResponse:
        """One of this agent's channels: metadata, whose turn it is, adapter state."""
        request = hub_pb2.DescribeChannelRequest(channel_id=channel_id)
        found = await self._hub.describe_channel(request, timeout=self._timeout)
        return operator_pb2.OperatorServiceDescribeChannelResponse(
            channel=found.channel,
            live=found.channel.state in _LIVE_STATES,
            expected_next=found.expected_next,
            adapter_state_json=found.adapter_state_json,
        )

    async def tasks(self, *, include_ended: bool = False, limit: int = 0) -> list[task_pb2.TaskMetadata]:
        """The tasks this agent may see (its own and those of its channels), newest first (at most
        ``limit``; 0 = all), page after page."""

        async def read(token: str) -> tuple[Sequence[task_pb2.TaskMetadata], str]:
            request = hub_pb2.ListTasksRequest(
                scope=hub_pb2.TASK_SCOPE_ALL, include_ended=include_ended, limit=AGENT_PAGE_SIZE, page_token=token
            )
            page = await self._hub.list_tasks(request, timeout=self._timeout)
            return page.tasks, page.next_page_token

        return await every_page(read, limit)

    async def get_task(self, task_id: str) -> task_pb2.TaskMetadata:
        """One task."""
        request = hub_pb2.GetTaskRequest(task_id=task_id)
        return (await self._hub.get_task(request, timeout=self._timeout)).task

    async def list_executions(
        self, *, root_session_id: str = "", execution_id: str = "", limit: int = 0
    ) -> operator_pb2.OperatorServiceListExecutionsResponse:
        """A root session's A2A call tree this agent took part in, or one execution's subtree among the
        calls it took part in (NotFound when it took part in no such execution)."""
        size = limit or 100
        request = hub_pb2.ListExecutionsRequest(root_session_id=root_session_id, limit=AGENT_LIST_LIMIT)
        found = list((await self._hub.list_executions(request, timeout=self._timeout)).executions)
        if execution_id:
            found = execution_subtree(found, execution_id)
            if not found:
                raise NotFound(
                    f"no A2A execution {execution_id!r} this agent took part in.",
                    metadata={"execution_id": execution_id},
                )
        return operator_pb2.OperatorServiceListExecutionsResponse(executions=found[:size], truncated=len(found) > size)

    async def read_wal(
        self, channel_id: str, *, from_seq: int = 0, until_seq: int = 0, limit: int = 0, follow: bool = False
    ) -> AsyncIterator[envelope_pb2.Envelope]:
        """One of this agent's channels' WAL, filtered to what is addressed to it; ``follow`` as
        :meth:`OperatorClient.read_wal`."""
        request = hub_pb2.ReadWalRequest(
            channel_id=channel_id, from_seq=from_seq, until_seq=until_seq, limit=limit, follow=follow
        )
        async for item in self._hub.read_wal(request):
            yield item.envelope
