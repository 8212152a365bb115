"""Group commit with per-bundle failure and channel fences, independent of the backend.

:class:`GroupCommitStore` implements :meth:`HubStore.submit` and :meth:`HubStore.lift_fence`
(see their contract in :mod:`hubsvc.storage.base`) over one abstract method, :meth:`_apply`,
which writes a list of bundles atomically or raises. A single writer task drains every
bundle queued at that moment into one ``_apply`` call, then resolves the callers in order.
If that call fails, the bundles are written again one per call, so only the failing
bundle's caller sees the failure and its channels are fenced (a backend that writes bundles
separately says which failed instead, :class:`PartlyWritten`). A bundle that lost a race to
another replica (the backend raised :class:`StoreConflict`) fails with :class:`LostRace`, and
so do the fenced bundles after it: nothing of them was written, so they may be admitted again.
A bundle refused because this replica no longer holds the lease of its channel's partition (the
backend raised :class:`~hubsvc.storage.base.Fenced`, a :class:`StoreConflict`) fails with
:class:`~netkernel.errors.PartitionMoved` instead (UNAVAILABLE, cause ``partition_moved``: not
re-admitted here, the new owner takes it), and so do its channel's bundles after it; the group's
other bundles, fenced or not, are written one at a time as for any conflict.
Cursor-only bundles
(advisory) are written after the other bundles of their group are answered. A bundle
submitted while the writer is idle with nothing queued would be a group of one: a backend
may write it at once instead (:meth:`GroupCommitStore._apply_now`), saving the writer's
wake-up; it fails and fences exactly as that group would.

:class:`~hubsvc.storage.sqlite.SqliteHubStore` and
:class:`~hubsvc.storage.redis_store.RedisHubStore` both write through it.
"""

from __future__ import annotations

import abc
import asyncio
import logging
import time
from dataclasses import dataclass, field

from hubsvc.recorder import NO_RECORDER, Recorder
from hubsvc.storage.base import (
    WRITE_FAILED,
    AtLimit,
    AuditBell,
    Fenced,
    HubStore,
    LimitConflict,
    StoreConflict,
    StoreUnconfirmed,
    Writes,
)
from netkernel.errors import PARTITION_MOVED, LostRace, PartitionMoved, Unavailable

log = logging.getLogger("agentnet.hub.storage")

LOST_RACE = "lost_race"
"""Why a bundle failed when another replica's write got there first (its channel's later bundles too)."""

MAX_GROUP = 2000
"""Bundles merged into one ``_apply`` call at most."""


