"""Partition leases on Redis (:class:`~hubsvc.storage.leases.PartitionLeases`): :class:`RedisPartitions`.

Keys (all global, so on a Cluster in the hub's one slot, beside the commit script's keys):

* ``P{g}:partitions`` — the partition count, written once by the first store opened with
  partitions (``SET NX``); a store opened later with another count logs a warning and uses the
  recorded one (:func:`record_count`);
* ``P{g}:lease:<partition>`` — the lease, ``<replica id>\\0<epoch>``, set with ``PX``: it lapses by
  Redis's own clock ``ttl`` after its last acquisition or renewal, whatever the hosts' clocks say;
* ``P{g}:lease_epochs`` — hash partition → the last epoch given. A new acquisition raises it
  (``HINCRBY``); nothing lowers or deletes it, so an epoch is never given twice for a partition,
  even after its lease lapsed or was released.

Every operation is one call of ``lua/leases.lua`` (atomic) carrying a deadline ``--redis-timeout``
after it is sent, in Redis's clock, like the commit script: a call that reaches a stalled Redis
after this replica gave up on it does nothing (so a late acquisition never leaves a lease its
replica does not know it holds). The commit script checks a fenced bundle's leases with a
``fence`` check op (``lua/commit.lua``; :class:`~hubsvc.storage.redis_store.plan.Plan`). With the
spread layout a channel part runs on the channel's own slot, where the lease cannot be read: it
checks instead that the lease has not run out by Redis's clock (:meth:`RedisPartitions.until_us`,
from this store's own acquisitions and renewals) and that no later owner wrote to the channel (the
``epoch`` op and the channel's ``fence`` key).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any, cast

from hubsvc.storage.leases import Acquired, Lease, PartitionLeases
from hubsvc.storage.redis_connect import RedisClient
from hubsvc.storage.redis_store import scripts
from hubsvc.storage.redis_store.codec import text
from hubsvc.storage.redis_store.commit import RedisClock
from hubsvc.storage.redis_store.failures import StoreLate
from hubsvc.storage.redis_store.keys import LEASE_EPOCHS, PARTITIONS, KeyLayout, lease_value
from netkernel.partitions import MAX_PARTITIONS

log = logging.getLogger("agentnet.hub.storage")

LEASE_MARGIN = 1.0
"""Seconds (at most; a tenth of the TTL when less) before its lease can lapse that a spread-layout
commit of this replica stops being accepted: room for the Redis masters' clocks to disagree."""


async def record_count(client: RedisClient, keys: KeyLayout, wanted: int) -> int:
    """The store's partition count: ``wanted`` if this store is the first to record one, else the
    recorded count (a warning is logged when it differs from ``wanted``)."""
    key = keys.g + PARTITIONS
    await client.set(key, str(wanted), nx=True)
    recorded = int(text(await client.get(key) or b"0"))
    if not 1 <= recorded <= MAX_PARTITIONS:
        raise ValueError(f"the store under prefix {keys.raw_prefix!r} records {recorded} partitions, not a valid count")
    if recorded != wanted:
        log.warning(
            "--partitions is %d but the store under prefix %r was created with %d partitions; using %d "
            "(the count is fixed when the store is created: docs/scale-out.md)",
            wanted,
            keys.raw_prefix,
            recorded,
            recorded,
        )
    return recorded


