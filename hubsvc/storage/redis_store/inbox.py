"""The replicas' inbox counts on Redis (:class:`~hubsvc.storage.inbox_totals.InboxTotals`).

One hash per replica, ``P{g}:inbox:<replica id>`` (agent id → what waits for it in the channels that
replica holds), with a time to live refreshed by every publish, so the counts of a replica that died
lapse by Redis's own clock. Another replica sums an identity's counts over the replicas of the
directory ``P{g}:replicas`` other than itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

from redis.typing import EncodableT

from hubsvc.storage.inbox_totals import InboxTotals
from hubsvc.storage.redis_connect import RedisClient
from hubsvc.storage.redis_store.codec import text
from hubsvc.storage.redis_store.failures import read
from hubsvc.storage.redis_store.keys import REPLICAS, KeyLayout

INBOX = "inbox:"
"""The start of the per-replica hashes of inbox counts (``P{g}:inbox:<replica id>``)."""


class RedisInboxTotals(InboxTotals):
    """The inbox counts of replica ``replica_id`` of the store with ``keys``, through ``client``."""

    def __init__(self, client: RedisClient, keys: KeyLayout, replica_id: str) -> None:
        self._client = client
        self._replica_id = replica_id
        self._prefix = keys.g + INBOX
        self._directory = keys.g + REPLICAS

    @read  # a write, but idempotent (absolute counts, a time to live): read's one retry on a broken connection is safe
    async def publish(self, changed: Mapping[str, int], keep_for: float) -> bool:
        """Write ``changed`` (see :meth:`InboxTotals.publish`) and refresh the hash's time to live: the first
        PEXPIRE says whether the hash was still there, the last one covers a hash this call created."""
        key = self._prefix + self._replica_id
        ttl_ms = max(1, int(keep_for * 1000))
        gone = [agent_id for agent_id, n in changed.items() if n <= 0]
        counts: dict[EncodableT, EncodableT] = {agent_id: n for agent_id, n in changed.items() if n > 0}
        async with self._client.pipeline(transaction=False) as pipe:
            pipe.pexpire(key, ttl_ms)
            if gone:
                pipe.hdel(key, *gone)
            if counts:
                pipe.hset(key, mapping=counts)
                pipe.pexpire(key, ttl_ms)
            kept = (await pipe.execute())[0]
        return bool(kept)

    @read
    async def elsewhere(self, agent_ids: Sequence[str]) -> dict[str, int]:
        """Sum the other replicas' counts of ``agent_ids`` (see :meth:`InboxTotals.elsewhere`)."""
        totals = dict.fromkeys(agent_ids, 0)
        if not agent_ids:
            return totals
        replicas = [text(r) for r in await self._client.smembers(self._directory)]
        others = [r for r in replicas if r != self._replica_id]
        if not others:
            return totals
        async with self._client.pipeline(transaction=False) as pipe:
            for replica_id in others:
                pipe.hmget(self._prefix + replica_id, list(agent_ids))
            rows = cast("list[list[bytes | None]]", await pipe.execute())
        for row in rows:
            for agent_id, value in zip(agent_ids, row, strict=True):
                if value is not None:
                    totals[agent_id] += int(value)
        return totals

    async def withdraw(self) -> None:
        """Delete this replica's hash."""
        await self._client.delete(self._prefix + self._replica_id)
