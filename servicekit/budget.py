"""A byte budget shared by concurrent requests: how much a server holds for them at once.

A request that would load ``n`` bytes (a knowledge file being read) first holds ``n`` of the
budget; when the budget is spent it waits, in arrival order, until earlier holders release
theirs. So N concurrent reads of big files use at most the budget, not N × the file size.
A request bigger than the whole budget is admitted alone (it waits until nothing else is
held), so it still runs; the per-response limit is what refuses truly oversized reads.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class ByteBudget:
    """At most ``limit`` bytes held at once by :meth:`hold`; waiters are served first come, first served."""

    def __init__(self, limit: int) -> None:
        if limit <= 0:
            raise ValueError(f"a byte budget must be positive, not {limit}")
        self.limit = limit
        self.in_use = 0
        """Bytes held now."""
        self.peak = 0
        """Most bytes ever held at once (for operators and tests)."""
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()

    @asynccontextmanager
    async def hold(self, size: int) -> AsyncIterator[None]:
        """Hold ``size`` bytes (capped at the limit) for the body of the ``async with``."""
        size = max(0, min(size, self.limit))
        if self._waiters or self.in_use + size > self.limit:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append((size, fut))
            try:
                await fut
            except asyncio.CancelledError:
                if fut.done() and not fut.cancelled():  # granted as we were cancelled: give it back
                    self._release(size)
                else:
                    self._grant()  # we may have been the head blocking smaller waiters
                raise
        else:
            self._take(size)
        try:
            yield
        finally:
            self._release(size)

    def _take(self, size: int) -> None:
        self.in_use += size
        self.peak = max(self.peak, self.in_use)

    def _release(self, size: int) -> None:
        self.in_use -= size
        self._grant()

    def _grant(self) -> None:
        """Admit waiters from the head while they fit (a cancelled one is dropped)."""
        while self._waiters:
            size, fut = self._waiters[0]
            if fut.done():
                self._waiters.popleft()
                continue
            if self.in_use + size > self.limit:
                return
            self._waiters.popleft()
            self._take(size)
            fut.set_result(None)
