"""The change feed of hub replicas sharing one Redis (:class:`~hubsvc.storage.base.ChangeFeed`).

Every commit script of :class:`~hubsvc.storage.redis_store.RedisHubStore` ends by appending one
entry to the Stream ``P{g}:feed`` in the same atomic step as its writes. The entry id is
``<n>-0`` with ``n`` taken from the counter ``P{g}:feed_seq`` (INCR), so ids are consecutive and
a reader can tell when entries it has not read were trimmed (the stream keeps about
:data:`FEED_MAXLEN` entries). Fields: ``r`` (the committing replica's id) and ``j``, a JSON
object: ``c`` maps each channel whose WAL grew to its last seq after the commit (0 when only
the channel's row changed); ``a``, ``t`` and ``x`` list the agent, task and execution ids
whose records were written, ``s`` the identities whose Connect stream began or ended; ``u``
lists the acked cursors as ``[agent id, channel id, seq]``. ``w`` is the committing replica's wall-clock
time (epoch seconds): the followers' lag metric.

Why a Stream and not pub/sub: a replica that is busy, restarting its connection or briefly
partitioned misses pub/sub messages for good, while it reads a Stream from where it stopped,
and the consecutive ids prove it missed nothing. The entries are small (ids, not envelopes):
the envelopes themselves are read from each channel's WAL stream (docs/scale-out.md).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any, cast

from hubsvc.storage.base import Change, ChangeFeed, FeedGap
from hubsvc.storage.redis_connect import RedisClient

FEED_MAXLEN = 100_000
"""Entries the feed keeps at least (trimmed approximately past this); a replica that falls
further behind refreshes everything it holds from the store."""
_READ_COUNT = 1000
"""Entries one read returns at most."""


class RedisChangeFeed(ChangeFeed):
    """Reads the feed of one Redis store; ``key``/``counter`` are the stream and its id counter."""

    def __init__(
        self, client: RedisClient, key: str, counter: str, route: Callable[[], dict[str, Any]] | None = None
    ) -> None:
        self.replica_id = uuid.uuid4().hex
        self._client = client
        self._route = route
        """On a Cluster: the arguments that send XREAD straight to the node of the feed's slot (the
        client would otherwise ask that node for the command's keys first, one more round trip
        per read)."""
        self.key = key
        self.counter = counter

    async def position(self) -> str:
        """The number of the last entry appended so far ("0" for an empty feed)."""
        value = await self._client.get(self.counter)
        return "0" if value is None else str(int(value))

    async def read(self, after: str, block: float) -> tuple[str, list[Change]]:
        """Entries after number ``after``, waiting up to ``block`` seconds; FeedGap if some were trimmed."""
        block_ms = max(1, int(block * 1000))
        if self._route is None:
            reply = await self._client.xread({self.key: f"{after}-0"}, count=_READ_COUNT, block=block_ms)
        else:
            reply = await self._client.execute_command(
                "XREAD", "COUNT", _READ_COUNT, "BLOCK", block_ms, "STREAMS", self.key, f"{after}-0", **self._route()
            )
        answer = cast("list[Any]", reply)
        if not answer:
            return after, []
        entries = cast("list[tuple[bytes, dict[bytes, bytes]]]", answer[0][1])
        expected = int(after) + 1
        changes = []
        for entry_id, fields in entries:
            number = int(entry_id.split(b"-", 1)[0])
            if number != expected:
                raise FeedGap(f"the change feed skips from entry {expected - 1} to {number} (trimmed)")
            expected = number + 1
            changes.append(decode(fields))
        return str(expected - 1), changes


def encode(replica_id: str, channels: dict[str, int], records: dict[str, list[Any]]) -> list[Any]:
    """The field/value list of one feed entry: ``records`` maps "a", "t", "x", "s" to the agent,
    task, execution and session-holder ids written, and "u" to the acked cursors."""
    body: dict[str, Any] = {"c": channels}
    for name, values in records.items():
        unique = list(dict.fromkeys(values)) if name != "u" else [list(cursor) for cursor in values]
        if unique:
            body[name] = unique
    return ["r", replica_id, "j", json.dumps(body, separators=(",", ":")), "w", f"{time.time():.6f}"]


def decode(fields: dict[bytes, bytes]) -> Change:
    """A :class:`Change` from one entry's fields."""
    body = json.loads(fields.get(b"j", b"{}"))
    return Change(
        origin=fields.get(b"r", b"").decode(),
        channels={str(k): int(v) for k, v in body.get("c", {}).items()},
        agents=tuple(body.get("a", ())),
        tasks=tuple(body.get("t", ())),
        executions=tuple(body.get("x", ())),
        cursors=tuple((str(a), str(c), int(s)) for a, c, s in body.get("u", ())),
        sessions=tuple(body.get("s", ())),
        committed_at=float(fields.get(b"w", b"0") or 0),
    )
