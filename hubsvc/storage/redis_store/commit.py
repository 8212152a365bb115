"""Running the commit script: its deadline in Redis's clock, its calls, and a single-slot commit.

A group of bundles is written by ONE call of ``lua/commit.lua`` (``EVALSHA``) naming every key it
touches (:class:`~hubsvc.storage.redis_store.plan.Plan` builds it): it first runs the checks; on
any mismatch it writes nothing and returns the conflict, which :func:`commit_group` raises as
:class:`~hubsvc.storage.base.StoreConflict` (the group is then retried one bundle at a time, so
only the conflicting bundle fails). Otherwise it appends the rows and updates last seq, the
idempotency index, the channel record and the global records, and last appends the group's
entry to the change feed. On one Redis server a script is atomic, so every bundle — channel and
global keys together — is all or nothing; on a Cluster every key of the hub is in one slot
(:mod:`hubsvc.storage.redis_store.keys`), so the same atomic script runs on that slot's master.

Every call carries a deadline, ``timeout`` after it is sent, in Redis's own clock
(:class:`RedisClock`): one that reaches a stalled Redis only after the store gave up on it (and
failed its callers) writes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, cast

import redis.exceptions

from hubsvc.storage.base import StoreUnconfirmed
from hubsvc.storage.group_commit import PartlyWritten
from hubsvc.storage.redis_connect import RedisClient
from hubsvc.storage.redis_store import scripts
from hubsvc.storage.redis_store.codec import text
from hubsvc.storage.redis_store.failures import StoreLate, conflict
from hubsvc.storage.redis_store.plan import Plan


class RedisClock:
    """Redis's clock as an offset from this host's monotonic clock (what a commit's deadline is in).

    ``home_node`` gives the arguments that send a keyless command (TIME) where the commit script
    runs."""

    def __init__(self, client: RedisClient, timeout: float, home_node: Callable[[], dict[str, Any]]) -> None:
        self._client = client
        self._timeout = timeout
        self._home_node = home_node
        self.offset_us = 0.0
        """Redis's clock minus this host's, in microseconds, as last measured (see :meth:`learn`)."""
        self.measured = False
        """Whether :attr:`offset_us` holds a measurement yet."""

    async def measure(self) -> None:
        """Measure Redis's clock against this host's monotonic clock with one TIME call."""
        sent = time.monotonic()
        seconds, micros = await self._client.time(**self._home_node())
        self.learn(seconds * 1_000_000 + micros, sent, time.monotonic())

    def learn(self, redis_us: int, sent: float, answered: float) -> None:
        """Learn Redis's clock (its TIME, read between ``sent`` and ``answered`` on this host's
        monotonic clock) as an offset from this host's monotonic clock.

        The deadline a commit carries is in Redis's clock, so the hosts' clocks need not agree
        and a step of this host's wall clock changes nothing: only the measurement's error
        (half a quick round trip) and the drift since the last commit count. A slow answer (a
        stall) is not used once the clock has been measured; a commit refused as late measures
        again. The first answer is used however slow it was: an offset off by half a slow round
        trip moves deadlines by that much, where no offset at all puts every deadline in the past."""
        if self.measured and answered - sent > min(0.1, self._timeout / 2):
            return
        self.offset_us = redis_us - (sent + answered) / 2 * 1_000_000
        self.measured = True

    def learn_from(self, result: Sequence[Any], sent: float) -> None:
        """Learn from a written commit's result ({1, seconds, microseconds}), sent at ``sent``."""
        self.learn(int(result[1]) * 1_000_000 + int(result[2]), sent, time.monotonic())

    def deadline(self) -> tuple[float, int]:
        """(now on this host's monotonic clock, the deadline of a script sent now in Redis's microseconds)."""
        sent = time.monotonic()
        return sent, int(sent * 1_000_000 + self.offset_us + self._timeout * 1_000_000)

    def redis_now(self) -> float:
        """Redis's clock now, in epoch seconds (as last measured)."""
        return (time.monotonic() * 1_000_000 + self.offset_us) / 1_000_000