class GroupCommitStore(HubStore):
    """A :class:`HubStore` whose writes go through one group-committing writer task."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[_Item] = asyncio.Queue()
        self._writer: asyncio.Task[None] | None = None
        self._fenced: dict[str, str] = {}
        """Channels whose last write failed (→ why: ``lost_race``, ``partition_moved`` or ``store_write_failed``);
        their later bundles fail the same way until lift_fence."""
        self._idle = False
        """The writer waits for a bundle (none is being written)."""
        self.recorder: Recorder = NO_RECORDER
        """Told each group's size and commit time, and each bundle that was not written (hubsvc/metrics.py)."""
        self.audit_bell = AuditBell()
        """Rung after a committed bundle holding audit records (OperatorService.FollowAudit waits on it)."""

    @property
    def write_queue(self) -> int:
        """Bundles queued for the writer and not yet taken into a group."""
        return self._queue.qsize()

    @abc.abstractmethod
    async def _apply(self, group: list[Writes]) -> None:
        """Write the bundles, in order, all or nothing; raise (having written nothing) on failure."""

    def _retry_alone(self, exc: Exception) -> bool:
        """Whether a group that failed with ``exc`` is written again one bundle per call.

        True by default (one bundle may be at fault); a backend returns False for a failure
        that no bundle causes (the store did not answer), so each bundle is not tried again.
        """
        return True

    def _start_writer(self) -> None:
        """Start the writer task (call from ``open``)."""
        self._writer = asyncio.create_task(self._write_loop(), name="hub-store-writer")

    async def _stop_writer(self) -> None:
        """Let the writer write everything queued (cursors included), then end it (call from ``close``).

        The writer ends at a stop marker rather than by cancellation: cancelling it in the middle
        of a store call would cut that write short (and a client library may swallow the
        cancellation, leaving the task waiting forever).
        """
        writer = self._writer
        if writer is None:
            return
        if not writer.done():
            self._enqueue(_Item(Writes(), stop=True))
        await writer
        self._writer = None

    def _apply_now(self, writes: Writes) -> bool:
        """Write one bundle synchronously if the backend can do so cheaply now; True if written,
        False to queue it (raise, having written nothing, on failure). False by default."""
        return False

    def submit(self, writes: Writes) -> asyncio.Future[None]:
        """Enqueue ``writes``; the future resolves when its group is committed.

        With the writer idle and nothing queued, the bundle would be a group of its own, so the
        backend may write it at once (:meth:`_apply_now`): same transaction, one hop less."""
        item = _Item(writes)
        if self._idle and self._queue.empty() and not writes.only_cursors() and self._commit_now(item):
            return item.fut
        return self._enqueue(item)

    def _commit_now(self, item: _Item) -> bool:
        """:meth:`_commit_run` of ``item`` alone, synchronously; False if the backend declined."""
        if self._refuse_fenced(item):
            return True
        started = time.perf_counter()
        try:
            if not self._apply_now(item.writes):
                return False
        except Exception as exc:
            self._fail(item, exc)
            return True
        self.recorder.committed(self.kind, 1, time.perf_counter() - started)
        self._committed(item)
        return True

    def lift_fence(self, channel_id: str) -> asyncio.Future[None]:
        """Enqueue the end of ``channel_id``'s fence (see :meth:`HubStore.submit`)."""
        return self._enqueue(_Item(Writes(), unfence=channel_id))

    def _enqueue(self, item: _Item) -> asyncio.Future[None]:
        if self._writer is None:
            raise RuntimeError(f"{type(self).__name__} is not open")
        self._queue.put_nowait(item)
        return item.fut

    async def _write_loop(self) -> None:
        while True:
            self._idle = True
            try:
                group = [await self._queue.get()]
            finally:
                self._idle = False
            while len(group) < MAX_GROUP and not self._queue.empty():
                group.append(self._queue.get_nowait())
            run: list[_Item] = []
            cursors: list[_Item] = []
            stops: list[_Item] = []
            for item in group:
                if item.stop:
                    stops.append(item)
                elif item.writes.only_cursors():
                    cursors.append(item)  # advisory: written once the others' callers are answered
                elif item.unfence is None:
                    run.append(item)
                else:
                    # Bundles before the marker still see the fence; those after it do not.
                    await self._commit_run(run)
                    run = []
                    self._fenced.pop(item.unfence, None)
                    _resolve(item.fut)
            await self._commit_run(run)
            await self._commit_run(cursors)
            if stops:
                for item in stops:
                    _resolve(item.fut)
                return

    async def _commit_run(self, run: list[_Item]) -> None:
        """Commit a run of bundles in one ``_apply``; if that fails, one bundle per call."""
        run = [item for item in run if not self._refuse_fenced(item)]
        if not run:
            return
        started = time.perf_counter()
        try:
            await self._apply([item.writes for item in run])
        except PartlyWritten as partial:
            written = sum(error is None for error in partial.errors)
            if written:
                self.recorder.committed(self.kind, written, time.perf_counter() - started)
            for item, error in zip(run, partial.errors, strict=True):
                if error is None:
                    _resolve(item.fut)
                elif not self._refuse_fenced(item):  # not written because an earlier one failed
                    self._fail(item, error)
            return
        except Exception as exc:
            if len(run) == 1 or not self._retry_alone(exc):
                for item in run:
                    self._fail(item, exc)
                return
            log.warning("group commit of %d bundles failed (%s); writing them one by one", len(run), exc)
            for item in run:
                if self._refuse_fenced(item):  # an earlier bundle of this run failed on the same channel
                    continue
                try:
                    await self._apply([item.writes])
                except Exception as one:
                    self._fail(item, one)
                else:
                    self._committed(item)
            return
        self.recorder.committed(self.kind, len(run), time.perf_counter() - started)
        for item in run:
            self._committed(item)

    def _committed(self, item: _Item) -> None:
        """``item`` is stored: answer its caller, and wake the audit followers if it held audit records."""
        _resolve(item.fut)
        if item.writes.audit:
            self.audit_bell.ring()

    def _refuse_fenced(self, item: _Item) -> bool:
        """Fail ``item`` if it writes a fenced channel (an earlier write to it failed); True if so."""
        if not self._fenced:
            return False
        fenced = sorted(self._fenced.keys() & channels_of(item.writes))
        if not fenced:
            return False
        channel_id = fenced[0]
        if not item.fut.done():
            cause = self._fenced[channel_id]
            message = (
                f"an earlier write to channel '{channel_id}' failed, so this one was not written (no gap is "
                "ever committed); the hub is rebuilding the channel from storage — retry."
            )
            error: Unavailable
            if cause == PARTITION_MOVED:
                error = PartitionMoved(
                    f"an earlier write to channel '{channel_id}' was refused because this hub replica no longer "
                    "owns the channel's partition, so this one was not written either — retry (the new owner "
                    "takes it).",
                    metadata={"channel_id": channel_id},
                )
            elif cause == LOST_RACE:
                error = LostRace(message, metadata={"channel_id": channel_id, "cause": LOST_RACE})
            else:
                error = Unavailable(message, metadata={"channel_id": channel_id, "cause": WRITE_FAILED})
            _refuse(item.fut, error)
        return True

    def _fail(self, item: _Item, exc: Exception) -> None:
        """A bundle could not be written: fail its caller alone and fence its channels."""
        moved = isinstance(exc, Fenced)
        race = isinstance(exc, StoreConflict) and not moved
        cause = PARTITION_MOVED if moved else LOST_RACE if race else WRITE_FAILED
        self.recorder.commit_failed(self.kind, cause)
        if moved:
            log.info("a write bundle was fenced off (this replica no longer owns its partition): %s", exc)
        elif race:
            log.info("a write bundle lost a race to another replica and was not written: %s", exc)
        elif isinstance(exc, StoreUnconfirmed):
            log.error("a write bundle is stored but its Redis replicas did not confirm it: %s", exc)
        else:
            log.error("a write bundle failed and was not written: %r", exc)
        for channel_id in channels_of(item.writes):
            self._fenced[channel_id] = cause
        if not item.fut.done():
            err: Unavailable
            if isinstance(exc, Fenced):
                # Naming the channel lets a unary call about it be sent on to the new owner (hubsvc/rpc.py).
                written = sorted(channels_of(item.writes))
                err = PartitionMoved(
                    f"this hub replica no longer owns the channel's partition ({exc}); nothing of this write was "
                    "stored — retry: the partition's new owner takes it.",
                    metadata={
                        "partition": str(exc.partition),
                        **({"channel_id": written[0]} if len(written) == 1 else {}),
                    },
                )
            elif isinstance(exc, LimitConflict):
                err = AtLimit(f"the store refused this write: {exc}; nothing of it was stored.", exc.held)
            elif race:
                err = LostRace(
                    f"another hub replica wrote to this channel first ({exc}); nothing of this write was stored — "
                    "retry.",
                    metadata={"cause": "lost_race"},
                )
            elif isinstance(exc, StoreUnconfirmed):
                err = Unavailable(
                    f"this write is stored on the Redis primary but not confirmed by its replicas ({exc}), so "
                    "a failover could lose it — retry with the same idempotency key: if it was kept, the retry "
                    "is answered with the stored result (duplicate: true) instead of writing it again.",
                    metadata={"cause": "store_unconfirmed"},
                )
            else:
                err = Unavailable(
                    f"the hub could not store this write ({type(exc).__name__}); nothing of it was written — retry.",
                    metadata={"cause": WRITE_FAILED},
                )
            err.__cause__ = exc
            _refuse(item.fut, err)


