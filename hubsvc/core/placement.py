"""Where each channel is held: this replica, another one, or (a hub alone) always here.

On a store shared by replicas with partitions (``--partitions N``, docs/scale-out.md "Channels
divided among the replicas"), a channel is held — admitted into, folded, timed — only by the
replica that owns its partition (:class:`~hubsvc.core.ownership.Ownership`). :class:`Placement`
answers the questions the hub asks on every post and open: does this replica hold the channel
(:meth:`holds`), with which fence does a write of it commit (:meth:`fence`), and which replica
to forward to otherwise (:meth:`owner_address`, from the lease map and the replica directory,
read again each ownership round and whenever a forward found the map stale).

Without partitions every replica holds every channel (:data:`EVERYWHERE`), as a hub alone does.
"""

from __future__ import annotations

import asyncio
import logging

from hubsvc.core.ownership import Ownership
from hubsvc.core.util import new_id
from hubsvc.storage.base import Liveness
from hubsvc.storage.leases import PartitionLeases
from netkernel.errors import PartitionMoved
from netkernel.partitions import partition_of

log = logging.getLogger("agentnet.hub.partitions")

_NEW_ID_TRIES = 4096
"""Fresh ids tried for a channel opened here before giving up (each lands in a held partition with
probability held/count; a replica holding one of 64 partitions needs about 64)."""


class Placement:
    """Which channels this replica holds, and where the others are held."""

    def __init__(self, ownership: Ownership | None, leases: PartitionLeases | None, liveness: Liveness | None) -> None:
        self.ownership = ownership
        self._leases = leases
        self._liveness = liveness
        self._owners: dict[int, str] = {}
        """Partition → the replica holding its lease, as last read (free partitions are absent)."""
        self._addresses: dict[str, str] = {}
        """Replica id → its advertised address, as last read."""
        self._reading: asyncio.Future[None] | None = None
        """The read under way, which concurrent callers share."""

    @property
    def divided(self) -> bool:
        """Whether the channels are divided among replicas (else this replica holds every one)."""
        return self.ownership is not None

    def partition(self, channel_id: str) -> int:
        """The partition of ``channel_id`` (0 without partitions)."""
        return partition_of(channel_id, self._leases.count) if self._leases is not None else 0

    def holds(self, channel_id: str) -> bool:
        """Whether this replica holds ``channel_id`` (always, without partitions)."""
        ownership = self.ownership
        return ownership is None or ownership.holds(partition_of(channel_id, ownership.count))

    def fence(self, channel_id: str) -> dict[int, int]:
        """The fence a write of ``channel_id`` commits with ({} without partitions). A channel whose
        partition this replica no longer holds gets epoch 0, which no lease ever has: the store
        refuses the write and nothing of it is stored."""
        ownership = self.ownership
        if ownership is None:
            return {}
        return ownership.fence_for([channel_id]) or {partition_of(channel_id, ownership.count): 0}

    def require(self, channel_id: str) -> None:
        """Raise :class:`PartitionMoved` unless this replica holds ``channel_id``."""
        if not self.holds(channel_id):
            raise not_held(channel_id)

    def owner_address(self, channel_id: str) -> str | None:
        """The address of the replica holding ``channel_id`` as last read (None: no replica holds its
        partition now, or it advertises no address, or it is this replica)."""
        if self._leases is None or self.ownership is None:
            return None
        owner = self._owners.get(partition_of(channel_id, self._leases.count))
        if owner is None or owner == self.ownership.replica_id:
            return None
        return self._addresses.get(owner) or None

    def owners(self) -> list[tuple[int, str, str]]:
        """(partition, holder's replica id, its address) of every held partition, as last read."""
        return [(p, owner, self._addresses.get(owner, "")) for p, owner in sorted(self._owners.items())]

    def new_channel_id(self) -> str:
        """A fresh channel id in a partition this replica holds (any fresh id without partitions). A
        replica holding no partition raises :func:`not_held` for a fresh id: the servicer forwards the
        call to that id's holder, which opens the channel in a partition of its own."""
        if self.ownership is None:
            return new_id()
        if self.ownership.held:
            for _ in range(_NEW_ID_TRIES):
                channel_id = new_id()
                if self.holds(channel_id):
                    return channel_id
        raise not_held(new_id())

    async def read(self) -> None:
        """Read the lease map and the replica directory again (concurrent callers share one read)."""
        if self._leases is None or self._liveness is None:
            return
        if self._reading is None:
            self._reading = asyncio.ensure_future(self._read(self._leases, self._liveness))
            self._reading.add_done_callback(lambda _: setattr(self, "_reading", None))
        await asyncio.shield(self._reading)

    async def _read(self, leases: PartitionLeases, liveness: Liveness) -> None:
        self._owners = {lease.partition: lease.owner for lease in await leases.read_map() if lease.owner}
        self._addresses = await liveness.replicas()


def not_held(channel_id: str) -> PartitionMoved:
    """The refusal of a channel another replica holds (the servicer forwards such posts)."""
    return PartitionMoved(
        f"channel '{channel_id}' is held by another hub replica, and this one could not forward to it; "
        "retry (the replicas are moving the channel's partition).",
        metadata={"channel_id": channel_id},
    )
