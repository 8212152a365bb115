"""Giving the memory of large requests back to the system once they are done with.

A request of megabytes (a 15 MiB post the limits refuse, a large knowledge write) passes through
buffers of several sizes: gRPC's receive slices, the request's bytes, the parsed message, the
strings a check reads from it. All of it is freed when the call ends, but glibc's allocator keeps
freed memory in its arenas (gRPC's threads and the event loop each use their own, and a large
free raises the size below which later blocks come from the arenas instead of fresh mappings):
measured here, 20 refused 12 MiB posts took a hub from 88 to 537 MB RSS, of which the Python
heap held 12 MB and ``malloc_trim(0)`` returned all but 174 MB (about 140 ms for that much).
A bad-input probe grew a hub from 62 to 248 MB that way, and it stayed there.

:class:`HeapTrimmer` notes the size of every request (:mod:`servicekit.parse_guard` tells it);
once :data:`TRIM_DELAY` seconds passed without a request of at least :data:`LARGE_REQUEST_BYTES`
after one, it runs ``malloc_trim(0)`` on a worker thread: one trim per burst of large requests,
when their calls are over. Where glibc's ``malloc_trim`` does not exist (macOS, musl) it does nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
from collections.abc import Callable

LARGE_REQUEST_BYTES = 1 << 20
"""A request at least this large is followed by a trim."""
TRIM_DELAY = 2.0
"""Seconds after a large request before the trim (more large requests meanwhile share it)."""

log = logging.getLogger("agentnet.service")


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


class HeapTrimmer:
    """Trims the C heap a while after large requests (see the module doc)."""

    def __init__(self, trim: Callable[[int], int] | None, delay: float = TRIM_DELAY) -> None:
        self._trim = trim
        self._delay = delay
        self._due: asyncio.TimerHandle | None = None
        self._due_loop: asyncio.AbstractEventLoop | None = None
        """The loop ``_due`` runs on (an embedded hub's process may run several loops in turn)."""
        self._last = 0.0
        """When (loop time) the latest large request arrived."""
        self.trims = 0
        """Trims run so far."""

    def note(self, size: int) -> None:
        """A request of ``size`` bytes arrived (called on the event loop, for every request)."""
        if size < LARGE_REQUEST_BYTES or self._trim is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._last = loop.time()
        if self._due is None or self._due_loop is not loop:  # none yet, or armed on a loop now gone
            self._due_loop = loop
            self._due = loop.call_later(self._delay, self._start, loop)

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        quiet = loop.time() - self._last
        if quiet < self._delay:  # large requests still coming: trim once they stop
            self._due = loop.call_later(self._delay - quiet, self._start, loop)
            return
        self._due = None
        try:
            loop.run_in_executor(None, self._run).add_done_callback(_log_failure)
        except RuntimeError:  # the loop or its executor is shutting down: nothing left to trim for
            return

    def _run(self) -> None:
        assert self._trim is not None
        self._trim(0)
        self.trims += 1


def _log_failure(done: asyncio.Future[None]) -> None:
    if not done.cancelled() and done.exception() is not None:
        log.warning("could not trim the heap after a large request: %r", done.exception())


TRIMMER = HeapTrimmer(_malloc_trim())
"""The process's trimmer (every service of the process shares the heap)."""
