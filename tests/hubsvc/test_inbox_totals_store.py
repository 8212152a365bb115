"""The Redis store's shared inbox counts (``P{g}:inbox:<replica id>``, docs/governance.md "Inbox caps"):
what one replica publishes the others sum, 0 removes a count, a clean stop withdraws them, and a Redis
that does not answer fails the read with UNAVAILABLE (``store_unreachable``), which refuses the post.

Two stores on their own redis-server (frozen with SIGSTOP in the last step, so not the session's).
"""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from hubsvc.storage.redis_store import RedisHubStore
from netkernel.errors import Unavailable
from tests.hubsvc.test_redis_stall import GIVE_UP, own_redis
from tests.redis_server import RedisServer

__all__ = ["own_redis"]  # the fixture this module's tests use

PARTITIONS = 8
TTL = 30.0
"""The liveness keys' and published counts' time to live (longer than the test)."""


async def test_counts_published_by_one_replica_are_summed_by_the_others(own_redis: RedisServer) -> None:
    one, two = (RedisHubStore(own_redis.url(), prefix="inbox:", partitions=PARTITIONS, timeout=0.5) for _ in "12")
    for store in (one, two):
        await store.open()
        await store.liveness.beat(TTL)
    frozen = False
    try:
        mine, theirs = one.inbox_totals, two.inbox_totals
        assert mine is not None and theirs is not None
        assert await mine.publish({"bob": 2, "dan": 1}, TTL) is False  # nothing was kept before: all sent
        assert await theirs.elsewhere(["bob", "dan", "eve"]) == {"bob": 2, "dan": 1, "eve": 0}
        assert await mine.elsewhere(["bob"]) == {"bob": 0}  # a replica's own counts are not elsewhere
        assert await theirs.publish({"bob": 1}, TTL) is False
        assert await mine.elsewhere(["bob"]) == {"bob": 1}
        assert await mine.publish({"bob": 0}, TTL) is True  # 0 removes the count; the rest is kept
        assert await theirs.elsewhere(["bob", "dan"]) == {"bob": 0, "dan": 1}
        await mine.withdraw()  # a clean stop
        assert await theirs.elsewhere(["dan"]) == {"dan": 0}

        os.kill(own_redis.proc.pid, signal.SIGSTOP)
        frozen = True
        with pytest.raises(Unavailable) as refused:
            await asyncio.wait_for(theirs.elsewhere(["bob"]), GIVE_UP)
        assert refused.value.metadata["cause"] == "store_unreachable"
    finally:
        if frozen:
            os.kill(own_redis.proc.pid, signal.SIGCONT)
        for store in (one, two):
            await store.close()
