"""What a hub store offers for data over time: online backup, its size, and retention's purge of
ended channels (docs/operations.md "Data over time").

A store that implements :class:`HistoryStore` can be backed up online (``OperatorService.Backup``)
and swept by :mod:`hubsvc.core.retention`; the others (Redis, an in-memory SQLite database)
answer FAILED_PRECONDITION / keep everything, as documented.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Tombstone:
    """What is left of a channel purged by retention: that it existed, how it ended, when it was purged."""

    channel_id: str
    type: str
    state: int
    """The ChannelState it ended in (CLOSED or EXPIRED)."""
    close_reason: str
    ended_at: float
    """Unix seconds when it ended (when its end was committed)."""
    purged_at: float
    """Unix seconds when retention purged it."""
    last_seq: int
    """Envelopes its WAL held."""
    archive: str
    """The archive file written before the purge ("" = none)."""


@dataclass(frozen=True, slots=True)
class HistoryCounts:
    """How much history a store keeps."""

    ended_kept: int
    """Ended channels whose history the store still holds."""
    purged: int
    """Channels purged by retention (tombstones)."""
    size_bytes: int
    """Bytes the store takes (-1: unknown)."""


class HistoryStore(abc.ABC):
    """Backup, size and purge of a hub store (a mixin of the stores that offer them)."""

    @property
    def purges(self) -> bool:
        """Whether retention can purge channels in this store (a layout may not allow it)."""
        return True

    @abc.abstractmethod
    async def backup_to(self, target: Path) -> float:
        """Copy the store as of one moment into the new file ``target`` while it keeps serving;
        returns the seconds the copy took."""

    @abc.abstractmethod
    def backup_dir(self) -> Path:
        """A new private (0700) directory for a backup's temporary copy (the caller deletes it)."""

    def backup_running(self) -> bool:
        """Whether a backup of this store is being copied now."""
        return False

    @abc.abstractmethod
    async def history_counts(self) -> HistoryCounts:
        """Ended channels kept, channels purged, and the store's size."""

    @abc.abstractmethod
    async def ended_before(self, cutoffs: Mapping[str, float], limit: int) -> list[str]:
        """Up to ``limit`` ids of channels that are not purged yet and ended before the unix time
        ``cutoffs[their type]`` (a type not in ``cutoffs`` is never due), those whose purge a restart
        interrupted first, then oldest end first."""

    @abc.abstractmethod
    async def purge_channel(self, channel_id: str, *, purged_at: float, archive: str, batch_rows: int) -> int | None:
        """Purge one ended channel: leave its tombstone, then delete its WAL (at most ``batch_rows``
        rows a transaction), cursors, membership and row; returns the WAL rows deleted, or None when
        this call purged nothing (a live channel, which is never touched, an unknown one, or one
        purged already — by another replica, say). A purge a restart interrupted is finished by the
        next call."""

    @abc.abstractmethod
    async def tombstone(self, channel_id: str) -> Tombstone | None:
        """The tombstone of a purged channel (None: not purged)."""

    @abc.abstractmethod
    async def purge_audit(self, before: float, batch_rows: int) -> int:
        """Delete up to ``batch_rows`` of the oldest audit records, those created before unix time
        ``before``, in one short step; returns how many were deleted (fewer than ``batch_rows``: none
        older is left, as far as this step saw). Safe when several replicas call it at once."""
