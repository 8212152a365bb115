"""In-process fan-out of ChangeEvents to ``on_change`` subscribers.

Each subscription gets its own queue and delivery task, so a slow callback
never blocks the store or other subscribers, and events reach each callback in
the order they were published.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging

from knowledgestore.paths import is_under, normalize_path
from knowledgestore.types import ChangeCallback, ChangeEvent, Subscription

log = logging.getLogger("agentnet.knowledge")


async def deliver(callback: ChangeCallback, event: ChangeEvent) -> None:
    """Invoke a sync or async callback; its exceptions are logged, never raised to the store."""
    try:
        result = callback(event)
        if inspect.isawaitable(result):
            await result
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("on_change callback %r failed for %s", callback, event)


async def stop_task(task: asyncio.Task[None]) -> None:
    """Cancel ``task`` and wait for it, unless called from inside it (a callback cancelling itself)."""
    task.cancel()
    if task is asyncio.current_task():
        return
    with contextlib.suppress(asyncio.CancelledError):
        await task


class _Subscriber:
    def __init__(self, feed: ChangeFeed, prefix: str, callback: ChangeCallback) -> None:
        self.feed = feed
        self.prefix = prefix
        self.callback = callback
        self.queue: asyncio.Queue[ChangeEvent] = asyncio.Queue()
        self.task = asyncio.get_running_loop().create_task(self._run(), name=f"on_change {prefix}")

    async def _run(self) -> None:
        while True:
            event = await self.queue.get()
            await deliver(self.callback, event)

    async def cancel(self) -> None:
        self.feed._subscribers.pop(self, None)
        await stop_task(self.task)


class ChangeFeed:
    """Publishes ChangeEvents to the subscriptions whose prefix covers the path.

    Must be used from the event loop thread (other threads hand events over with
    ``loop.call_soon_threadsafe(feed.publish, event)``).
    """

    def __init__(self) -> None:
        # subscriber -> the handle given to the caller, so close() can mark it inactive
        self._subscribers: dict[_Subscriber, Subscription] = {}

    def __len__(self) -> int:
        return len(self._subscribers)

    def publish(self, event: ChangeEvent) -> None:
        """Queue ``event`` for every matching subscriber."""
        for subscriber in self._subscribers:
            if is_under(event.path, subscriber.prefix):
                subscriber.queue.put_nowait(event)

    def subscribe(self, prefix: str, callback: ChangeCallback) -> Subscription:
        """Register ``callback`` for changes at or under ``prefix`` (normalised; "/" = everything)."""
        subscriber = _Subscriber(self, normalize_path(prefix), callback)
        subscription = Subscription(subscriber.cancel)
        self._subscribers[subscriber] = subscription
        return subscription

    async def close(self) -> None:
        """Cancel every subscription."""
        for subscription in list(self._subscribers.values()):
            await subscription.cancel()