class PartlyWritten(Exception):
    """Raised by an ``_apply`` that writes bundles separately (Redis with channels spread over a
    Cluster's slots): ``errors[i]`` is why bundle ``i`` was not written, None if it was."""

    def __init__(self, errors: list[Exception | None]) -> None:
        super().__init__(f"{sum(e is not None for e in errors)} of {len(errors)} bundles were not written")
        self.errors = errors


@dataclass(slots=True)
class _Item:
    """A queued bundle, the marker lifting a channel's fence (``unfence``), or the writer's end (``stop``)."""

    writes: Writes
    unfence: str | None = None
    stop: bool = False
    """The writer's last item: it ends once the group holding this marker is written."""
    fut: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


def _refuse(fut: asyncio.Future[None], err: Exception) -> None:
    """Fail ``fut`` with ``err``. The failure is logged here (by :meth:`GroupCommitStore._fail`),
    so a bundle nobody awaits (an audit record, acked cursors) is not reported a second time by
    asyncio as a "Future exception was never retrieved"; an awaiting caller still gets ``err``."""
    fut.set_exception(err)
    fut.exception()


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def channels_of(writes: Writes) -> set[str]:
    """The channels a bundle writes (WAL rows or channel rows)."""
    return {w.channel_id for w in writes.wal} | {c.channel_id for c in writes.channels}
