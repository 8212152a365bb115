"""grpc.aio's log of a response it could not send to a client that went away: DEBUG, not an ERROR.

A server stream's handler yields its frames; grpc.aio sends each one. When the client cancels the
stream (or its connection closes) while a send is under way — a client that stopped reading, then
gave up, is the usual case — that send fails with ``ExecuteBatchError``. grpc.aio ignores the
failure when it has already seen the cancellation, but the two arrive from separate callbacks: when
the failed send comes first it logs ``ExecuteBatchError raised in core by servicer method [...]``
with a traceback at ERROR (logger ``grpc._cython.cygrpc``), for what is an expected end of a
stream, and nothing of ours is wrong.

:func:`quiet_client_departures` installs a filter on that logger which turns exactly that record —
an ``ExecuteBatchError`` of a *send message* operation, i.e. a response the peer is no longer there
to take — into one DEBUG line of ``agentnet.service``. Every other record (a failed status send, an
exception a handler raised, any other logger) passes unchanged.
"""

from __future__ import annotations

import logging

GRPC_LOGGER = "grpc._cython.cygrpc"
"""The logger grpc.aio's server reports handler failures on."""
_PREFIX = "ExecuteBatchError raised in core by servicer method"

log = logging.getLogger("agentnet.service")


class ClientDepartureFilter(logging.Filter):
    """Drops grpc.aio's ERROR record of a response send that failed because the client went away,
    logging it at DEBUG instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        """False (and a DEBUG line) for a failed response send; True for everything else."""
        exc = record.exc_info[1] if record.exc_info else None
        if (
            exc is None
            or type(exc).__name__ != "ExecuteBatchError"
            or "SendMessageOperation" not in str(exc)
            or not str(record.msg).startswith(_PREFIX)
        ):
            return True
        method = str(record.msg)[len(_PREFIX) :].strip(" []")
        log.debug("a response of %s was not sent: the client cancelled the stream or its connection closed", method)
        return False


def quiet_client_departures() -> None:
    """Install :class:`ClientDepartureFilter` on grpc.aio's server logger (once per process)."""
    logger = logging.getLogger(GRPC_LOGGER)
    if not any(isinstance(f, ClientDepartureFilter) for f in logger.filters):
        logger.addFilter(ClientDepartureFilter())