class CommitScript:
    """``lua/commit.lua`` registered on one client: one call, a call followed by ``WAIT``, or a pipeline."""

    def __init__(self, client: RedisClient) -> None:
        self._client = client
        self._script = client.register_script(scripts.COMMIT)

    async def register(self) -> None:
        """Load the script on every master (pipelined calls use EVALSHA without a fallback)."""
        self._script.sha = text(await self._client.script_load(scripts.COMMIT))

    async def call(self, keys: Sequence[str], args: Sequence[Any]) -> list[Any]:
        """One call (loading the script first if Redis lost it)."""
        return cast("list[Any]", await self._script(keys=list(keys), args=list(args)))

    async def call_and_wait(
        self, keys: list[str], args: list[Any], replicas: int, wait_ms: int
    ) -> tuple[list[Any], int]:
        """Run the script and then ``WAIT`` for ``replicas`` replicas, on one connection in one round
        trip (a pipeline): WAIT counts the replicas holding every write of *its* connection. Returns
        the script's result and the number of replicas that confirmed."""
        for attempt in (1, 2):
            async with self._client.pipeline(transaction=False) as pipe:
                pipe.evalsha(self._script.sha, len(keys), *keys, *args)
                pipe.wait(replicas, wait_ms)
                try:
                    result, confirmed = cast("tuple[list[Any], int]", await pipe.execute())
                except redis.exceptions.NoScriptError:  # Redis restarted without it: nothing was written
                    if attempt == 2:
                        raise
                    await self.register()
                    continue
                return result, int(confirmed)
        raise AssertionError("unreachable")

    async def run_many(
        self,
        calls: Sequence[tuple[list[str], list[Any]]],
        errors: list[Exception | None] | None = None,
        bundles: Sequence[int] = (),
    ) -> list[Any]:
        """Run calls (KEYS, ARGV) in one pipeline; each result, or the exception of that call.

        If the pipeline as a whole fails (Redis did not answer) and ``errors`` is given, raise
        :class:`PartlyWritten` with that failure for the ``bundles`` (indexes into ``errors``) —
        some of their calls may have run; the others keep what ``errors`` says."""
        try:
            async with self._client.pipeline(transaction=False) as pipe:
                for keys, args in calls:
                    pipe.execute_command("EVALSHA", self._script.sha, len(keys), *keys, *args)
                results = await pipe.execute(raise_on_error=False)
        except Exception as exc:
            if errors is None:
                raise
            for i in bundles:
                errors[i] = exc
            raise PartlyWritten(errors) from exc
        if any(isinstance(r, redis.exceptions.NoScriptError) for r in results):
            await self.register()  # a node restarted or failed over: those calls wrote nothing
        return results


async def commit_group(
    plan: Plan, script: CommitScript, clock: RedisClock, *, wait_replicas: int, wait_ms: int
) -> None:
    """Write a plan of the single-slot layout with one script call; raise :class:`StoreConflict`
    (nothing written) on a conflict, :class:`StoreLate` past its deadline, :class:`StoreUnconfirmed`
    when fewer than ``wait_replicas`` replicas confirmed it within ``wait_ms`` (it is stored)."""
    sent, deadline = clock.deadline()
    args = [deadline, *plan.args()]
    confirmed = 0
    if wait_replicas:
        result, confirmed = await script.call_and_wait(plan.keys, args, wait_replicas, wait_ms)
    else:
        result = await script.call(plan.keys, args)
    if int(result[0]) == 2:
        await clock.measure()  # in case Redis's clock was stepped since the last measurement
        raise StoreLate(f"{text(result[1])}: Redis stalled longer than the --redis-timeout")
    if int(result[0]) != 1:
        raise conflict(result)
    clock.learn_from(result, sent)
    if confirmed < wait_replicas:
        raise StoreUnconfirmed(
            f"only {int(confirmed)} of the {wait_replicas} Redis replicas required "
            f"(--redis-wait-replicas) confirmed it within {wait_ms} ms"
        )
