"""What the Redis store raises when Redis does not answer or a script refuses a commit."""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, ParamSpec, TypeVar

import redis.exceptions

from hubsvc.storage.base import Fenced, LimitConflict, StoreConflict
from hubsvc.storage.redis_settings import StoreUnreachable
from hubsvc.storage.redis_store.codec import text
from netkernel.errors import Unavailable

__all__ = ["UNREACHABLE", "StoreLate", "StoreUnreachable", "read"]


class StoreLate(Exception):
    """A commit script ran after its deadline (the hub had given up waiting); it wrote nothing."""


UNREACHABLE = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    StoreLate,
    redis.exceptions.ClusterDownError,  # a Cluster whose master of the hub's slot failed, until a replica takes over
    redis.exceptions.RedisClusterException,  # a Cluster none of whose nodes answers
)
"""What a Redis that does not answer (in time) raises: the store's failures no bundle causes."""

_R = TypeVar("_R")
_P = ParamSpec("_P")


def unavailable(exc: Exception) -> Unavailable:
    """The client-facing error of a read Redis did not answer."""
    err = Unavailable(
        f"the hub's store (Redis) did not answer ({type(exc).__name__}); nothing was changed — retry.",
        metadata={"cause": "store_unreachable"},
    )
    err.__cause__ = exc
    return err


def read(fn: Callable[_P, Coroutine[Any, Any, _R]]) -> Callable[_P, Coroutine[Any, Any, _R]]:
    """A read that fails with UNAVAILABLE (not a bug's INTERNAL) when Redis does not answer in time.

    A read whose connection broke (the pool's connection to a Redis that has restarted since
    it was last used) is tried once more, on a new connection: reads change nothing. Writes
    are never retried this way: a commit script whose reply was lost may have run."""

    @functools.wraps(fn)
    async def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            try:
                return await fn(*args, **kwargs)
            except redis.exceptions.ConnectionError:
                return await fn(*args, **kwargs)
        except UNREACHABLE as exc:
            raise unavailable(exc) from exc

    return wrapper


def conflict(result: Sequence[Any]) -> StoreConflict:
    """The conflict a commit script reported ({0, reason}; for a holder's limit {4, reason, held}; for a
    partition lease lost {5, reason, partition})."""
    if int(result[0]) == 4:
        return LimitConflict(text(result[1]), int(result[2]))
    if int(result[0]) == 5:
        return Fenced(text(result[1]), int(result[2]))
    return StoreConflict(text(result[1]))


def outcome(result: Any) -> Exception | None:
    """The failure a commit script call's result means (None: written, or applied before)."""
    if isinstance(result, Exception):
        return result
    code = int(result[0])
    if code in (1, 3):
        return None
    if code == 2:
        return StoreLate(f"{text(result[1])}: Redis stalled longer than the --redis-timeout")
    return conflict(result)
