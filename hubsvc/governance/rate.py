"""Posts per second: a token bucket per identity (RATE_LIMITED beyond), and its audit.

Each identity whose effective rules set a ``rate`` has a bucket of ``burst`` tokens that
refills at ``posts_per_second``; every envelope it originates takes one token, and an
envelope that finds the bucket empty is refused with :class:`~netkernel.errors.RateLimited`
(metadata ``retry_after_seconds``: when the next token arrives; ``rule``) without taking
one. A token taken for an envelope whose write then failed with nothing stored is given
back (:meth:`RateLimiter.refund`, never above ``burst``), so the envelope counts once when it
is admitted again. Memory stays bounded: a bucket that has refilled completely is the same
as no bucket, so idle buckets are dropped (least recently used first, a few per call), and an
identity that leaves is forgotten.

Refusals are audited without letting a flooding client flood the audit log: the first
refusal of an identity is written as ``rate_limited`` with its rule, and opens an audit
window of ``audit_window`` seconds during which further refusals are only counted; the
count is written as one ``rate_limited`` record with ``suppressed=<n>`` when the window is
over (at the identity's next post or refusal, or when its idle bucket is dropped).

**Shared by replicas.** On a store several replicas share (Redis), an identity's bucket is the
store's (:class:`~hubsvc.storage.rate_buckets.RateBuckets`), so its limit holds however many replicas its
posts reach. A replica takes tokens from it a few at a time — about :data:`GRANT_SECONDS` of the
identity's rate, at least one, at most its burst — before admission spends them
(:meth:`RateLimiter.prepare`, awaited before a post is admitted), and gives back what it has not
spent within :data:`HOLD_SECONDS` (:meth:`RateLimiter.give_back_unspent`). Tokens a replica holds
unspent are only ever fewer posts admitted, never more. A refusal remembers when the store's bucket
holds a token again and is answered locally until then, so a flood of refused posts does not reach
the store.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hubsvc.governance.policy import RateSpec
from netkernel.errors import RateLimited

if TYPE_CHECKING:
    from hubsvc.storage.rate_buckets import RateBuckets

log = logging.getLogger("agentnet.hub.governance")

Audit = Callable[[str, str, str, dict[str, Any]], None]
"""``audit(kind, actor, subject, detail)``."""

_EVICT_PER_CALL = 2
"""Idle buckets examined for eviction per call (amortised: never a scan of every bucket)."""
GRANT_SECONDS = 0.1
"""(shared buckets) A replica takes about this many seconds of an identity's rate at a time."""
HOLD_SECONDS = 0.5
"""(shared buckets) Tokens a replica took and has not spent for this long go back to the store."""


class _Bucket:
    __slots__ = (
        "empty_at",
        "empty_wait",
        "shared",
        "spec",
        "subject",
        "suppressed",
        "tokens",
        "updated",
        "used",
        "window_end",
    )

    def __init__(self, spec: RateSpec, now: float, *, shared: bool = False) -> None:
        self.shared = shared
        """The tokens are those taken from the store's bucket (no refill here) rather than the bucket itself."""
        self.tokens = 0.0 if shared else float(spec.burst)
        self.updated = now
        self.empty_at = 0.0
        """(shared) When the store's bucket was last found without a whole token (this process's clock)."""
        self.empty_wait = 0.0
        """(shared) Seconds from :attr:`empty_at` until it holds one again: until then refusals are answered here."""
        self.used = 0.0
        """(shared) When tokens were last taken or spent (``time.monotonic``)."""
        self.spec = spec
        self.window_end = 0.0
        """Refusals before this time are counted, not audited one by one."""
        self.suppressed = 0
        self.subject = ""

    def refill(self, now: float) -> None:
        if self.shared:  # the store's bucket refills; these are tokens already taken from it
            return
        elapsed = max(0.0, now - self.updated)  # a clock that steps back never drains the bucket
        self.tokens = min(float(self.spec.burst), self.tokens + elapsed * self.spec.per_second)
        self.updated = now

    def empty(self, now: float) -> bool:
        """(shared) The store's bucket is known to hold no whole token at ``now``."""
        return now - self.empty_at < self.empty_wait

    def idle(self, now: float) -> bool:
        """Full again (shared: holding no token) and nothing left to audit: the same as having no bucket."""
        self.refill(now)
        full = self.tokens < 1.0 and not self.empty(now) if self.shared else self.tokens >= self.spec.burst
        return full and self.suppressed == 0 and now >= self.window_end


