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

**Notices.** With the channels divided among replicas (``--partitions``), an entry naming a channel
that only grew (no row written) would wake every replica, though only the replicas where its members
are connected deliver it. The commit script tells such a channel's last seq instead to those
replicas alone: each replica has a notice stream ``P{g}:notices:<replica id>`` (numbered by
``P{g}:notices_seq:<replica id>`` like the feed, same fields), and the hash ``P{g}:where`` maps each
identity with a Connect stream to ``<replica id>\0<session id>`` (written with the stream's session
record), the set ``P{g}:watch:<channel id>`` names the replicas watching a channel no member of
which is connected there. A replica reads the feed and its own notice stream in one ``XREAD``; its
position is ``<feed number>.<notice number>``. A replica whose liveness key lapsed is told nothing
(the script checks it): when its next beat finds the key gone it refreshes everything it holds,
as after a trimmed feed (:meth:`RedisChangeFeed.lapsed`).

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
"""Entries one read returns at most (per stream)."""
NOTICES_MAXLEN = 10_000
"""Entries a replica's notice stream keeps at least; a replica further behind refreshes everything."""
WHERE = "where"
"""The global hash (``P{g}:where``) of identity → ``<replica id>\0<session id>`` of its Connect stream."""
WATCH = "watch:"
"""The start of the global sets (``P{g}:watch:<channel id>``) of replicas watching a channel."""
HIDDEN = "hidden"
"""The global hash (``P{g}:hidden``) of live channel id → the agents a ``hide`` firing in it hides,
``\0``-separated, written with the channel's commits when the replicas divide the channels."""


def where_value(replica_id: str, session_id: str) -> str:
    """What ``P{g}:where`` holds for an identity whose Connect stream ``session_id`` is on ``replica_id``."""
    return f"{replica_id}\0{session_id}"


class RedisChangeFeed(ChangeFeed):
    """Reads the feed of one Redis store; ``key``/``counter`` are the stream and its id counter, and
    ``notices`` (the global key prefix, with the channels divided among replicas; None otherwise)
    where this replica's notice stream and its counter are."""

    def __init__(
        self,
        client: RedisClient,
        key: str,
        counter: str,
        route: Callable[[], dict[str, Any]] | None = None,
        notices: str | None = None,
    ) -> None:
        self.replica_id = uuid.uuid4().hex
        self._client = client
        self._route = route
        """On a Cluster: the arguments that send XREAD straight to the node of the feed's slot (the
        client would otherwise ask that node for the command's keys first, one more round trip
        per read)."""
        self.key = key
        self.counter = counter
        self._notices = None if notices is None else (notices + "notices:", notices + "notices_seq:")
        self._mine = self.notices_of(self.replica_id)
        """This replica's notice stream and counter (None: the channels are not divided)."""
        self._lapsed = False

    def notices_of(self, replica_id: str) -> tuple[str, str] | None:
        """(notice stream, its counter) of a replica; None when the channels are not divided."""
        if self._notices is None:
            return None
        return self._notices[0] + replica_id, self._notices[1] + replica_id

    def lapsed(self) -> None:
        """This replica's liveness key was found lapsed: notices were not written for it meanwhile,
        so the next :meth:`read` raises :class:`FeedGap` (the reader refreshes everything)."""
        self._lapsed = True

    async def position(self) -> str:
        """The number of the last entry appended so far ("0" for an empty feed), and of the last
        notice to this replica (``<feed>.<notices>``) when the channels are divided."""
        if self._mine is None:
            value = await self._client.get(self.counter)
            return "0" if value is None else str(int(value))
        feed, notices = await self._client.mget([self.counter, self._mine[1]])
        return f"{int(feed or 0)}.{int(notices or 0)}"

    async def read(self, after: str, block: float) -> tuple[str, list[Change]]:
        """Entries after position ``after``, waiting up to ``block`` seconds; FeedGap if some were trimmed
        (or this replica's liveness lapsed, :meth:`lapsed`)."""
        if self._lapsed:
            self._lapsed = False
            raise FeedGap("this replica's liveness key lapsed (it was paused or cut off from Redis)")
        feed_after, _, notices_after = after.partition(".")
        streams = {self.key: feed_after}
        if self._mine is not None:
            streams[self._mine[0]] = notices_after or "0"
        block_ms = max(1, int(block * 1000))
        ids: dict[Any, Any] = {key: f"{number}-0" for key, number in streams.items()}
        if self._route is None:
            reply = await self._client.xread(ids, count=_READ_COUNT, block=block_ms)
        else:
            reply = await self._client.execute_command(
                "XREAD", "COUNT", _READ_COUNT, "BLOCK", block_ms, "STREAMS", *ids, *ids.values(), **self._route()
            )
        changes: list[Change] = []
        for stream, entries in cast("list[Any]", reply or []):
            key = stream.decode() if isinstance(stream, bytes) else str(stream)
            expected = int(streams[key]) + 1
            for entry_id, fields in cast("list[tuple[bytes, dict[bytes, bytes]]]", entries):
                number = int(entry_id.split(b"-", 1)[0])
                if number != expected:
                    what = "change feed" if key == self.key else "notice stream"
                    raise FeedGap(f"the {what} skips from entry {expected - 1} to {number} (trimmed)")
                expected = number + 1
                changes.append(decode(fields))
            streams[key] = str(expected - 1)
        position = ".".join(streams.values())
        return position, changes


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
