"""Retention of ended channels: the background sweep that archives and purges them.

With ``--retain-ended DURATION`` the hub looks every ``--retention-sweep-interval`` seconds for
channels that ended longer ago than that and purges each one (:meth:`HistoryStore.purge_channel
<hubsvc.storage.history.HistoryStore.purge_channel>`): its WAL (with its idempotency keys and
reply index), cursors, membership and row go, a tombstone stays, and DescribeChannel / ReadWal of
it answer NOT_FOUND saying it was purged by retention (:func:`purged_refusal`). Live channels are
never touched: only a channel whose end is committed has an end time. With ``--archive-dir`` the
channel's archive (:mod:`netkernel.archive`) is written and synced first; a channel whose archive
cannot be written is kept, and the next sweep tries again.

How long a channel is kept is its type's: the policy file's ``retention.<type>.ended``
(docs/governance.md "Retention"), else ``--retain-ended``; the policy is read at each sweep, so a
reloaded file takes effect at the next one (:meth:`Retention.cutoffs`). With ``--retain-audit`` the
same sweep deletes audit records older than that, ``--retention-batch-rows`` at a time.

The sweep never stalls admission: it reads a bounded number of channels at a time
(:data:`SWEEP_CHANNELS`), and the store deletes each channel's WAL in transactions of at most
``--retention-batch-rows`` rows on a connection and a thread of its own. Tasks, task checkpoints,
A2A executions and credentials are not channel history and are kept; the audit log has its own
retention (docs/operations.md "Data over time").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from agentnet.v1 import channel_pb2

from hubsvc.core.options import HubOptions
from hubsvc.core.util import Clock
from hubsvc.governance.policy import CHANNEL_TYPES, Policy
from hubsvc.storage import HubStore
from hubsvc.storage.history import HistoryStore
from netkernel.archive import ArchiveWriter, archive_name
from netkernel.errors import NotFound

log = logging.getLogger("agentnet.hub.retention")

SWEEP_CHANNELS = 100
"""Channels one sweep reads from the store at a time."""


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


async def purged_refusal(store: HubStore, channel_id: str) -> NotFound:
    """The NotFound for a channel the store does not hold: saying so when retention purged it."""
    stone = await store.tombstone(channel_id) if isinstance(store, HistoryStore) else None
    if stone is None:
        return NotFound(f"no channel with id {channel_id!r}; list yours with ListChannels.")
    state = channel_pb2.ChannelState.Name(stone.state).removeprefix("CHANNEL_STATE_").lower()  # type: ignore[arg-type]
    return NotFound(
        f"channel {channel_id!r} was purged by retention at {_iso(stone.purged_at)}: it ended ({state}, "
        f"{stone.close_reason or 'no reason'}) at {_iso(stone.ended_at)} with {stone.last_seq} envelopes, and the "
        "hub keeps ended channels for --retain-ended or the policy's retention for their type"
        + (f"; its archive is {stone.archive}" if stone.archive else "")
        + ".",
        metadata={
            "channel_id": channel_id,
            "purged": "retention",
            "purged_at": _iso(stone.purged_at),
            "ended_at": _iso(stone.ended_at),
            "close_reason": stone.close_reason,
            "archive": stone.archive,
        },
    )


@dataclass
class SweepStats:
    """What the sweeps did (GetStatus.retention)."""

    last_sweep_at: float = 0.0
    """When the last sweep finished (0: none yet)."""
    last_sweep_purged: int = 0
    """Channels the last sweep purged."""
    purged_channels: int = 0
    """Channels purged by every sweep since start."""
    purged_envelopes: int = 0
    """WAL rows deleted by every sweep since start."""
    last_sweep_audit_purged: int = 0
    """Audit records the last sweep deleted."""
    purged_audit: int = 0
    """Audit records deleted by every sweep since start."""


class Retention:
    """The sweep of ended channels older than their type's retention (the policy's, else
    ``options.retain_ended``) and of audit records older than ``options.retain_audit``.
    ``forget(channel_id)`` drops what the hub remembers of a purged channel; ``policy()`` is the
    policy in force."""

    def __init__(
        self,
        store: HubStore,
        options: HubOptions,
        clock: Clock,
        forget: Callable[[str], None] = lambda c: None,
        policy: Callable[[], Policy] = Policy,
    ) -> None:
        self._store = store
        self._options = options
        self._clock = clock
        self._forget = forget
        self._policy = policy
        self.stats = SweepStats()
        if options.retain_ended > 0 and not (isinstance(store, HistoryStore) and store.purges):
            log.warning(
                "--retain-ended is set but this %s store has no retention (a Redis Cluster with ?spread=1): it "
                'keeps everything (docs/operations.md "Data over time")',
                store.kind,
            )

    @property
    def enabled(self) -> bool:
        """Whether this hub runs the sweep: its store can purge channels (the policy file may set a
        retention at any time), or audit records are kept for a while only (``--retain-audit``)."""
        store = self._store
        return isinstance(store, HistoryStore) and (store.purges or self._options.retain_audit > 0)

    def retention_by_type(self) -> dict[str, float]:
        """Seconds each channel type's ended channels are kept now (0: forever)."""
        policy = self._policy()
        return {t: policy.retain_ended(t, self._options.retain_ended) for t in CHANNEL_TYPES}

    def cutoffs(self, now: float) -> Mapping[str, float]:
        """For each channel type whose ended channels are purged, the end time before which they are due
        (none when the store cannot purge)."""
        if not (isinstance(self._store, HistoryStore) and self._store.purges):
            return {}
        return {t: now - seconds for t, seconds in self.retention_by_type().items() if seconds > 0}

    async def run(self) -> None:
        """Sweep every ``--retention-sweep-interval`` seconds until cancelled (a failed sweep is logged)."""
        while True:
            try:
                await self.sweep()
            except asyncio.CancelledError:
                raise
            except Exception:  # the store failed: the next sweep tries again
                log.warning("a retention sweep failed; the next one tries again", exc_info=True)
            await asyncio.sleep(self._options.retention_sweep_interval)

    async def sweep(self) -> int:
        """Archive (with ``--archive-dir``) and purge every channel ended longer ago than its type's
        retention, then delete the audit records older than ``--retain-audit``; returns how many
        channels were purged."""
        store = self._store
        if not isinstance(store, HistoryStore) or not (self.cutoffs(0.0) or self._options.retain_audit > 0):
            return 0
        purged = 0
        skipped: set[str] = set()
        while True:
            cutoffs = self.cutoffs(self._clock())
            if not cutoffs:
                break
            ids = [c for c in await store.ended_before(cutoffs, SWEEP_CHANNELS + len(skipped)) if c not in skipped]
            if not ids:
                break
            for channel_id in ids:
                archive: str | None = ""
                if self._options.archive_dir:
                    try:
                        archive = await self._archive(channel_id)
                    except OSError as exc:
                        log.warning("archiving channel %s failed (%s); it is kept until it can be", channel_id, exc)
                        skipped.add(channel_id)
                        continue
                    if archive is None:  # purged by another replica meanwhile
                        continue
                rows = await store.purge_channel(
                    channel_id,
                    purged_at=self._clock(),
                    archive=archive or "",
                    batch_rows=self._options.retention_batch_rows,
                )
                self._forget(channel_id)
                if rows is None:  # live after all, or purged meanwhile (by another replica)
                    continue
                self.stats.purged_envelopes += rows
                self.stats.purged_channels += 1
                purged += 1
        audit = await self._sweep_audit(store)
        self.stats.last_sweep_at = self._clock()
        self.stats.last_sweep_purged = purged
        self.stats.last_sweep_audit_purged = audit
        if purged or audit:
            log.info("retention purged %d ended channels and %d audit records", purged, audit)
        return purged

    async def _sweep_audit(self, store: HistoryStore) -> int:
        """Delete the audit records older than ``--retain-audit``, ``--retention-batch-rows`` a step."""
        if self._options.retain_audit <= 0:
            return 0
        before = self._clock() - self._options.retain_audit
        batch = self._options.retention_batch_rows
        deleted = 0
        while True:
            step = await store.purge_audit(before, batch)
            deleted += step
            self.stats.purged_audit += step
            if step < batch:
                return deleted
            await asyncio.sleep(0)  # writers queued meanwhile go first

    async def _archive(self, channel_id: str) -> str | None:
        """Write the channel's archive into ``--archive-dir``; returns its path ("" when the channel's
        row is gone already: a purge a restart interrupted, archived before it began; None when the WAL
        read is not the whole channel: another replica purged it meanwhile, and nothing is written)."""
        row = await self._store.get_channel(channel_id)
        if row is None:
            return ""
        meta = channel_pb2.ChannelMetadata.FromString(row.record)
        directory = Path(self._options.archive_dir)
        await asyncio.to_thread(directory.mkdir, parents=True, exist_ok=True)
        writer = await asyncio.to_thread(ArchiveWriter, directory / archive_name(channel_id), meta)
        try:
            async for _, records in self._store.scan_wal([channel_id]):
                await asyncio.to_thread(writer.add_wire, records)
            if writer.count != meta.last_seq:  # another replica purged it meanwhile: its archive stands
                await asyncio.to_thread(writer.abort)
                return None
            path = await asyncio.to_thread(writer.finish)
        except BaseException:
            await asyncio.to_thread(writer.abort)
            raise
        return str(path)
