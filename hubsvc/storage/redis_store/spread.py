"""The spread layout's commit (``?spread=1`` on a Cluster URL): a channel part, then a global part.

Each channel's keys carry the channel's own hash tag (:mod:`hubsvc.storage.redis_store.keys`), so
a bundle is written as a channel part (checks, WAL, channel record, outbox entry: one script on
the channel's slot) followed by its global part (one script on the global slot that applies
once, by the done set); a bundle opening a channel under a limit first reserves its slot with one
script on the global slot (released if the channel part is refused, else it lapses).
:meth:`SpreadWriter.complete_pending` applies global parts left behind by a writer that died
between the two (at open and every :data:`OUTBOX_SWEEP` seconds). docs/scale-out.md "Channels
spread over the shards".

The store's :class:`~hubsvc.storage.faults.StoreFaults` (tests only) is told of every bundle
whose channel part committed, before its global part is sent (``between_parts``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any, cast

from hubsvc.storage.base import StoreConflict, Writes
from hubsvc.storage.faults import StoreFaults
from hubsvc.storage.group_commit import PartlyWritten
from hubsvc.storage.redis_connect import RedisClient
from hubsvc.storage.redis_store.codec import as_bytes, text, unpack_call
from hubsvc.storage.redis_store.commit import CommitScript, RedisClock
from hubsvc.storage.redis_store.failures import StoreLate, outcome
from hubsvc.storage.redis_store.keys import KeyLayout
from hubsvc.storage.redis_store.plan import Part, Plan, channels_of

log = logging.getLogger("agentnet.hub.storage")

OUTBOX_SWEEP = 5.0
"""Seconds between two looks for bundles whose global part is missing (spread layout): an entry
seen in two looks in a row is completed, so a replica that died between the parts is made up for
within about twice this."""


class SpreadWriter:
    """Writes groups with the spread layout and completes the global parts writers left behind.

    ``plan`` makes the store's empty commit plans; ``script`` and ``clock`` are the store's;
    ``faults``, when given, is told between the parts."""

    def __init__(
        self,
        client: RedisClient,
        keys: KeyLayout,
        plan: Callable[[], Plan],
        script: CommitScript,
        clock: RedisClock,
        *,
        sweep_interval: float = OUTBOX_SWEEP,
        faults: StoreFaults | None = None,
    ) -> None:
        self._client = client
        self._keys = keys
        self._plan = plan
        self._script = script
        self._clock = clock
        self._faults = faults
        self._sweep_interval = sweep_interval
        self._sweeper: asyncio.Task[None] | None = None
        self._sweep_stop = asyncio.Event()
        self._forgetting: set[asyncio.Task[None]] = set()
        """Deletions of applied outbox entries under way."""
        self._seen: set[tuple[bytes, bytes]] = set()
        """Outbox entries (key, bundle id) the last sweep found pending."""

    async def start(self) -> None:
        """Load the script on every master, complete what is pending, start sweeping."""
        await self._script.register()
        await self.complete_pending(immediately=True)
        self._sweep_stop.clear()
        self._sweeper = asyncio.create_task(self._sweep_loop(), name="hub-store-outbox-sweep")

    async def stop_sweeping(self) -> None:
        """Stop the sweep (before the store's writer stops)."""
        if self._sweeper is not None:
            self._sweep_stop.set()
            await self._sweeper
            self._sweeper = None

    async def finish(self) -> None:
        """Wait for the outbox deletions under way (after the store's writer stopped)."""
        if self._forgetting:
            await asyncio.gather(*self._forgetting)

    async def apply(self, group: list[Writes]) -> None:
        """Write the bundles with the spread layout; raise :class:`PartlyWritten` naming each failure.

        Every bundle's channel part (its checks, WAL rows, last seq, idempotency keys, channel
        record and members, and its outbox entry) runs as one script on the channel's slot — all
        bundles' parts in one pipeline, which sends each node its parts in submission order. Then
        the global parts of the bundles whose channel part committed (and of the bundles without
        one) run on the global slot, in submission order, in a second pipeline. Only channel
        parts (and bundles without one) can be refused, so a bundle is either refused having
        written nothing or written whole, the global part maybe later (:meth:`complete_pending`).
        """
        errors: list[Exception | None] = [None] * len(group)
        calls: list[tuple[str, tuple[str, Part] | None, tuple[list[str], list[Any]]] | None] = []
        broken: set[str] = set()
        """Channels with an earlier bundle of this group that cannot be written: later ones are not sent."""
        previous: dict[str, str] = {}
        """Channel → the bundle of this group written to it last so far."""
        reservations: dict[int, tuple[Part, Part]] = {}
        """Bundle → the reservation of its channel's slot under a limit, and its release."""
        for i, writes in enumerate(group):
            plan = self._plan()
            try:
                if broken & channels_of(writes):
                    raise StoreConflict(f"an earlier write to channel {sorted(broken & channels_of(writes))[0]} failed")
                plan.add(writes)
                call = None if plan.empty else plan.spread_calls(previous)
                if call is not None and call[1] is not None:
                    previous[call[1][0]] = call[0]
                calls.append(call)
                reservation = plan.reservation()
                if reservation is not None:
                    reservations[i] = reservation
            except (StoreConflict, ValueError) as exc:
                errors[i] = exc
                broken |= channels_of(writes)
                calls.append(None)
        if reservations:
            await self._reserve(reservations, errors, calls)
        sent, deadline = self._clock.deadline()
        channel_parts = [
            (i, call[1][1])
            for i, call in enumerate(calls)
            if call is not None and call[1] is not None and errors[i] is None
        ]
        if channel_parts:
            results = await self._script.run_many(  # no answer: every bundle not refused yet fails (some wrote)
                [(part.keys, [deadline, *part.args()]) for _, part in channel_parts],
                errors,
                [i for i, error in enumerate(errors) if error is None],
            )
            for (i, _), result in zip(channel_parts, results, strict=True):
                errors[i] = outcome(result)
            if self._faults is not None:
                self._faults.between_parts([group[i] for i, _ in channel_parts if errors[i] is None])
            refused = [
                i for i, _ in channel_parts if i in reservations and isinstance(errors[i], (StoreConflict, StoreLate))
            ]
            if refused:  # nothing of them was written: free their slots (else the reservations lapse)
                await self._release([reservations[i][1] for i in refused])
        sent, deadline = self._clock.deadline()
        global_parts = [(i, call) for i, call in enumerate(calls) if call is not None and errors[i] is None]
        done: list[tuple[bytes, bytes]] = []
        if global_parts:
            batch = [(keys, [deadline, *args]) for i, (_, _, (keys, args)) in global_parts]
            results = await self._script.run_many(batch, errors, [i for i, _ in global_parts])
            for (i, (bundle_id, part, _)), result in zip(global_parts, results, strict=True):
                errors[i] = outcome(result)
                if errors[i] is None and not isinstance(result, Exception):
                    self._clock.learn_from(result, sent)
                    if part is not None:
                        done.append((self._keys.channel(part[0], "outbox").encode(), bundle_id.encode()))
        if done:  # in the background: the callers need not wait for it
            task = asyncio.create_task(self._forget_outbox(done))
            self._forgetting.add(task)
            task.add_done_callback(self._forgetting.discard)
        if any(e is not None for e in errors):
            raise PartlyWritten(errors)

    async def _reserve(
        self,
        reservations: dict[int, tuple[Part, Part]],
        errors: list[Exception | None],
        calls: list[Any],
    ) -> None:
        """(spread) Reserve the slots of the bundles that open a channel under a limit, in one pipeline
        on the global slot, before their channel parts: a bundle whose holder is at its limit fails
        (:class:`LimitConflict`) having written nothing, and so does every later bundle of its channel."""
        order = sorted(reservations)
        _, deadline = self._clock.deadline()
        pending = [i for i, error in enumerate(errors) if error is None]  # if Redis does not answer, none is sent
        results = await self._script.run_many(
            [(reservations[i][0].keys, [deadline, *reservations[i][0].args()]) for i in order], errors, pending
        )
        failed = {i for i, result in zip(order, results, strict=True) if outcome(result) is not None}
        for i, result in zip(order, results, strict=True):
            errors[i] = outcome(result)
        if failed:
            refused = {c[1][0] for i, c in enumerate(calls) if i in failed and c is not None and c[1] is not None}
            for i, call in enumerate(calls):
                if errors[i] is None and call is not None and call[1] is not None and call[1][0] in refused:
                    errors[i] = StoreConflict(f"an earlier write to channel {call[1][0]} failed")
            unknown = [reservations[i][1] for i in failed if not isinstance(errors[i], (StoreConflict, StoreLate))]
            if unknown:  # maybe written (Redis did not answer): release what may be held
                await self._release(unknown)

    async def _release(self, releases: Sequence[Part]) -> None:
        """(spread) Free reserved slots whose channel part was not written (best effort: else they lapse)."""
        try:
            await self._script.run_many([(part.keys, [0, *part.args()]) for part in releases])
        except Exception as exc:
            log.info("could not release %d reserved slots (%r); they lapse by themselves", len(releases), exc)

    async def _forget_outbox(self, entries: Sequence[tuple[bytes, bytes]]) -> None:
        """Delete outbox entries whose global part is applied, then let their done marks lapse
        (best effort: a sweep finds leftovers done and deletes them).

        A done mark stays (score +inf) while its outbox entry exists; once the entry is deleted
        it gets the deletion time as score and the global script trims it some
        :data:`~hubsvc.storage.redis_store.plan.DONE_KEEP` seconds later — long after any completer
        that read the entry before the deletion could still apply it (it reads again right before,
        and sends a deadline)."""
        try:
            async with self._client.pipeline(transaction=False) as pipe:
                for key, bundle_id in entries:
                    pipe.hdel(key, bundle_id)
                deleted = await pipe.execute(raise_on_error=False)
            gone = [
                bundle_id for (_, bundle_id), d in zip(entries, deleted, strict=True) if not isinstance(d, Exception)
            ]
            if gone:
                redis_now = self._clock.redis_now()
                await self._client.zadd(self._keys.g + "outbox:done", dict.fromkeys(gone, redis_now), xx=True)
        except Exception as exc:  # best effort: what is left is found done and deleted by a sweep
            log.info("could not delete %d applied outbox entries (%r); a later sweep will", len(entries), exc)

    async def complete_pending(self, *, immediately: bool = False) -> int:
        """Apply the global part of every bundle left in a channel's outbox (spread layout): a
        writer that died, or whose global part failed, between the parts. Returns how many.

        Found by SCAN over every master (outbox keys exist only while they hold an entry). With
        ``immediately`` (at open) every entry is completed; otherwise only those a previous call
        found too, so a writer whose global part is on its way is not raced for nothing (racing it
        is harmless: a global part applies once, by the done set)."""
        pattern = self._keys.outbox_pattern()
        keys = [as_bytes(k) async for k in self._client.scan_iter(match=pattern, count=1000)]
        if not keys:
            self._seen = set()
            return 0
        async with self._client.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.hgetall(key)
            found = cast("list[dict[bytes, bytes]]", await pipe.execute())
        pending = {(key, bid): blob for key, entries in zip(keys, found, strict=True) for bid, blob in entries.items()}
        ripe = [entry for entry in pending if immediately or entry in self._seen]
        self._seen = set(pending) - set(ripe)
        completed = 0
        for key, bundle_id in ripe:
            # Read again right before applying (and apply with a deadline): an entry applied and
            # deleted meanwhile is skipped, so no completer applies one long after it was done.
            packed = await self._client.hget(key, bundle_id)
            if packed is None:
                continue
            call_keys, args = unpack_call(as_bytes(packed))
            _, deadline = self._clock.deadline()
            result = await self._script.call(call_keys, [deadline, *args])
            failure = outcome(result)
            if failure is not None:
                log.error("could not complete bundle %s of %s: %s", text(bundle_id), text(key), failure)
                continue
            if int(result[0]) == 1:
                completed += 1
                log.warning(
                    "completed the global part (audit, indexes, change feed) of bundle %s of %s: its writer "
                    "stopped between the parts",
                    text(bundle_id),
                    text(key),
                )
            await self._forget_outbox([(key, bundle_id)])
        return completed

    async def _sweep_loop(self) -> None:
        """Every ``sweep_interval`` seconds, :meth:`complete_pending` (until :meth:`close`)."""
        while not self._sweep_stop.is_set():
            try:
                await asyncio.wait_for(self._sweep_stop.wait(), self._sweep_interval)
                return
            except TimeoutError:
                pass
            try:
                await self.complete_pending()
            except Exception as exc:  # the store does not answer: the next sweep tries again
                log.warning("could not look for bundles to complete (%r); retrying", exc)
