"""A stalled Redis (SIGSTOP) fails the hub's writes and reads with UNAVAILABLE instead of blocking them;
a commit that reaches Redis after its deadline (in Redis's clock, whatever this host's says) writes nothing.

Each test freezes its own redis-server (not the session's, which other tests share).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from agentsdk.operator import OperatorClient
from hubsvc.server import start_hub
from hubsvc.storage import Writes
from hubsvc.storage.redis_store import RedisHubStore
from hubsvc.storage.redis_store.commit import RedisClock
from netkernel.errors import Unavailable
from tests.eventually import assert_eventually
from tests.hubsvc.test_redis_store import channel, dump, row
from tests.redis_server import RedisServer, start_redis_server

GIVE_UP = 60.0
"""Bound on waiting for a call that must fail by itself: without a Redis timeout it would hang."""


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = start_redis_server(tmp_path / "redis")
    try:
        yield server
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)  # a stopped process ignores SIGTERM until continued
        server.stop()


async def evalsha_calls(client: aioredis.Redis) -> int:
    """How many EVALSHA calls the server has run (a refused late script counts too)."""
    stats = await client.info("commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


async def ran_since(client: aioredis.Redis, scripts: int) -> None:
    """Return once the server has run one more EVALSHA than ``scripts``."""
    for _ in itertools.count():  # polls Redis's own counter: there is nothing to subscribe to
        if await evalsha_calls(client) > scripts:
            return
        await asyncio.sleep(0.01)


async def test_a_commit_and_a_read_on_a_frozen_redis_fail_unavailable_and_write_nothing(
    own_redis: RedisServer,
) -> None:
    store = RedisHubStore(own_redis.url(), prefix="stall:", timeout=0.5)
    await store.open()
    observer = aioredis.Redis.from_url(own_redis.url())
    try:
        await store.commit(Writes(channels=[channel("c1", "a1"), channel("c2", "a1")], wal=[row("c1", 1)]))
        before = await dump(observer)
        scripts = await evalsha_calls(observer)

        os.kill(own_redis.proc.pid, signal.SIGSTOP)
        # Queued together: one script call that Redis, frozen, does not answer.
        one = store.submit(Writes(wal=[row("c1", 2)]))
        two = store.submit(Writes(wal=[row("c2", 1)]))
        results = await asyncio.wait_for(asyncio.gather(one, two, return_exceptions=True), GIVE_UP)
        for failed in results:
            assert isinstance(failed, Unavailable), failed
            assert failed.metadata["cause"] == "store_write_failed"
        with pytest.raises(Unavailable) as read:
            await asyncio.wait_for(store.get_channel("c1"), GIVE_UP)
        assert read.value.metadata["cause"] == "store_unreachable"
        # Both channels are fenced: a later write is refused without reaching Redis.
        with pytest.raises(Unavailable, match="earlier write to channel 'c1' failed"):
            await store.commit(Writes(wal=[row("c1", 2)]))
        os.kill(own_redis.proc.pid, signal.SIGCONT)

        # The timed-out script still sat in Redis's socket buffer: once it has run (refusing, past
        # its deadline), Redis holds exactly what it held before the freeze.
        await asyncio.wait_for(ran_since(observer, scripts), GIVE_UP)
        assert await dump(observer) == before

        # The store works again once the channels' fences are lifted.
        await store.lift_fence("c1")
        await store.lift_fence("c2")
        await store.commit(Writes(wal=[row("c1", 2)]))
        await store.commit(Writes(wal=[row("c2", 1)]))
        assert len(await store.read_wal("c1", 0, 0, 0)) == 2 and len(await store.read_wal("c2", 0, 0, 0)) == 1
    finally:
        await observer.aclose()
        await store.close()


async def test_a_step_of_redis_clock_fails_one_commit_then_the_offset_is_measured_again(
    own_redis: RedisServer,
) -> None:
    store = RedisHubStore(own_redis.url(), prefix="step:", timeout=0.5)
    await store.open()
    observer = aioredis.Redis.from_url(own_redis.url())
    try:
        await store.commit(Writes(channels=[channel("c1", "a1")], wal=[row("c1", 1)]))
        before = await dump(observer)
        # As if Redis's clock had been stepped an hour forward since the store measured it: the next
        # deadline lies in Redis's past, so that script refuses itself; the store then measures again.
        store._clock.offset_us -= 3600 * 1_000_000
        with pytest.raises(Unavailable) as late:
            await store.commit(Writes(wal=[row("c1", 2)]))
        assert late.value.metadata["cause"] == "store_write_failed"
        assert await dump(observer) == before
        await store.lift_fence("c1")
        await store.commit(Writes(wal=[row("c1", 2)]))
        assert len(await store.read_wal("c1", 0, 0, 0)) == 2
    finally:
        await observer.aclose()
        await store.close()


async def test_the_first_measurement_of_redis_clock_is_used_however_slow_and_later_slow_ones_are_not() -> None:
    clock = RedisClock(aioredis.Redis(), 0.5, dict)  # learn() reads no Redis: the client never connects
    clock.learn(10_000_000, sent=1.0, answered=2.0)  # a 1 s answer (a loaded host), the first one
    assert clock.measured and clock.offset_us == pytest.approx(10_000_000 - 1.5e6)
    clock.learn(99_000_000, sent=3.0, answered=4.0)  # a stall once measured: not used
    assert clock.offset_us == pytest.approx(10_000_000 - 1.5e6)
    clock.learn(20_000_000, sent=5.0, answered=5.01)  # a quick answer: used
    assert clock.offset_us == pytest.approx(20_000_000 - 5.005e6)


def test_the_timeout_must_be_positive() -> None:
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="Redis timeout must be a positive number"):
            RedisHubStore("redis://127.0.0.1:6379/0", timeout=bad)


async def test_get_status_says_when_the_store_does_not_answer(own_redis: RedisServer, tmp_path: Path) -> None:
    server = await start_hub(RedisHubStore(own_redis.url(), prefix="status:", timeout=0.5), operator_token="op")
    try:
        async with OperatorClient(server.target, "op") as operator:
            assert (await operator.status()).store_healthy
            os.kill(own_redis.proc.pid, signal.SIGSTOP)
            status = await asyncio.wait_for(operator.status(), GIVE_UP)
            # Still answered (from memory), and it says the store does not answer.
            assert not status.store_healthy and status.store_error
            assert status.store_kind == "redis" and status.version
            os.kill(own_redis.proc.pid, signal.SIGCONT)
            await assert_eventually(lambda: _healthy(operator))
    finally:
        os.kill(own_redis.proc.pid, signal.SIGCONT)
        await server.stop(0.5)


async def _healthy(operator: OperatorClient) -> bool:
    return (await operator.status()).store_healthy
