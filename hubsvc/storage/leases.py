"""Partition leases with a fencing epoch: the storage half of dividing the channels among replicas.

Channels fall into a fixed number of partitions (:func:`netkernel.partitions.partition_of`); each
partition is owned by at most one live hub replica at a time through a **lease** the store
arbitrates (docs/scale-out.md, "Partitions and ownership"):

* per partition an **owner** (a replica id) whose lease lapses ``ttl`` seconds after its last
  acquisition or renewal, by the store's own clock, and an **epoch**: a number raised by every
  new acquisition and never lowered or reset (it survives the lease's lapse);
* a write fenced with ``{partition: epoch}`` (:attr:`~hubsvc.storage.base.Writes.fence`) is
  stored only if, in the same atomic step, this replica still holds each of those partitions
  with that epoch and the lease has not lapsed; otherwise nothing of it is written and it fails
  with :class:`~hubsvc.storage.base.Fenced`. So a replica that lost a partition (paused, cut off)
  can never commit to it, whatever it still believes.

:class:`PartitionLeases` is the interface; :class:`hubsvc.storage.redis_store.partitions.RedisPartitions`
implements it on Redis. A single-process store (SQLite) has none (``HubStore.partitions`` is None).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Lease:
    """One partition as the store holds it."""

    partition: int
    owner: str | None
    """The replica holding the lease, None when it is free (never taken, released, or lapsed)."""
    epoch: int
    """The epoch of the current lease, or when it is free the last one ever given (0: never taken)."""
    ttl_ms: int = 0
    """Milliseconds left before the lease lapses (0 when free)."""


@dataclass(frozen=True, slots=True)
class Acquired:
    """What :meth:`PartitionLeases.acquire` got."""

    gained: dict[int, int]
    """Partitions newly acquired → their new epoch (raised by this acquisition)."""
    kept: dict[int, int]
    """Partitions already held by this replica → their unchanged epoch (the lease was renewed)."""
    taken: dict[int, str]
    """Partitions whose lease another replica holds (and has not lapsed) → that replica."""


class PartitionLeases(abc.ABC):
    """The partition leases of one store, as seen by one replica (:attr:`replica_id`)."""

    replica_id: str
    """This replica's id: the owner its leases are taken under (its liveness and change-feed id)."""

    @property
    @abc.abstractmethod
    def count(self) -> int:
        """The store's partition count (fixed when the store was created; known once it is open)."""

    @abc.abstractmethod
    async def acquire(self, partitions: Sequence[int], ttl: float) -> Acquired:
        """Take each of ``partitions`` whose lease is free or lapsed (a new epoch), renew each this
        replica holds already (same epoch), and leave those another replica holds; for ``ttl`` seconds."""

    @abc.abstractmethod
    async def renew(self, held: Mapping[int, int], ttl: float) -> set[int]:
        """Extend every lease of ``held`` (partition → the epoch this replica holds it with) by ``ttl``
        seconds, in one round trip; returns the partitions lost (lapsed, or now another epoch), which
        are not renewed."""

    @abc.abstractmethod
    async def release(self, held: Mapping[int, int]) -> None:
        """Free the leases of ``held`` (partition → epoch) that this replica still holds with that epoch
        (the epochs stay: the next owner gets a higher one)."""

    @abc.abstractmethod
    async def read_map(self) -> list[Lease]:
        """Every partition, in order: its owner (None: free) and epoch."""

    def validate(self, partitions: Sequence[int]) -> None:
        """Raise ValueError unless every partition number is in ``[0, count)``."""
        bad = [p for p in partitions if not 0 <= p < self.count]
        if bad:
            raise ValueError(f"partitions {bad} are not in [0, {self.count})")
