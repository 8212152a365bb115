"""What the Redis store checks and repairs when it opens: the layout its keys were written with,
index sets a store written before them lacks, and Redis's persistence settings.

:class:`Upkeep` is given what it needs (the client, the key layout, the store's public reads and the
callable that targets the hub's home node) rather than the store, so this module does not import the
store module (which imports it)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Protocol

import redis.exceptions
from agentnet.v1 import envelope_pb2
from redis.asyncio.cluster import RedisCluster

from hubsvc.storage.base import ChannelRow, TaskRow
from hubsvc.storage.redis_connect import RedisClient
from hubsvc.storage.redis_store import scripts
from hubsvc.storage.redis_store.codec import idem_field, text
from hubsvc.storage.redis_store.keys import HOLDINGS_MARK, PARTITIONS, REPLIES_MARK, KeyLayout
from hubsvc.storage.redis_store.plan import Part

log = logging.getLogger("agentnet.hub.storage")

REBUILD_CHUNK = 1000
"""Live channels or tasks one holder-set rebuild script call adds at most."""


class StoreReads(Protocol):
    """The store's reads the repairs use (:class:`~hubsvc.storage.base.HubStore`'s public methods)."""

    async def load_live_channels(self) -> list[ChannelRow]:
        """Every live channel."""
        ...

    async def load_tasks(self, *, live_only: bool) -> list[TaskRow]:
        """The tasks (only the live ones with ``live_only``)."""
        ...

    async def list_channels(self, *, live_only: bool, before: int, limit: int) -> list[tuple[int, ChannelRow]]:
        """A page of channels, newest first."""
        ...

    def scan_wal(self, channel_ids: Sequence[str], *, batch: int = 5000) -> AsyncIterator[tuple[str, list[bytes]]]:
        """Whole WALs, channel by channel, in seq order."""
        ...


class Upkeep:
    """The checks and repairs :meth:`RedisHubStore.open` runs, on the store's client and keys.

    ``on_home_node`` gives the arguments that send a keyless command where the commit script runs;
    ``reads`` is the store itself (its public reads)."""

    def __init__(
        self,
        client: RedisClient,
        keys: KeyLayout,
        *,
        spread: bool,
        on_home_node: Callable[[], dict[str, Any]],
        reads: StoreReads,
    ) -> None:
        self._client = client
        self._keys = keys
        self._spread = spread
        self._on_home_node = on_home_node
        self._reads = reads
        self._rebuild_script = client.register_script(scripts.REBUILD_HOLDINGS)

    async def check_layout(self) -> None:
        """Refuse to open keys written with the other layout (``spread``): replicas sharing a store
        must agree on where a channel's keys are. The first store to open records its layout."""
        key = self._keys.g + "layout"
        mine = "spread" if self._spread else "single"
        if not isinstance(self._client, RedisCluster):
            return
        stored = await self._client.get(key)
        if stored is None:
            # Keys written before the layout was recorded are the single-slot layout.
            existing = await self._client.exists(self._keys.g + "feed_seq")
            if existing and self._spread:
                stored = b"single"
            else:
                await self._client.set(key, mine, nx=True)
                stored = await self._client.get(key)
        if text(stored or b"") != mine:
            raise ValueError(
                f"the hub's keys under prefix {self._keys.raw_prefix!r} were written with "
                f"spread={'1' if mine == 'single' else '0'} and this store has spread={'1' if self._spread else '0'}: "
                "give every replica the same --store URL"
            )

    async def refuse_undivided(self) -> None:
        """Refuse to open, without partitions, a store whose channels are divided among replicas: its
        writes would not be fenced, and a replica holding a channel could lose a race it cannot see."""
        recorded = await self._client.get(self._keys.g + PARTITIONS)
        if recorded is not None:
            raise ValueError(
                f"the hub's store under prefix {self._keys.raw_prefix!r} divides its channels among replicas in "
                f"{text(recorded)} partitions: start every replica with --partitions {text(recorded)}"
            )

    async def rebuild_holdings(self) -> None:
        """Fill the holder sets from the live channels and tasks, once per store (:data:`HOLDINGS_MARK`).

        Idempotent, so replicas opening an old store at once may both do it: each member is added
        only if it is still live when the script runs, and rows committed meanwhile keep the sets
        themselves."""
        mark = self._keys.g + HOLDINGS_MARK
        if await self._client.exists(mark):
            return
        entries = [(2, self._keys.holder("channels", row.member_ids()[0]), row.channel_id)
                   for row in await self._reads.load_live_channels()]  # fmt: skip
        entries += [
            (3, self._keys.holder("tasks", t.owner_id), t.task_id) for t in await self._reads.load_tasks(live_only=True)
        ]
        for low in range(0, max(len(entries), 1), REBUILD_CHUNK):
            part = Part()
            for key in (mark, self._keys.g + "channels:live", self._keys.g + "tasks:live"):
                part.k(key)
            args: list[Any] = ["1" if low + REBUILD_CHUNK >= len(entries) else "0"]
            for live, holder, member in entries[low : low + REBUILD_CHUNK]:
                args += [live, part.k(holder), member]
            await self._rebuild_script(keys=part.keys, args=args)
        if entries:
            log.info(
                "rebuilt the holder sets of %d live channels and tasks (a store written before them)", len(entries)
            )

    async def index_replies(self) -> None:
        """Fill the replies hashes from every WAL, once per store (:data:`REPLIES_MARK`).

        A new store is marked at once. HSETNX in seq order keeps each sender's first reply, and is
        idempotent, so replicas opening an old store at once may both do it; a reply committed
        meanwhile (by a replica already running) is one too, so FindReply stays right."""
        mark = self._keys.g + REPLIES_MARK
        if await self._client.exists(mark):
            return
        ids = [row.channel_id for _, row in await self._reads.list_channels(live_only=False, before=0, limit=2**62)]
        indexed = 0
        async for channel_id, datas in self._reads.scan_wal(ids):
            replies = self._keys.channel(channel_id, "replies")
            async with self._client.pipeline(transaction=False) as pipe:
                for data in datas:
                    env = envelope_pb2.Envelope.FromString(data)
                    if env.HasField("causation_id") and env.causation_id:
                        pipe.hsetnx(replies, idem_field(env.sender_id, env.causation_id), env.seq)
                        indexed += 1
                await pipe.execute()
        await self._client.set(mark, "1")
        if indexed:
            log.info("indexed %d replies of %d channels for FindReply (a store written before it)", indexed, len(ids))

    async def check_durability(self) -> None:
        """Read Redis's persistence settings and warn when they cannot keep acknowledged writes."""
        try:
            config = await self._client.config_get("append*", **self._on_home_node())
        except redis.exceptions.ResponseError as exc:  # CONFIG renamed or disabled by the operator
            log.warning("could not read Redis's persistence settings (%s); make sure appendonly is yes", exc)
            return
        settings = {text(k): text(v) for k, v in config.items() if k is not None and v is not None}
        if settings.get("appendonly") != "yes":
            log.warning(
                "Redis runs with appendonly=%s: acknowledged posts are lost if Redis restarts. Set "
                "'appendonly yes' and 'appendfsync always' (or everysec: at most 1 s lost on power loss); "
                "docs/scale-out.md",
                settings.get("appendonly", "?"),
            )
        elif settings.get("appendfsync") != "always":
            log.info(
                "Redis appendfsync=%s: a power loss may lose up to about a second of acknowledged writes "
                "(a killed hub process loses none)",
                settings.get("appendfsync", "?"),
            )
