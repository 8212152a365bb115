"""GetStatus.retention: what the hub keeps of ended channels and how big its store is."""

from __future__ import annotations

import asyncio

from agentnet.v1 import operator_pb2

from hubsvc.core.options import HubOptions
from hubsvc.core.retention import SweepStats
from hubsvc.core.util import to_timestamp
from hubsvc.governance.policy import Policy
from hubsvc.storage import HubStore
from hubsvc.storage.history import HistoryStore

COUNT_TIMEOUT = 2.0
"""Seconds GetStatus waits for the store's counts of ended and purged channels (-1 / 0 when it does not answer)."""


async def retention_status(
    store: HubStore, options: HubOptions, stats: SweepStats, policy: Policy | None = None
) -> operator_pb2.RetentionStatus:
    """The retention settings (``--retain-ended``, the policy's per type, ``--retain-audit``), the last
    sweep, and the store's counts and size (when it keeps them)."""
    purges = isinstance(store, HistoryStore) and store.purges
    status = operator_pb2.RetentionStatus(
        retain_ended_seconds=options.retain_ended if purges else 0.0,
        archive_dir=options.archive_dir,
        last_sweep_purged=stats.last_sweep_purged,
        store_size_bytes=-1,
        retain_audit_seconds=options.retain_audit if isinstance(store, HistoryStore) else 0.0,
        last_sweep_audit_purged=stats.last_sweep_audit_purged,
    )
    if purges and policy is not None:
        for channel_type, spec in policy.retention.items():
            if spec.ended is not None:
                status.retain_ended_by_type[channel_type] = spec.ended
    if stats.last_sweep_at:
        status.last_sweep_at.CopyFrom(to_timestamp(stats.last_sweep_at))
    if isinstance(store, HistoryStore):
        try:
            async with asyncio.timeout(COUNT_TIMEOUT):
                counts = await store.history_counts()
        except Exception:  # GetStatus reports the store's health itself (store_healthy)
            return status
        status.ended_channels_kept = counts.ended_kept
        status.channels_purged = counts.purged
        status.store_size_bytes = counts.size_bytes
    return status
