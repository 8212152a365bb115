"""This replica's share of the partitions: :class:`Ownership` keeps the leases it should hold.

Every ``--replica-refresh`` seconds one round (:meth:`Ownership.step`):

1. **renews** every lease this replica holds, in one round trip; a partition the store says is
   lost (the lease lapsed — this replica was paused or cut off longer than the lease — or
   another replica took it) is **dropped at once**: ``on_lost`` is called and it is no longer
   offered as a fence. If the renewal itself fails (Redis does not answer), each partition whose
   lease has run out by this host's clock since its last successful renewal is dropped too;
2. lists the **live replicas** (their liveness keys, :meth:`~hubsvc.storage.base.Liveness.replicas`)
   and computes the partitions this replica should own (:func:`~hubsvc.core.partition_map.desired`,
   rendezvous hashing: a join or a leave moves about ``1/N`` of them);
3. **releases** the partitions it holds but should no longer own: first ``on_lost`` (the hub
   drains the in-flight commits of those channels and drops them), then the lease is freed so
   the new owner can take it at its next round;
4. **acquires** the partitions it should own that it does not hold, where the lease is free or
   lapsed (a new, higher epoch each time), calling ``on_gained(partition, epoch)``; a partition
   whose lease another replica still holds is tried again next round (that replica releases it
   at its own next round, or its lease lapses).

Leases live ``--replica-ttl`` seconds. Safety does not depend on this loop's timing: every commit
of a partition's channels is fenced with the epoch (:attr:`~hubsvc.storage.base.Writes.fence`,
:meth:`Ownership.fence_for`) and the store refuses it atomically once the lease is gone. The loop
only decides how soon work moves. The callbacks of one round run concurrently and should return
quickly (each is given at most half the TTL; an ``on_gained`` that fails or times out gives the
partition back): a slow one delays the next renewal.

:class:`~hubsvc.core.hub.HubCore` runs one with ``--partitions`` (its callbacks hand a partition's
channels over, :mod:`hubsvc.core.live_channels.handover`; docs/scale-out.md "Channels divided among
the replicas").
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping

from hubsvc.core.partition_map import desired
from hubsvc.storage.base import Liveness
from hubsvc.storage.leases import PartitionLeases
from netkernel.partitions import partition_of

log = logging.getLogger("agentnet.hub.partitions")

Callback = Callable[[int, int], Awaitable[None]]
"""``on_gained`` / ``on_lost``: called with (partition, epoch)."""


class Ownership:
    """Steers this replica's partition leases towards its rendezvous share (see the module docstring).

    ``ttl``: seconds a lease lives (``--replica-ttl``); ``refresh``: seconds between rounds
    (``--replica-refresh``, well below ``ttl``); ``clock``: this host's monotonic clock (a test's own)."""

    def __init__(
        self,
        leases: PartitionLeases,
        liveness: Liveness,
        *,
        ttl: float,
        refresh: float,
        on_gained: Callback,
        on_lost: Callback,
        after_round: Callable[[int], Awaitable[None]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 0 < refresh < ttl:
            raise ValueError(f"the refresh interval ({refresh!r} s) must be positive and below the TTL ({ttl!r} s)")
        self._leases = leases
        self._liveness = liveness
        self._ttl = ttl
        self._refresh = refresh
        self._on_gained = on_gained
        self._on_lost = on_lost
        self._clock = clock
        self._after_round = after_round
        """Called after each round :meth:`run` makes, with its number (from 1)."""
        self._held: dict[int, int] = {}
        """Partition → the epoch this replica holds it with."""
        self._until: dict[int, float] = {}
        """Partition → when its lease runs out by this host's clock (from the last successful renewal's sending)."""

    @property
    def replica_id(self) -> str:
        """This replica's id (the owner its leases are taken under)."""
        return self._leases.replica_id

    @property
    def count(self) -> int:
        """The store's partition count."""
        return self._leases.count

    def holds(self, partition: int) -> bool:
        """Whether this replica holds ``partition`` now (offers it as a fence)."""
        return partition in self._held

    @property
    def held(self) -> Mapping[int, int]:
        """The partitions this replica holds → their epochs (a copy)."""
        return dict(self._held)

    def fence_for(self, channel_ids: Iterable[str]) -> dict[int, int] | None:
        """The fence of a bundle writing ``channel_ids`` (partition → epoch), or None when this replica
        does not hold one of their partitions (the write belongs to another owner)."""
        fence: dict[int, int] = {}
        for channel_id in channel_ids:
            partition = partition_of(channel_id, self._leases.count)
            epoch = self._held.get(partition)
            if epoch is None:
                return None
            fence[partition] = epoch
        return fence

    async def run(self) -> None:
        """Every ``refresh`` seconds (the caller ran the first :meth:`step`), run a round and then
        ``after_round``, until cancelled; a failed round is logged and retried."""
        rounds = 0
        while True:
            await asyncio.sleep(self._refresh)
            rounds += 1
            try:
                await self.step()
                if self._after_round is not None:
                    await self._after_round(rounds)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("partition ownership round failed (%r); retrying in %s s", exc, self._refresh)

    async def step(self) -> None:
        """One round: renew, drop what was lost, release what is no longer ours, acquire what should be."""
        if not await self._renew():
            return
        live = await self._liveness.replicas()
        want = desired(self.replica_id, self._leases.count, live)
        leaving = {p: e for p, e in self._held.items() if p not in want}
        if leaving:
            await self._drop(leaving, release=True)
        missing = sorted(want - self._held.keys())
        if missing:
            await self._acquire(missing)

    async def stop(self) -> None:
        """Give every partition up (a clean stop): ``on_lost`` for each, then free the leases."""
        if self._held:
            await self._drop(dict(self._held), release=True)

    async def _renew(self) -> bool:
        """Renew every held lease; drop the lost ones. False when the store did not answer."""
        if not self._held:
            return True
        snapshot = dict(self._held)
        sent = self._clock()
        try:
            lost = await self._leases.renew(snapshot, self._ttl)
        except Exception as exc:
            expired = {p: e for p, e in snapshot.items() if self._until.get(p, 0.0) <= self._clock()}
            log.warning("could not renew the partition leases (%r); %d ran out meanwhile", exc, len(expired))
            if expired:
                await self._drop(expired, release=False)
            return False
        for p in snapshot.keys() - lost:
            self._until[p] = sent + self._ttl
        if lost:
            log.warning("lost partitions %s (their leases lapsed or moved): dropping them", sorted(lost))
            await self._drop({p: snapshot[p] for p in lost}, release=False)
        return True

    async def _acquire(self, partitions: list[int]) -> None:
        """Take the free or lapsed leases of ``partitions`` and tell ``on_gained``; a partition counts as
        held (:meth:`holds`, a fence) only once ``on_gained`` is done: until then the hub has not taken
        its channels over, and what reaches this replica for them waits for it."""
        sent = self._clock()
        got = await self._leases.acquire(partitions, self._ttl)
        gained = {**got.kept, **got.gained}  # kept: ours in the store although this replica had dropped it
        items = sorted(gained.items())
        told = await asyncio.gather(*(self._call(self._on_gained, p, e, "on_gained") for p, e in items))
        for (p, epoch), ok in zip(items, told, strict=True):
            if ok:
                self._held[p] = epoch
                self._until[p] = sent + self._ttl
        failed = {p: e for (p, e), ok in zip(items, told, strict=True) if not ok}
        if failed:
            await self._drop(failed, release=True, tell=False)

    async def _drop(self, partitions: dict[int, int], *, release: bool, tell: bool = True) -> None:
        """Stop offering ``partitions`` as fences, tell ``on_lost`` (unless ``tell`` is False), then free
        their leases if ``release`` (only those still held with these epochs are freed)."""
        for p in partitions:
            self._held.pop(p, None)
            self._until.pop(p, None)
        if tell:
            await asyncio.gather(*(self._call(self._on_lost, p, e, "on_lost") for p, e in sorted(partitions.items())))
        if release:
            await self._leases.release(partitions)

    async def _call(self, callback: Callback, partition: int, epoch: int, name: str) -> bool:
        """``callback(partition, epoch)``, given at most half the lease TTL; False if it failed or timed out."""
        try:
            await asyncio.wait_for(callback(partition, epoch), self._ttl / 2)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("%s(%d, %d) failed (%r)", name, partition, epoch, exc)
            return False
        return True
