"""Which hub replicas sharing one Redis are alive (:class:`~hubsvc.storage.base.Liveness`).

Each replica keeps the key ``P{g}:replica:<replica id>`` with a time to live, refreshed more
often than it lapses (``--replica-ttl`` / ``--replica-refresh``). A replica that dies stops
refreshing it, and Redis expires the key by its own clock: the other replicas then know the
replica is gone without any clock of theirs having to agree. A clean stop deletes the key.
``P{g}:replica_key`` holds the secret replicas present to each other's ReplicaService.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import cast

from hubsvc.storage.base import Liveness
from hubsvc.storage.redis_connect import RedisClient


class RedisLiveness(Liveness):
    """Liveness keys ``<prefix><replica id>`` of one Redis store."""

    def __init__(self, client: RedisClient, prefix: str, replica_id: str, key_name: str) -> None:
        self._client = client
        self._prefix = prefix
        self._key_name = key_name
        self.replica_id = replica_id

    async def beat(self, ttl: float) -> None:
        """(Re)set this replica's key to lapse ``ttl`` seconds from now (Redis's clock)."""
        await self._client.set(self._prefix + self.replica_id, b"1", px=max(1, int(ttl * 1000)))

    async def alive(self, replica_ids: Sequence[str]) -> set[str]:
        """The replicas among ``replica_ids`` whose key still exists."""
        ids = list(dict.fromkeys(r for r in replica_ids if r))
        if not ids:
            return set()
        async with self._client.pipeline(transaction=False) as pipe:
            for replica_id in ids:
                pipe.exists(self._prefix + replica_id)
            found = cast("list[int]", await pipe.execute())
        return {replica_id for replica_id, exists in zip(ids, found, strict=True) if exists}

    async def replica_key(self) -> str:
        """The store's replica key (``key_name``): 32 random bytes, hex, set once by whichever replica
        asks first (``SET NX``), so every replica reads the same one."""
        await self._client.set(self._key_name, secrets.token_hex(32).encode(), nx=True)
        value = await self._client.get(self._key_name)
        if value is None:  # deleted between the two calls (only by hand): make it again
            return await self.replica_key()
        return value.decode() if isinstance(value, bytes) else str(value)

    async def leave(self) -> None:
        """Delete this replica's key."""
        await self._client.delete(self._prefix + self.replica_id)
