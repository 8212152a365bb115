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
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from hubsvc.governance.policy import RateSpec
from netkernel.errors import RateLimited

Audit = Callable[[str, str, str, dict[str, Any]], None]
"""``audit(kind, actor, subject, detail)``."""

_EVICT_PER_CALL = 2
"""Idle buckets examined for eviction per call (amortised: never a scan of every bucket)."""


class _Bucket:
    __slots__ = ("spec", "subject", "suppressed", "tokens", "updated", "window_end")

    def __init__(self, spec: RateSpec, now: float) -> None:
        self.tokens = float(spec.burst)
        self.updated = now
        self.spec = spec
        self.window_end = 0.0
        """Refusals before this time are counted, not audited one by one."""
        self.suppressed = 0
        self.subject = ""

    def refill(self, now: float) -> None:
        elapsed = max(0.0, now - self.updated)  # a clock that steps back never drains the bucket
        self.tokens = min(float(self.spec.burst), self.tokens + elapsed * self.spec.per_second)
        self.updated = now

    def idle(self, now: float) -> bool:
        """Full again and nothing left to audit: the same as having no bucket."""
        self.refill(now)
        return self.tokens >= self.spec.burst and self.suppressed == 0 and now >= self.window_end


class RateLimiter:
    """The token buckets of every identity that posted recently."""

    def __init__(
        self,
        clock: Callable[[], float],
        audit: Audit,
        spec_of: Callable[[str], RateSpec | None],
        *,
        audit_window: float = 60.0,
    ) -> None:
        self._clock = clock
        self._audit = audit
        self._spec_of = spec_of
        self._audit_window = audit_window
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()

    def __len__(self) -> int:
        """Buckets held (tests check that memory stays bounded)."""
        return len(self._buckets)

    def take(self, agent_id: str, channel_id: str, event_type: str) -> bool:
        """Take one token for an envelope ``agent_id`` originates; RateLimited (nothing taken) when none is left.

        Returns whether a token was taken (False: no rule limits ``agent_id``)."""
        spec = self._spec_of(agent_id)
        now = self._clock()
        self._evict_idle(now)
        if spec is None:
            self.forget(agent_id)
            return False
        bucket = self._buckets.get(agent_id)
        if bucket is None:
            bucket = self._buckets[agent_id] = _Bucket(spec, now)
        else:
            self._buckets.move_to_end(agent_id)
            if bucket.spec != spec:  # the policy changed: keep the tokens, within the new burst
                bucket.spec = spec
            bucket.refill(now)
        if bucket.suppressed and now >= bucket.window_end:
            self._flush(agent_id, bucket)
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return True
        # Rounded up to the millisecond the metadata carries: a client that waits exactly
        # that long finds its token (rounding to nearest could advertise too short a wait, even 0).
        retry_after = math.ceil((1.0 - bucket.tokens) / spec.per_second * 1000.0) / 1000.0
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
