"""Stopping background tasks when a library may swallow a cancellation.

On Python 3.11, ``asyncio.wait_for`` returns its inner call's result when that call completes
in the same loop iteration as the caller is cancelled, and the cancellation is lost (fixed in
3.12). redis-py sends every command through ``wait_for`` when a socket timeout is set, so a
background loop cancelled while it talks to Redis can go on to its next sleep as if nothing
happened, and a stop that awaits it waits forever. :func:`cancel_and_wait` cancels again until
the tasks end, within a bound.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

log = logging.getLogger("agentnet.tasks")

RECANCEL_SECONDS = 0.1
"""How often a task that is still running after its cancellation is cancelled again."""


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any]], timeout: float = 5.0) -> set[asyncio.Task[Any]]:
    """Cancel ``tasks`` and wait up to ``timeout`` seconds for them to end, cancelling those still
    running again every :data:`RECANCEL_SECONDS`. Returns the tasks still running (logged).

    A task that ended with an exception other than its cancellation is logged, not raised: the
    stop goes on with the rest.
    """
    tasks = list(tasks)
    pending = {task for task in tasks if not task.done()}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while pending:
        for task in pending:
            task.cancel()
        left = deadline - loop.time()
        if left <= 0:
            break
        _, pending = await asyncio.wait(pending, timeout=min(RECANCEL_SECONDS, left))
    for task in tasks:
        if task.done() and not task.cancelled() and task.exception() is not None:
            log.warning("background task %s ended with %r", task.get_name(), task.exception())
    if pending:
        log.warning(
            "background tasks still running %g s after their cancellation: %s",
            timeout,
            ", ".join(sorted(task.get_name() for task in pending)),
        )
    return pending
