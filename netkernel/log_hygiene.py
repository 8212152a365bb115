"""What third-party libraries may write into our logs.

aiosqlite logs every statement it runs, with its parameters, at DEBUG: at
``--log-level DEBUG`` a store would write credential hashes, every envelope
(A2A dispatches, private messages) and agents' memory into the log. The stores
mute those records; the library's INFO and above still get through.
"""

from __future__ import annotations

import logging

PARAMETER_ECHOING_LOGGERS = ("aiosqlite",)
"""Loggers that write the data our stores hand them (statement parameters) at DEBUG."""


class _DropDebug(logging.Filter):
    """Let through only records above DEBUG."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno > logging.DEBUG


def mute_parameter_echo() -> None:
    """Drop the DEBUG records of :data:`PARAMETER_ECHOING_LOGGERS` (idempotent)."""
    for name in PARAMETER_ECHOING_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropDebug) for f in logger.filters):
            logger.addFilter(_DropDebug())
