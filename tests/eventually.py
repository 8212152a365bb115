"""Wait for a condition instead of sleeping a guessed time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from netkernel.errors import AgentNetError

DEFAULT_TIMEOUT = 20.0
"""Seconds a condition may take by default: generous, because a test waits only as long as the
condition takes, and three pytest workers with their hubs share two cores in ``make test``."""


async def assert_eventually(check: Callable[[], Any], timeout: float = DEFAULT_TIMEOUT, interval: float = 0.02) -> Any:
    """Poll ``check`` (sync or async) until it returns truthy without raising."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: BaseException | None = None
    while loop.time() < deadline:
        try:
            value = check()
            if asyncio.iscoroutine(value):
                value = await value
            if value:
                return value
        except (AssertionError, AgentNetError) as exc:
            last = exc
        await asyncio.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s: {last!r}")
