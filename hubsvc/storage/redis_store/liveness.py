"""Which hub replicas sharing one Redis are alive, and where to reach them (:class:`~hubsvc.storage.base.Liveness`).

Each replica keeps the key ``P{g}:replica:<replica id>`` with a time to live, refreshed more
often than it lapses (``--replica-ttl`` / ``--replica-refresh``); its value is the replica's
advertised gRPC address (``host:port``; empty when it advertises none), so another replica can
reach it. A replica that dies stops refreshing it, and Redis expires the key by its own clock:
the other replicas then know the replica is gone without any clock of theirs having to agree. A
clean stop deletes the key. The set ``P{g}:replicas`` is the directory: every beat adds the
replica's id to it, and listing the live replicas (``lua/replicas.lua``, one atomic script)
removes the ids whose key has lapsed. ``P{g}:replica_key`` holds the secret replicas present to
each other's ReplicaService.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from typing import cast

from hubsvc.storage.base import Liveness
from hubsvc.storage.redis_connect import RedisClient


class RedisLiveness(Liveness):
    """Liveness keys ``<prefix><replica id>`` of one Redis store, and the directory set ``directory``
    (``listing``: the source of the script that lists the live replicas, ``lua/replicas.lua``)."""

    def __init__(
        self,
        client: RedisClient,
        prefix: str,
        replica_id: str,
        directory: str,
        listing: str,
        key_name: str,
        *,
        on_lapse: Callable[[], None] = lambda: None,
        notices: str | None = None,
    ) -> None:
        self._client = client
        self._prefix = prefix
        self._directory = directory
        self._listing = client.register_script(listing)
        self._key_name = key_name
        self._on_lapse = on_lapse
        """Called when a beat finds this replica's key lapsed since the last one (others took it for gone)."""
        self._notices = notices
        """The global key prefix of the replicas' notice streams (None: the channels are not divided)."""
        self._beaten = False
        self.replica_id = replica_id
        self.address = ""

    async def beat(self, ttl: float) -> None:
        """(Re)set this replica's key (holding :attr:`address`) to lapse ``ttl`` seconds from now
        (Redis's clock), and list the replica in the directory. A key found lapsed since the last
        beat calls ``on_lapse``."""
        async with self._client.pipeline(transaction=False) as pipe:
            pipe.set(self._prefix + self.replica_id, self.address.encode(), px=max(1, int(ttl * 1000)), get=True)
            pipe.sadd(self._directory, self.replica_id)
            previous, _ = await pipe.execute()
        if self._beaten and previous is None:
            self._on_lapse()
        self._beaten = True

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

    async def replicas(self) -> dict[str, str]:
        """Every replica whose key has not lapsed → its advertised address."""
        notices = [] if self._notices is None else [self._notices]
        flat = cast("list[bytes]", await self._listing(keys=[self._directory], args=[self._prefix, *notices]))
        return {flat[i].decode(): flat[i + 1].decode() for i in range(0, len(flat), 2)}

    async def leave(self) -> None:
        """Delete this replica's key, its directory entry and its notice stream."""
        async with self._client.pipeline(transaction=False) as pipe:
            pipe.delete(self._prefix + self.replica_id)
            pipe.srem(self._directory, self.replica_id)
            if self._notices is not None:
                pipe.delete(
                    self._notices + "notices:" + self.replica_id, self._notices + "notices_seq:" + self.replica_id
                )
            await pipe.execute()
