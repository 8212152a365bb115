"""Which live replica should own each partition: rendezvous (highest-random-weight) hashing.

Every replica computes the same answer from the same inputs (the partition count and the set of
live replica ids), with nothing stored and nothing to agree on first: partition ``p`` goes to the
replica ``r`` with the highest weight ``w(r, p)``, the first 8 bytes (big-endian) of
``BLAKE2b-64("<r>\\0<p>")``, ties broken by the larger replica id. When a replica joins, it takes
exactly the partitions where it now has the highest weight (about ``1/N`` of them, from every
other replica a little); when one leaves, only its own partitions move, each to the replica with
the next-highest weight. Nothing else moves.

Who actually owns a partition is the lease in the store (:mod:`hubsvc.storage.leases`);
:class:`~hubsvc.core.ownership.Ownership` steers the leases towards this assignment.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def weight(replica_id: str, partition: int) -> int:
    """The rendezvous weight of ``replica_id`` for ``partition`` (a 64-bit number)."""
    digest = hashlib.blake2b(f"{replica_id}\0{partition}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def owner_of(partition: int, replicas: Iterable[str]) -> str | None:
    """The replica ``partition`` is assigned to among ``replicas`` (None when there is none)."""
    best: tuple[int, str] | None = None
    for replica_id in replicas:
        candidate = (weight(replica_id, partition), replica_id)
        if best is None or candidate > best:
            best = candidate
    return None if best is None else best[1]


def assign(count: int, replicas: Iterable[str]) -> dict[int, str]:
    """Every partition of ``count`` → the replica it is assigned to (empty when there is no replica)."""
    live = sorted(set(replicas))
    if not live:
        return {}
    return {p: owner for p in range(count) if (owner := owner_of(p, live)) is not None}


def desired(replica_id: str, count: int, replicas: Iterable[str]) -> set[int]:
    """The partitions ``replica_id`` should own among the live ``replicas`` (itself counted live)."""
    live = set(replicas) | {replica_id}
    return {p for p, owner in assign(count, live).items() if owner == replica_id}
