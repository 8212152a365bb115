"""The operator's reads (OperatorService): status, identities, channels, WALs, tasks, A2A call
trees and the audit log, whatever their audience. Nothing here changes the hub.

On a shared store every answer comes from the store or from what the change feed keeps equal on
every replica; only :attr:`Status.connected_streams` is this replica's own.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterable
from importlib import metadata

from agentnet.v1 import a2a_pb2, channel_pb2, envelope_pb2, hub_pb2, identity_pb2, operator_pb2, task_pb2

from hubsvc.adapters import ADAPTERS
from hubsvc.core.channel import TERMINAL
from hubsvc.core.hub import HubCore
from hubsvc.core.operations.agents import summary
from hubsvc.core.operations.audit import MAX_AUDIT_ID, audit_record
from hubsvc.core.operations.channels import ChannelOps
from hubsvc.core.operations.pages import keyed_page, ordered_page, task_order
from hubsvc.core.operations.retention import retention_status
from hubsvc.core.util import to_timestamp
from hubsvc.storage.base import ChannelRow
from netkernel.call_tree import execution_subtree
from netkernel.errors import AgentNetError, InvalidArgument, NotFound
from netkernel.wire import dumps_json

DEFAULT_PAGE = 100
"""Items in a page when the request asks for 0."""
AUDIT_PAGE = 500
"""Audit records a FollowAudit stream reads from the store at a time."""
STORE_PROBE_TIMEOUT = 2.0
"""Seconds GetStatus waits for the store's answer to its probe read (GetStatus.store_healthy)."""
_PROBE_CHANNEL = "agentnet-status-probe"
"""The channel id GetStatus reads the last seq of: no channel has it (ids are random hex)."""
_LIVE_STATES = frozenset({channel_pb2.CHANNEL_STATE_PENDING, channel_pb2.CHANNEL_STATE_OPENED})
_STATES = frozenset(channel_pb2.ChannelState.values()) - {channel_pb2.CHANNEL_STATE_UNSPECIFIED}


def _version() -> str:
    try:
        return metadata.version("agent-network")
    except metadata.PackageNotFoundError:
        return "unknown"