class RedisPartitions(PartitionLeases):
    """The partition leases of one Redis store, taken under ``replica_id``."""

    def __init__(self, client: RedisClient, keys: KeyLayout, clock: RedisClock, replica_id: str) -> None:
        self._client = client
        self._keys = keys
        self._clock = clock
        self._script = client.register_script(scripts.LEASES)
        self.replica_id = replica_id
        self._count = 0
        self._held: dict[int, tuple[int, float]] = {}
        """Partition → (epoch, until when its lease holds by this host's monotonic clock), for the leases
        this store took or renewed (:meth:`until_us`)."""

    @property
    def count(self) -> int:
        """The store's partition count (0 until :meth:`open`)."""
        return self._count

    async def open(self, wanted: int) -> None:
        """Learn the partition count, recording ``wanted`` if the store records none yet."""
        self._count = await record_count(self._client, self._keys, wanted)

    def fence_check(self, partition: int, epoch: int) -> tuple[str, str]:
        """(lease key, the value it must hold) for a commit fenced with ``partition`` at ``epoch``."""
        return self._keys.lease(partition), lease_value(self.replica_id, epoch)

    def until_us(self, partition: int, epoch: int) -> int:
        """Until when this store's lease of ``partition`` with ``epoch`` holds, in microseconds of Redis's
        clock (0 if it holds no such lease): what a spread-layout commit checks in the channel's slot,
        where the lease cannot be read (:class:`~hubsvc.storage.redis_store.plan.Plan`).

        The lease was set after its call was sent, so it lapses no sooner than ``ttl`` after the
        sending; a tenth of the TTL (at most :data:`LEASE_MARGIN` seconds) is kept back for the Redis
        masters' clocks and the clock offset's error (:class:`~hubsvc.storage.redis_store.commit.RedisClock`)."""
        held = self._held.get(partition)
        if held is None or held[0] != epoch:
            return 0
        return int(held[1] * 1_000_000 + self._clock.offset_us)

    def _hold(self, partitions: Mapping[int, int], sent: float, ttl: float) -> None:
        """Record the leases of ``partitions`` (→ epoch) as set or renewed by a call sent at ``sent``."""
        until = sent + ttl - min(ttl / 10, LEASE_MARGIN)
        for partition, epoch in partitions.items():
            self._held[partition] = (epoch, until)

    async def _call(self, op: str, partitions: Sequence[int], values: Sequence[Any], ttl: float) -> list[Any]:
        """One call of ``lua/leases.lua`` on the leases of ``partitions``, with its deadline."""
        self.validate(partitions)
        keys = [self._keys.g + LEASE_EPOCHS, *(self._keys.lease(p) for p in partitions)]
        _, deadline = self._clock.deadline()
        args = [op, deadline, self.replica_id, max(1, int(ttl * 1000)), *values]
        result = cast("list[Any]", await self._script(keys=keys, args=args))
        if int(result[0]) == 2:
            await self._clock.measure()  # in case Redis's clock was stepped since the last measurement
            raise StoreLate(f"{text(result[1])}: Redis stalled longer than the --redis-timeout")
        return result[1:]

    async def acquire(self, partitions: Sequence[int], ttl: float) -> Acquired:
        """Take the free or lapsed leases of ``partitions`` (new epochs), renew ours, leave the others'."""
        wanted = list(dict.fromkeys(partitions))
        got = Acquired({}, {}, {})
        if not wanted:
            return got
        sent = time.monotonic()
        flat = await self._call("acquire", wanted, wanted, ttl)
        for j, partition in enumerate(wanted):
            status, epoch, owner = text(flat[3 * j]), int(flat[3 * j + 1]), text(flat[3 * j + 2])
            if status == "g":
                got.gained[partition] = epoch
            elif status == "k":
                got.kept[partition] = epoch
            else:
                got.taken[partition] = owner
                self._held.pop(partition, None)
        self._hold({**got.gained, **got.kept}, sent, ttl)
        return got

    async def renew(self, held: Mapping[int, int], ttl: float) -> set[int]:
        """Extend the leases of ``held`` in one call; the partitions lost (not renewed)."""
        if not held:
            return set()
        parts = list(held)
        sent = time.monotonic()
        flat = await self._call("renew", parts, [held[p] for p in parts], ttl)
        lost = {parts[int(j) - 1] for j in flat}
        for partition in lost:
            self._held.pop(partition, None)
        self._hold({p: e for p, e in held.items() if p not in lost}, sent, ttl)
        return lost

    async def release(self, held: Mapping[int, int]) -> None:
        """Delete the leases of ``held`` this replica still holds with those epochs."""
        if held:
            for partition, epoch in held.items():
                if self._held.get(partition, (None,))[0] == epoch:
                    del self._held[partition]
            parts = list(held)
            await self._call("release", parts, [held[p] for p in parts], 1)

    async def read_map(self) -> list[Lease]:
        """Every partition's owner (None: free), epoch and milliseconds to live, in one atomic call."""
        parts = list(range(self._count))
        flat = await self._call("map", parts, parts, 1) if parts else []
        leases = []
        for p in parts:
            value, pttl, last = text(flat[3 * p]), int(flat[3 * p + 1]), text(flat[3 * p + 2])
            if value:
                owner, _, epoch = value.partition("\0")
                leases.append(Lease(p, owner, int(epoch), max(0, pttl)))
            else:
                leases.append(Lease(p, None, int(last or 0)))
        return leases
