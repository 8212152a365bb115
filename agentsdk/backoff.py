"""Backing off when the hub says RATE_LIMITED: the SDK's one retry helper for calls that post.

The hub refuses an envelope over its sender's rate limit with ``RATE_LIMITED`` and
metadata ``retry_after_seconds`` (when its next token arrives); the refused call changed
nothing, so it is safe to send again. :func:`retry_rate_limited` waits that long (plus
jitter, so identities refused together do not retry in lockstep) and retries, within a
bound (:class:`RateLimitBackoff`: attempts and total wait), then raises
:class:`~netkernel.errors.RateLimited`. Every SDK call that posts uses it: ``PostEnvelope``,
posts over the ``Connect`` stream, ``OpenChannel`` (its message), ``CallTool`` (say,
delegate, channels(open)) and ``InvokeAgent``.

``INBOX_FULL`` is never retried here: it says a *recipient* is behind, which waiting a
fixed time does not fix (it frees up only when that recipient acknowledges what waits
for it, or the channel ends) — the caller decides: post later, address someone else, or
give up. docs/governance.md "Rate limits" and "Inbox caps".
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from netkernel.errors import RateLimited

T = TypeVar("T")

__all__ = ["NO_RETRY", "RateLimitBackoff", "retry_rate_limited"]


@dataclass(frozen=True)
class RateLimitBackoff:
    """How long the SDK keeps retrying a post refused with RATE_LIMITED."""

    max_attempts: int = 5
    """Attempts in all, the first included (1 = never retry)."""
    max_wait_seconds: float = 30.0
    """Longest total time spent waiting between attempts; a wait that would pass it is not started."""
    jitter: float = 0.25
    """Each wait is ``retry_after_seconds * (1 + uniform(0, jitter))``."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if not (self.max_wait_seconds >= 0 and math.isfinite(self.max_wait_seconds)):
            raise ValueError("max_wait_seconds must be finite and not negative")
        if not 0 <= self.jitter <= 10:
            raise ValueError("jitter must be in [0, 10]")


NO_RETRY = RateLimitBackoff(max_attempts=1)
"""Raise RATE_LIMITED at once."""


def retry_after(err: RateLimited) -> float | None:
    """The hub's ``retry_after_seconds`` (None when the refusal carries none: not the hub's rate limit)."""
    try:
        seconds = float(err.metadata["retry_after_seconds"])
    except (KeyError, ValueError):
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


async def retry_rate_limited(
    attempt: Callable[[], Awaitable[T]], policy: RateLimitBackoff, *, refused: RateLimited | None = None
) -> T:
    """``await attempt()``, retried after the hub's ``retry_after_seconds`` while ``policy`` allows.

    ``refused``: the caller made the first attempt itself and it was refused with this error (a
    caller's fast path); the retries go on from there, counted as if made here."""
    waited = 0.0
    attempts = 0
    while True:
        attempts += 1
        try:
            if refused is None:
                return await attempt()
            first, refused = refused, None
            raise first  # handled below like any refused attempt
        except RateLimited as err:
            base = retry_after(err)
            if base is None or attempts >= policy.max_attempts:
                raise
            delay = base * (1.0 + random.uniform(0.0, policy.jitter))
            if waited + delay > policy.max_wait_seconds:
                raise
            waited += delay
            await asyncio.sleep(delay)
