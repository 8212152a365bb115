"""What the Redis store checks and repairs when it opens: the layout its keys were written with,
index sets a store written before them lacks, and Redis's persistence settings."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import redis.exceptions
from agentnet.v1 import envelope_pb2
from redis.asyncio.cluster import RedisCluster

from hubsvc.storage.redis_store.codec import idem_field, text
from hubsvc.storage.redis_store.keys import HOLDINGS_MARK, PARTITIONS, REPLIES_MARK
from hubsvc.storage.redis_store.plan import Part

if TYPE_CHECKING:
    from hubsvc.storage.redis_store.store import RedisHubStore

log = logging.getLogger("agentnet.hub.storage")

REBUILD_CHUNK = 1000
"""Live channels or tasks one holder-set rebuild script call adds at most."""


async def check_layout(store: RedisHubStore) -> None:
    """Refuse to open keys written with the other layout (``spread``): replicas sharing a store
    must agree on where a channel's keys are. The first store to open records its layout."""
    key = store._keys.g + "layout"
    mine = "spread" if store.spread else "single"
    if not isinstance(store._client, RedisCluster):
        return
    stored = await store._client.get(key)
    if stored is None:
        # Keys written before the layout was recorded are the single-slot layout.
        existing = await store._client.exists(store._keys.g + "feed_seq")
        if existing and store.spread:
            stored = b"single"
        else:
            await store._client.set(key, mine, nx=True)
            stored = await store._client.get(key)
    if text(stored or b"") != mine:
        raise ValueError(
            f"the hub's keys under prefix {store._keys.raw_prefix!r} were written with "
            f"spread={'1' if mine == 'single' else '0'} and this store has spread={'1' if store.spread else '0'}: "
            "give every replica the same --store URL"
        )


async def refuse_undivided(store: RedisHubStore) -> None:
    """Refuse to open, without partitions, a store whose channels are divided among replicas: its
    writes would not be fenced, and a replica holding a channel could lose a race it cannot see."""
    recorded = await store._client.get(store._keys.g + PARTITIONS)
    if recorded is not None:
        raise ValueError(
            f"the hub's store under prefix {store._keys.raw_prefix!r} divides its channels among replicas in "
            f"{text(recorded)} partitions: start every replica with --partitions {text(recorded)}"
        )


async def rebuild_holdings(store: RedisHubStore) -> None:
    """Fill the holder sets from the live channels and tasks, once per store (:data:`HOLDINGS_MARK`).

    Idempotent, so replicas opening an old store at once may both do it: each member is added
    only if it is still live when the script runs, and rows committed meanwhile keep the sets
    themselves."""
    mark = store._keys.g + HOLDINGS_MARK
    if await store._client.exists(mark):
        return
    entries = [(2, store.holder_key("channels", row.member_ids()[0]), row.channel_id)
               for row in await store.load_live_channels()]  # fmt: skip
    entries += [(3, store.holder_key("tasks", t.owner_id), t.task_id) for t in await store.load_tasks(live_only=True)]
    for low in range(0, max(len(entries), 1), REBUILD_CHUNK):
        part = Part()
        for key in (mark, store._keys.g + "channels:live", store._keys.g + "tasks:live"):
            part.k(key)
        args: list[Any] = ["1" if low + REBUILD_CHUNK >= len(entries) else "0"]
        for live, holder, member in entries[low : low + REBUILD_CHUNK]:
            args += [live, part.k(holder), member]
        await store._rebuild_script(keys=part.keys, args=args)
    if entries:
        log.info("rebuilt the holder sets of %d live channels and tasks (a store written before them)", len(entries))


async def index_replies(store: RedisHubStore) -> None:
    """Fill the replies hashes from every WAL, once per store (:data:`REPLIES_MARK`).

    A new store is marked at once. HSETNX in seq order keeps each sender's first reply, and is
    idempotent, so replicas opening an old store at once may both do it; a reply committed
    meanwhile (by a replica already running) is one too, so FindReply stays right."""
    mark = store._keys.g + REPLIES_MARK
    if await store._client.exists(mark):
        return
    ids = [row.channel_id for _, row in await store.list_channels(live_only=False, before=0, limit=2**62)]
    indexed = 0
    async for channel_id, datas in store.scan_wal(ids):
        replies = store._keys.channel(channel_id, "replies")
        async with store._client.pipeline(transaction=False) as pipe:
            for data in datas:
                env = envelope_pb2.Envelope.FromString(data)
                if env.HasField("causation_id") and env.causation_id:
                    pipe.hsetnx(replies, idem_field(env.sender_id, env.causation_id), env.seq)
                    indexed += 1
            await pipe.execute()
    await store._client.set(mark, "1")
    if indexed:
        log.info("indexed %d replies of %d channels for FindReply (a store written before it)", indexed, len(ids))


async def check_durability(store: RedisHubStore) -> None:
    """Read Redis's persistence settings and warn when they cannot keep acknowledged writes."""
    try:
        config = await store._client.config_get("append*", **store._on_home_node())
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
