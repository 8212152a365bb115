"""Post deadlines of a Connect stream (agentsdk/network/_deadlines.py): every post still waiting at
its own deadline fails with TimeoutError, none earlier, and answered posts are forgotten."""

from __future__ import annotations

import asyncio
from typing import Any

from agentsdk.network._deadlines import Deadlines


def expire(fut: asyncio.Future[Any]) -> None:
    if not fut.done():
        fut.set_exception(TimeoutError())


async def test_each_waiting_post_fails_at_its_own_deadline_and_answered_ones_never() -> None:
    loop = asyncio.get_running_loop()
    pending: dict[str, asyncio.Future[Any]] = {}
    deadlines = Deadlines(lambda: pending, expire)
    sent: dict[str, float] = {}
    failed: dict[str, float] = {}

    def post(request_id: str, timeout: float) -> None:
        fut = pending[request_id] = loop.create_future()
        sent[request_id] = loop.time()
        fut.add_done_callback(lambda f: failed.__setitem__(request_id, loop.time()) if f.exception() else None)
        deadlines.add(request_id, timeout)

    post("a", 0.3)
    post("answered", 0.3)
    post("short", 0.1)  # another timeout: its own queue
    pending.pop("answered").set_result("result")  # answered: the stream drops it from its table
    await asyncio.sleep(0)
    post("b", 0.3)
    post("long", 1.0)
    await asyncio.wait([pending[k] for k in ("a", "short", "b", "long")])
    assert set(failed) == {"a", "short", "b", "long"}
    for request_id, timeout in (("a", 0.3), ("short", 0.1), ("b", 0.3), ("long", 1.0)):
        assert failed[request_id] - sent[request_id] >= timeout - 0.01  # not early (loop clock granularity)
        assert isinstance(pending[request_id].exception(), TimeoutError)
    assert deadlines._queues == {} and deadlines._timers == {}  # nothing left behind


async def test_answered_posts_do_not_pile_up_behind_the_timer() -> None:
    loop = asyncio.get_running_loop()
    pending: dict[str, asyncio.Future[Any]] = {}
    deadlines = Deadlines(lambda: pending, expire)
    for i in range(10_000):
        pending[str(i)] = loop.create_future()
        deadlines.add(str(i), 30.0)
        pending.pop(str(i)).set_result(None)  # answered in order, as the hub answers them
    assert len(deadlines._queues[30.0]) <= 1
    deadlines.cancel()
    assert deadlines._timers == {} and deadlines._queues == {}
