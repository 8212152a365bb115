"""The deliveries of one channel waiting for the stream's worker of that channel (:mod:`agentsdk.network._delivery`)."""

from __future__ import annotations

import asyncio
from collections import deque

from agentnet.v1 import connect_pb2

Item = tuple[connect_pb2.Delivery, int, bool]
"""A delivery waiting for its channel's worker: (delivery, its size in bytes, read back for a pending turn)."""


class ChannelQueue:
    """The deliveries of one channel waiting for its worker (what an ``asyncio.Queue`` would do for
    one consumer and no bound, without a coroutine per ``get`` and an Event per ``put``)."""

    __slots__ = ("items", "waiter")

    def __init__(self) -> None:
        self.items: deque[Item] = deque()
        self.waiter: asyncio.Future[None] | None = None
        """Set while the worker waits for the next delivery."""

    def put(self, item: Item) -> None:
        """Queue ``item`` and wake the worker if it waits."""
        self.items.append(item)
        waiter = self.waiter
        if waiter is not None:
            self.waiter = None
            if not waiter.done():
                waiter.set_result(None)
