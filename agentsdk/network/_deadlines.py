"""Deadlines of the posts a Connect stream waits on, with one timer instead of one per post.

A post over the stream waits for its PostResult at most ``timeout`` seconds, then fails with
TimeoutError (as ``asyncio.wait_for`` would). A timer per post (``loop.call_later`` and its
``cancel``) cost the SDK's send path more than the rest of the post's bookkeeping together;
:class:`Deadlines` keeps the posts of one timeout in a queue in the order they were sent (so in
deadline order), forgets those answered as new ones arrive (posts are answered about in the order
they were sent), and arms a single timer for the oldest one still waiting. Every post still fails
at its own deadline; none earlier.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any


class Deadlines:
    """Fails the futures of ``pending`` (request id -> future) whose deadline passed.

    ``pending`` is the stream's table of posts awaiting a result: a request id no longer in it (or
    whose future is done) was answered or failed already, and its deadline is forgotten."""

    def __init__(
        self,
        pending: Callable[[], Mapping[str, asyncio.Future[Any]]],
        expire: Callable[[asyncio.Future[Any]], None],
    ) -> None:
        self._pending = pending
        self._expire = expire
        self._queues: dict[float, deque[tuple[float, str]]] = {}
        """timeout -> (deadline, request id) of the posts sent with it, oldest first."""
        self._timers: dict[float, asyncio.TimerHandle] = {}
        """timeout -> the timer armed for its oldest post."""

    def add(self, request_id: str, timeout: float) -> None:
        """Fail ``request_id``'s future ``timeout`` seconds from now unless it is done by then."""
        loop = asyncio.get_running_loop()
        queue = self._queues.get(timeout)
        if queue is None:
            queue = self._queues[timeout] = deque()
        else:
            self._forget_answered(queue)
        queue.append((loop.time() + timeout, request_id))
        if timeout not in self._timers:
            self._timers[timeout] = loop.call_at(queue[0][0], self._fire, timeout)

    def _forget_answered(self, queue: deque[tuple[float, str]]) -> None:
        """Drop the posts at the front of ``queue`` that are no longer waiting."""
        pending = self._pending()
        while queue:
            fut = pending.get(queue[0][1])
            if fut is not None and not fut.done():
                return
            queue.popleft()

    def _fire(self, timeout: float) -> None:
        """The oldest post of ``timeout`` reached its deadline: fail every post past its own, rearm."""
        del self._timers[timeout]
        queue = self._queues[timeout]
        loop = asyncio.get_running_loop()
        now = loop.time()
        pending = self._pending()
        while queue and queue[0][0] <= now:
            _, request_id = queue.popleft()
            fut = pending.get(request_id)
            if fut is not None:
                self._expire(fut)
        self._forget_answered(queue)
        if queue:
            self._timers[timeout] = loop.call_at(queue[0][0], self._fire, timeout)
        else:
            del self._queues[timeout]

    def cancel(self) -> None:
        """Forget every deadline (the stream stopped)."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._queues.clear()