class RateLimiter:
    """The token buckets of every identity that posted recently."""

    def __init__(
        self,
        clock: Callable[[], float],
        audit: Audit,
        spec_of: Callable[[str], RateSpec | None],
        *,
        audit_window: float = 60.0,
        shared: RateBuckets | None = None,
    ) -> None:
        self._clock = clock
        self._audit = audit
        self._spec_of = spec_of
        self._audit_window = audit_window
        self._shared = shared
        """The store's buckets when replicas share it (None: the buckets are this process's own)."""
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()

    def __len__(self) -> int:
        """Buckets held (tests check that memory stays bounded)."""
        return len(self._buckets)

    def held(self, agent_id: str) -> int:
        """Whole tokens of ``agent_id`` this process holds now: its bucket's (shared buckets: those taken
        from the store and not spent or given back yet); 0 without a bucket."""
        bucket = self._buckets.get(agent_id)
        return math.floor(bucket.tokens) if bucket is not None else 0

    def take(self, agent_id: str, channel_id: str, event_type: str) -> bool:
        """Take one token for an envelope ``agent_id`` originates; RateLimited (nothing taken) when none is left.

        Returns whether a token was taken (False: no rule limits ``agent_id``)."""
        spec = self._spec_of(agent_id)
        now = self._clock()
        self._evict_idle(now)
        if spec is None:
            self.forget(agent_id)
            return False
        bucket = self._bucket(agent_id, spec, now)
        if bucket.suppressed and now >= bucket.window_end:
            self._flush(agent_id, bucket)
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            bucket.used = time.monotonic()
            return True
        # Rounded up to the millisecond the metadata carries: a client that waits exactly
        # that long finds its token (rounding to nearest could advertise too short a wait, even 0).
        if bucket.shared:
            wait = max(bucket.empty_wait - (now - bucket.empty_at), 0.001)
        else:
            wait = (1.0 - bucket.tokens) / spec.per_second
        retry_after = math.ceil(wait * 1000.0 - 1e-6) / 1000.0  # (1e-6 ms: float noise, not a wait)
        self._refused(agent_id, bucket, channel_id, event_type, retry_after, now)
        raise RateLimited(
            f"you are over your rate limit of {spec.per_second:g} posts per second (burst {spec.burst}, "
            f"rule {spec.rule!r}); retry in {retry_after:.3f}s (the SDK backs off and retries by itself).",
            metadata={
                "retry_after_seconds": f"{retry_after:.3f}",
                "rule": spec.rule,
                "posts_per_second": f"{spec.per_second:g}",
                "burst": str(spec.burst),
            },
        )

    def _bucket(self, agent_id: str, spec: RateSpec, now: float) -> _Bucket:
        """``agent_id``'s bucket under ``spec``, refilled to ``now`` (made if it has none)."""
        bucket = self._buckets.get(agent_id)
        if bucket is None:
            bucket = self._buckets[agent_id] = _Bucket(spec, now, shared=self._shared is not None)
        else:
            self._buckets.move_to_end(agent_id)
            if bucket.spec != spec:  # the policy changed: keep the tokens, within the new burst
                bucket.spec = spec
            bucket.refill(now)
        return bucket

    async def prepare(self, agent_id: str, count: int = 1) -> None:
        """(shared buckets) Before ``count`` envelopes of ``agent_id`` are admitted: take tokens from the
        store's bucket unless this replica holds ``count`` already, so :meth:`take` finds them. A no-op
        when the buckets are this process's own, when no rule limits ``agent_id``, and while the store's
        bucket is known to be empty (the posts are then refused with the wait it gave). Raises
        UNAVAILABLE when the store does not answer."""
        shared = self._shared
        if shared is None:
            return
        spec = self._spec_of(agent_id)
        if spec is None:
            return
        now = self._clock()
        bucket = self._bucket(agent_id, spec, now)
        if bucket.tokens >= count or bucket.empty(now):
            return
        grant = min(spec.burst, max(1, math.ceil(spec.per_second * GRANT_SECONDS)))
        want = max(count - math.floor(bucket.tokens), grant)
        taken, wait = await shared.take(agent_id, want, spec.per_second, spec.burst, now)
        bucket = self._buckets.setdefault(agent_id, bucket)  # dropped while waiting: kept again
        bucket.tokens += taken
        bucket.used = time.monotonic()
        if bucket.tokens < count:
            bucket.empty_at, bucket.empty_wait = now, wait

    async def give_back_unspent(self) -> None:
        """(shared buckets) Return to the store the tokens this replica took and has not spent for
        :data:`HOLD_SECONDS`, so the identity's posts through other replicas can have them."""
        shared = self._shared
        if shared is None:
            return
        stale = time.monotonic() - HOLD_SECONDS
        for agent_id, bucket in list(self._buckets.items()):
            tokens = math.floor(bucket.tokens)
            if tokens < 1 or bucket.used > stale:
                continue
            bucket.tokens -= tokens
            try:
                await shared.give_back(agent_id, tokens, bucket.spec.per_second, bucket.spec.burst, self._clock())
            except Exception as exc:  # the tokens are lost: fewer posts admitted, never more
                log.warning("could not give %d rate tokens of %s back to the store: %s", tokens, agent_id, exc)

    async def give_back_loop(self) -> None:
        """:meth:`give_back_unspent` every half :data:`HOLD_SECONDS`, until cancelled."""
        while True:
            await asyncio.sleep(HOLD_SECONDS / 2)
            await self.give_back_unspent()

    def refund(self, agent_id: str, tokens: int = 1) -> None:
        """Give back ``tokens`` taken for envelopes of ``agent_id`` that were not stored after all.

        The bucket is refilled to now first and never rises above its ``burst``; an identity
        without a bucket (dropped as full, or forgotten) has nothing to get back."""
        bucket = self._buckets.get(agent_id)
        if bucket is not None:
            bucket.refill(self._clock())
            bucket.tokens = min(float(bucket.spec.burst), bucket.tokens + tokens)

    def forget(self, agent_id: str) -> None:
        """Drop an identity's bucket (it left, or no rule limits it any more), writing its pending count."""
        bucket = self._buckets.pop(agent_id, None)
        if bucket is not None and bucket.suppressed:
            self._flush(agent_id, bucket)

    def _refused(
        self, agent_id: str, bucket: _Bucket, channel_id: str, event_type: str, retry_after: float, now: float
    ) -> None:
        if now < bucket.window_end:
            bucket.suppressed += 1
            return
        bucket.window_end = now + self._audit_window
        bucket.subject = channel_id
        self._audit(
            "rate_limited",
            agent_id,
            channel_id,
            {
                "rule": bucket.spec.rule,
                "event_type": event_type,
                "retry_after_seconds": round(retry_after, 3),
                "posts_per_second": bucket.spec.per_second,
                "burst": bucket.spec.burst,
                "window_seconds": self._audit_window,
            },
        )

    def _flush(self, agent_id: str, bucket: _Bucket) -> None:
        """Write how many refusals the last audit window counted without auditing them one by one."""
        self._audit(
            "rate_limited",
            agent_id,
            bucket.subject,
            {"rule": bucket.spec.rule, "suppressed": bucket.suppressed, "window_seconds": self._audit_window},
        )
        bucket.suppressed = 0

    def _evict_idle(self, now: float) -> None:
        for _ in range(min(_EVICT_PER_CALL, len(self._buckets))):
            agent_id, oldest = next(iter(self._buckets.items()))
            if oldest.suppressed and now >= oldest.window_end:
                self._flush(agent_id, oldest)
            if not oldest.idle(now):
                return
            del self._buckets[agent_id]
