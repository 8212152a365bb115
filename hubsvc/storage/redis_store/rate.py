"""The identities' rate buckets on Redis, shared by every replica of the store
(:class:`~hubsvc.storage.rate_buckets.RateBuckets`).

One hash per identity, ``P{g}:rate:<agent id>`` (a global key: on a Cluster in the hub's slot), taken
from and given back to by ``lua/rate.lua`` in one atomic call. The key expires once the bucket would
be full again, so an idle identity costs nothing. Each replica takes tokens a few at a time and keeps
the ones it has not spent for a moment (:class:`~hubsvc.governance.rate.RateLimiter`), so Redis is
asked about once per grant, not once per post.
"""

from __future__ import annotations

import math
from typing import Any, cast

from hubsvc.storage.rate_buckets import RateBuckets
from hubsvc.storage.redis_connect import RedisClient
from hubsvc.storage.redis_store import scripts
from hubsvc.storage.redis_store.codec import text
from hubsvc.storage.redis_store.failures import read
from hubsvc.storage.redis_store.keys import KeyLayout

KEEP_MARGIN_MS = 1000
"""Milliseconds a bucket's key outlives the time it takes to fill (so a bucket read as gone is full)."""


class RedisRateBuckets(RateBuckets):
    """The shared rate buckets of the store with ``keys``, through ``client``."""

    def __init__(self, client: RedisClient, keys: KeyLayout) -> None:
        self._keys = keys
        self._script = client.register_script(scripts.RATE)

    async def take(self, agent_id: str, tokens: int, per_second: float, burst: int, now: float) -> tuple[int, float]:
        """Take up to ``tokens`` tokens (see :meth:`RateBuckets.take`); UNAVAILABLE (``store_unreachable``)
        when Redis does not answer."""
        taken, wait = await self._call(agent_id, tokens, per_second, burst, now)
        return int(taken), float(text(wait))

    async def give_back(self, agent_id: str, tokens: int, per_second: float, burst: int, now: float) -> None:
        """Return ``tokens`` unspent tokens (see :meth:`RateBuckets.give_back`)."""
        if tokens > 0:
            await self._call(agent_id, -tokens, per_second, burst, now)

    @read  # a take that Redis did not answer is UNAVAILABLE (store_unreachable); nothing was posted
    async def _call(self, agent_id: str, n: int, per_second: float, burst: int, now: float) -> tuple[int, bytes]:
        keep_ms = math.ceil(burst / per_second * 1000) + KEEP_MARGIN_MS
        result = await self._script(
            keys=[self._keys.rate_bucket(agent_id)], args=[repr(now), repr(per_second), burst, n, keep_ms]
        )
        taken, wait = cast("list[Any]", result)
        return int(taken), wait