class OperatorOps:
    """What OperatorService runs; ``channels`` is the shared WAL streaming of ReadWal."""

    def __init__(self, core: HubCore, channels: ChannelOps) -> None:
        self.core = core
        self.channels = channels

    def page_size(self, requested: int, field: str = "page_size") -> int:
        """``requested`` (0 = the default) checked against ``--max-operator-page-size``."""
        limit = self.core.options.max_operator_page
        if requested < 0 or requested > limit:
            raise InvalidArgument(
                f"{field} {requested} is out of range: ask for 1 to {limit} items (0 = {min(DEFAULT_PAGE, limit)}; "
                "the hub's --max-operator-page-size) and page with next_page_token.",
                metadata={"field": field, "value": str(requested), "limit": str(limit)},
            )
        return requested or min(DEFAULT_PAGE, limit)

    # -- status -------------------------------------------------------------------------

    async def status(self) -> operator_pb2.GetStatusResponse:
        """Version, store (and whether it answers), this replica, uptime and counts."""
        core = self.core
        healthy, probe_seconds, store_error = await self._probe_store()
        pending_total, pending_max = core.inboxes.totals()
        kind, address = core.store.location()
        entries = list(core.registry.entries())
        by_state: dict[channel_pb2.ChannelState.ValueType, int] = {}
        for ch in core.channels.live():
            by_state[ch.meta.state] = by_state.get(ch.meta.state, 0) + 1
        now = core.clock()
        feed = core.store.feed
        return operator_pb2.GetStatusResponse(
            version=_version(),
            store_kind=kind,
            store_address=address,
            replica_id=feed.replica_id if feed is not None else "",
            started_at=to_timestamp(core.started_at),
            uptime_seconds=max(0.0, now - core.started_at),
            identities=len(entries),
            online=sum(1 for e in entries if e.record.online),
            live_channels=[
                operator_pb2.ChannelStateCount(state=state, count=count) for state, count in sorted(by_state.items())
            ],
            running_tasks=len(core.tasks.live()),
            connected_streams=core.sessions.connected(),
            store_healthy=healthy,
            store_probe_seconds=probe_seconds,
            store_error=store_error,
            pending_inbox_total=pending_total,
            max_pending_inbox=pending_max,
            channel_types=sorted(ADAPTERS),
            retention=await retention_status(core.store, core.options, core.retention.stats, core.governance.policy),
            partitions=partition_status(core),
        )

    async def _probe_store(self) -> tuple[bool, float, str]:
        """(whether the store answered a cheap read within :data:`STORE_PROBE_TIMEOUT`, seconds it took,
        why not). The read is the last seq of a channel id no channel has."""
        started = time.monotonic()
        try:
            async with asyncio.timeout(STORE_PROBE_TIMEOUT):
                await self.core.store.channel_seq(_PROBE_CHANNEL)
        except TimeoutError:
            return False, time.monotonic() - started, f"no answer within {STORE_PROBE_TIMEOUT:g}s"
        except Exception as exc:  # any failure of the store is what this reports
            message = exc.message if isinstance(exc, AgentNetError) else str(exc) or type(exc).__name__
            return False, time.monotonic() - started, message
        return True, time.monotonic() - started, ""

    # -- identities ---------------------------------------------------------------------

    def list_agents(
        self, *, online_only: bool, page_size: int, page_token: str, agent_ids: Iterable[str] = ()
    ) -> tuple[list[identity_pb2.AgentSummary], str]:
        """Every identity by name (hidden ones too), or only those of ``agent_ids``, one page; returns
        (agents, next page token)."""
        registry = self.core.registry
        wanted = set(agent_ids)
        known = (registry.get(a) for a in wanted if a in registry) if wanted else registry.entries()
        entries = (e for e in known if not online_only or e.record.online)
        page, token = keyed_page("agents", entries, lambda e: (e.name,), self.page_size(page_size), page_token)
        return [summary(e) for e in page], token

    async def describe_agent(self, ref: str) -> identity_pb2.AgentRecord:
        """One identity's record by id or name (NotFound otherwise)."""
        if not ref:
            raise InvalidArgument("name the agent by agent id or passport name.", metadata={"field": "agent"})
        return (await self.core.registry.find(ref)).record

    # -- channels -----------------------------------------------------------------------

    async def list_channels(
        self, *, states: Iterable[int], type: str, page_size: int, page_token: str
    ) -> tuple[list[channel_pb2.ChannelMetadata], str]:
        """Every channel newest first, filtered by state and type, one page."""
        size = self.page_size(page_size)
        wanted = set(states)
        if wanted - _STATES:
            raise InvalidArgument(
                "states must name channel states (PENDING, OPENED, CLOSED, EXPIRED).", metadata={"field": "states"}
            )
        live_only = bool(wanted) and wanted <= _LIVE_STATES

        def pick(row: ChannelRow) -> channel_pb2.ChannelMetadata | None:
            meta = self.channels.current_meta(row)
            return None if (wanted and meta.state not in wanted) or (type and meta.type != type) else meta

        async def fetch(before: int, limit: int) -> list[tuple[int, ChannelRow]]:
            return await self.core.store.list_channels(live_only=live_only, before=before, limit=limit)

        return await ordered_page("channels", fetch, pick, size, page_token)

    def channel_turns(self, channels: Iterable[channel_pb2.ChannelMetadata]) -> dict[str, operator_pb2.ChannelTurn]:
        """Whose turn it is in each of ``channels`` that is live here and expects someone (what
        :meth:`describe_channel` says of it), so a page of channels needs no describe per row."""
        turns: dict[str, operator_pb2.ChannelTurn] = {}
        for meta in channels:
            ch = self.core.live_channel(meta.channel_id)
            expected = ch.expected_next() if ch is not None else []
            if expected:
                turns[meta.channel_id] = operator_pb2.ChannelTurn(expected_next=expected)
        return turns

    async def describe_channel(self, channel_id: str) -> operator_pb2.OperatorServiceDescribeChannelResponse:
        """Metadata, whose turn it is and the adapter's state (NotFound for an unknown channel)."""
        if not channel_id:
            raise InvalidArgument("name the channel: channel_id is empty.", metadata={"field": "channel_id"})
        meta = await self.core.channel_meta(channel_id)
        response = operator_pb2.OperatorServiceDescribeChannelResponse(channel=meta)
        ch = self.core.live_channel(channel_id)
        if ch is None and meta.state not in TERMINAL:
            self.core.placement.require(channel_id)  # live, held by another replica: it answers
        if ch is not None:
            response.live = True
            response.expected_next.extend(ch.expected_next())
            response.adapter_state_json = dumps_json(ch.adapter.state_json(ch.state))
        else:  # ended: its final adapter state, kept for analysis
            final = await self.core.final_state(channel_id)
            if final is not None:
                response.adapter_state_json = dumps_json(final)
        return response

    def stream_wal(
        self, channel_id: str, from_seq: int, until_seq: int, limit: int, *, follow: bool
    ) -> AsyncIterator[envelope_pb2.Envelope]:
        """Any channel's whole WAL (the agent ReadWal's stream and bounded follower, unfiltered)."""
        if not channel_id:
            raise InvalidArgument("name the channel: channel_id is empty.", metadata={"field": "channel_id"})
        return self.channels.stream_wal(None, channel_id, from_seq, until_seq, limit, follow=follow)

    # -- tasks --------------------------------------------------------------------------

    async def list_tasks(
        self, *, include_ended: bool, page_size: int, page_token: str
    ) -> tuple[list[task_pb2.TaskMetadata], str]:
        """Every task newest first (running ones only unless ``include_ended``), one page."""
        rows = await self.core.store.load_tasks(live_only=not include_ended)
        tasks = [task_pb2.TaskMetadata.FromString(r.record) for r in rows]
        return keyed_page("tasks", tasks, task_order, self.page_size(page_size), page_token, descending=True)

    async def get_task(self, task_id: str) -> task_pb2.TaskMetadata:
        """One task (NotFound otherwise)."""
        if not task_id:
            raise InvalidArgument("name the task: task_id is empty.", metadata={"field": "task_id"})
        row = await self.core.store.get_task(task_id)
        if row is None:
            raise NotFound(f"no task with id {task_id!r}; list them with ListTasks.", metadata={"task_id": task_id})
        return task_pb2.TaskMetadata.FromString(row.record)

    # -- A2A ----------------------------------------------------------------------------

    async def list_executions(
        self, *, root_session_id: str, execution_id: str, limit: int
    ) -> tuple[list[a2a_pb2.Execution], bool]:
        """A root session's executions, or one execution's subtree, in start order (at most ``limit``);
        returns (executions, truncated)."""
        size = self.page_size(limit, "limit")
        if bool(root_session_id) == bool(execution_id):
            raise InvalidArgument("name exactly one tree: root_session_id or execution_id.")
        root = root_session_id
        if execution_id:
            row = await self.core.store.get_execution(execution_id)
            if row is None:
                raise NotFound(
                    f"no A2A execution with id {execution_id!r}; list a root session's with root_session_id.",
                    metadata={"execution_id": execution_id},
                )
            root = row.root_session_id
        bound = -1 if execution_id else size + 1
        rows = await self.core.store.list_executions(root_session_id=root, member_id="", limit=bound)
        executions = [a2a_pb2.Execution.FromString(r) for r in rows]
        if execution_id:
            executions = execution_subtree(executions, execution_id)
        return executions[:size], len(executions) > size

    # -- audit --------------------------------------------------------------------------

    async def follow_audit(self, kind: str, subject_id: str, after_id: int) -> AsyncIterator[hub_pb2.AuditRecord]:
        """The audit records after ``after_id``, then each new one as it is written (until cancelled): at
        once for this hub's records (the store's audit bell), within ``--audit-poll-interval`` for those
        other replicas on a shared store commit."""
        bell = self.core.store.audit_bell
        while after_id < MAX_AUDIT_ID:
            rung = bell.round()  # before the read: a commit after it wakes the wait below
            rows = await self.core.store.list_audit(
                kind=kind, subject_id=subject_id, after_id=after_id, limit=AUDIT_PAGE
            )
            for row in rows:
                yield audit_record(row)
                after_id = row.audit_id
            if len(rows) < AUDIT_PAGE:  # woken by this hub's next audit commit; polls for other replicas'
                await bell.wait(rung, self.core.options.audit_poll_interval)
        await asyncio.Event().wait()  # nothing can come after the largest id: wait for the client to go


def partition_status(core: HubCore) -> operator_pb2.PartitionStatus | None:
    """How the replicas divide the channels, as this replica last read it (None: they do not)."""
    placement = core.placement
    ownership = placement.ownership
    if ownership is None:
        return None
    return operator_pb2.PartitionStatus(
        count=ownership.count,
        held=sorted(ownership.held),
        owners=[
            operator_pb2.PartitionOwner(partition=p, replica_id=owner, address=address)
            for p, owner, address in placement.owners()
        ],
        followed_channels=len(core.channels.followers.channels),
    )
