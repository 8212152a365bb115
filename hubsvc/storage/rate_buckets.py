"""Posts-per-second buckets shared by the replicas of one store (:class:`RateBuckets`); the Redis store's
are :class:`~hubsvc.storage.redis_store.rate.RedisRateBuckets`, and the rate limiter that draws on them is
:class:`~hubsvc.governance.rate.RateLimiter`."""

from __future__ import annotations

import abc


class RateBuckets(abc.ABC):
    """Posts-per-second token buckets shared by the replicas of one store, one per identity
    (docs/governance.md "Rate limits"): every replica draws an identity's tokens from the same
    bucket, so its limit holds across replicas. The refill is measured on ``now``, the replicas'
    clock, and a bucket never rises above its ``burst``."""

    @abc.abstractmethod
    async def take(self, agent_id: str, tokens: int, per_second: float, burst: int, now: float) -> tuple[int, float]:
        """Take up to ``tokens`` whole tokens of ``agent_id``'s bucket, refilled to ``now`` first;
        returns (tokens taken, seconds until the bucket holds a whole token again: 0 if it does).
        Raises :class:`~netkernel.errors.Unavailable` when the store did not answer."""

    @abc.abstractmethod
    async def give_back(self, agent_id: str, tokens: int, per_second: float, burst: int, now: float) -> None:
        """Return ``tokens`` taken and not spent (never above ``burst``)."""
