"""Retention's purge on the Redis hub store (:class:`RedisHistory`), safe when several replicas sweep at once.

* **Which channels are due**: the store keeps no index of ended channels (the commit script writes
  none), so a sweep SCANs the channels' ``meta`` keys once and reads each ended channel's end
  (``closed_at`` of its record); the ids found due are handed out in order until none is left, then
  the next call scans again.
* **The purge** first deletes the channel's envelopes from the global envelope index
  (``P{g}:envelopes``, ``HDEL`` of at most ``batch_rows`` ids a call, read from its WAL), then
  runs ``lua/purge_channel.lua``: one atomic script that purges only if the channel is still ended,
  still holds the record the sweep read and has no tombstone yet — it writes the tombstone
  (``P{g}:tombstones``, channel id → packed fields) and deletes the channel's keys (``UNLINK``: a
  long WAL stream is freed off Redis's main thread), its members' cursors and channel-list entries.
  Two replicas sweeping the same channel both delete the same index entries (harmless), and exactly
  one script call purges it. A replica stopped between the two steps leaves a channel whose index
  entries are partly gone (``find_envelope`` misses them); the next sweep purges it.
* **Audit retention** (:meth:`RedisHistory.purge_audit`) reads the oldest ids of ``P{g}:audit:all``
  and their records, then deletes those created before the cutoff from the record hash and its three
  indexes in one ``MULTI``: a record is never half deleted, and two replicas deleting the same ones
  both do the same idempotent ``HDEL`` / ``ZREM``.
* Not on the spread layout (``?spread=1``): a channel's keys and the global ones are in different
  slots there, beyond one script; :attr:`RedisHistory.purges` says so and retention stays off.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import cast

from agentnet.v1 import channel_pb2, envelope_pb2
from redis.commands.core import AsyncScript

from hubsvc.storage.history import HistoryCounts, HistoryStore, Tombstone
from hubsvc.storage.redis_connect import RedisClient
from hubsvc.storage.redis_store.codec import as_bytes, audit_row, datas, pack, text, unpack
from hubsvc.storage.redis_store.failures import read
from hubsvc.storage.redis_store.keys import KeyLayout

TOMBSTONES = "tombstones"
"""Global hash (``P{g}:tombstones``): channel id → packed tombstone fields."""
SCAN_BATCH = 500
"""Meta keys whose live flag and record one pipeline reads."""


def _ended_at(record: bytes) -> float:
    meta = channel_pb2.ChannelMetadata.FromString(record)
    return meta.closed_at.seconds + meta.closed_at.nanos / 1e9


def _type_and_end(record: bytes) -> tuple[str, float]:
    meta = channel_pb2.ChannelMetadata.FromString(record)
    return meta.type, meta.closed_at.seconds + meta.closed_at.nanos / 1e9


class RedisHistory(HistoryStore):
    """Retention's reads and purge on :class:`~hubsvc.storage.redis_store.store.RedisHubStore` (a mixin:
    the store sets the client, the key layout and the registered purge script)."""

    _client: RedisClient
    _keys: KeyLayout
    _purge_script: AsyncScript
    _due: list[tuple[float, str]] | None = None

    @property
    def purges(self) -> bool:
        """Retention runs on this layout (not on the spread one: see the module docstring)."""
        return not self._keys.spread

    def backup_dir(self) -> Path:
        """A Redis store is backed up with the server's own snapshot, not through the hub."""
        raise ValueError("a Redis store is backed up with its server's snapshot (BGSAVE), not through the hub")

    async def backup_to(self, target: Path) -> float:
        """See :meth:`backup_dir`."""
        raise ValueError("a Redis store is backed up with its server's snapshot (BGSAVE), not through the hub")

    @read
    async def history_counts(self) -> HistoryCounts:
        """Channels purged, and the server's ``used_memory``; the ended channels kept are not counted
        (-1: that would scan every channel)."""
        purged = int(await self._client.hlen(self._keys.g + TOMBSTONES))
        info = await self._client.info("memory")
        if not isinstance(info, dict) or "used_memory" not in info:  # a Cluster answers per node
            info = next((v for v in info.values() if isinstance(v, dict)), {}) if isinstance(info, dict) else {}
        return HistoryCounts(ended_kept=-1, purged=purged, size_bytes=int(info.get("used_memory", -1)))

    async def _scan_due(self, cutoffs: Mapping[str, float]) -> list[tuple[float, str]]:
        ids: list[str] = []
        async for key in self._client.scan_iter(match=self._keys.meta_pattern(), count=1000):
            channel_id = self._keys.channel_id_of_meta(text(key))
            if channel_id is not None:
                ids.append(channel_id)
        due = []
        for low in range(0, len(ids), SCAN_BATCH):
            chunk = ids[low : low + SCAN_BATCH]
            async with self._client.pipeline(transaction=False) as pipe:
                for channel_id in chunk:
                    pipe.hmget(self._keys.channel(channel_id, "meta"), ["live", "record"])
                found = await pipe.execute()
            for channel_id, (live, record) in zip(chunk, found, strict=True):
                if live == b"0" and record is not None:
                    channel_type, ended = _type_and_end(as_bytes(record))
                    if ended < cutoffs.get(channel_type, float("-inf")):
                        due.append((ended, channel_id))
        return sorted(due, reverse=True)  # popped from the end: the oldest end first

    @read
    async def ended_before(self, cutoffs: Mapping[str, float], limit: int) -> list[str]:
        """Channels ended before their type's cutoff, oldest end first, from one scan handed out until used up."""
        if not self.purges or not cutoffs:
            return []
        if not self._due:
            self._due = await self._scan_due(cutoffs)
        out: list[str] = []
        while self._due and len(out) < limit:
            out.append(self._due.pop()[1])
        return out

    async def purge_channel(self, channel_id: str, *, purged_at: float, archive: str, batch_rows: int) -> int | None:
        """Drop the channel's envelopes from the envelope index, then purge it in one conditional script."""
        meta_key = self._keys.channel(channel_id, "meta")
        live, stored = await self._client.hmget(meta_key, ["live", "record"])
        if live != b"0" or stored is None:
            return None
        record = as_bytes(stored)
        wal_key = self._keys.channel(channel_id, "wal")
        low = "-"
        deleted = 0
        while True:
            entries = cast(
                "list[tuple[bytes, dict[bytes, bytes]]]",
                await self._client.xrange(wal_key, min=low, max="+", count=batch_rows),
            )
            if not entries:
                break
            ids = [envelope_pb2.Envelope.FromString(data).envelope_id for data in datas(entries)]
            await self._client.hdel(self._keys.g + "envelopes", *ids)
            deleted += len(entries)
            low = "(" + text(entries[-1][0])
        meta = channel_pb2.ChannelMetadata.FromString(record)
        members = [p.agent_id for p in meta.participants]
        stone = pack(
            meta.type, str(int(meta.state)), meta.close_reason, repr(_ended_at(record)), repr(purged_at),
            str(meta.last_seq), archive,
        )  # fmt: skip
        g = self._keys.g
        keys = [meta_key, self._keys.channel(channel_id, "members"), g + TOMBSTONES, wal_key]
        keys += [self._keys.channel(channel_id, name) for name in ("texts", "last", "idem", "replies")]
        keys.append(g + "channels:live")
        for member in members:
            keys += [g + "cursors:" + member, g + "member_channels:" + member]
        done = await self._purge_script(keys=keys, args=[channel_id, stone, record, len(members)])
        return deleted if done else None

    @read
    async def tombstone(self, channel_id: str) -> Tombstone | None:
        """The channel's tombstone, if retention purged it."""
        packed = await self._client.hget(self._keys.g + TOMBSTONES, channel_id)
        if packed is None:
            return None
        kind, state, reason, ended, purged, last, archive = (text(p) for p in unpack(as_bytes(packed)))
        return Tombstone(channel_id, kind, int(state), reason, float(ended), float(purged), int(last), archive)

    @read
    async def purge_audit(self, before: float, batch_rows: int) -> int:
        """Delete the audit records created before ``before`` among the ``batch_rows`` oldest ids."""
        g = self._keys.g
        ids = [int(m) for m in cast("list[bytes]", await self._client.zrange(g + "audit:all", 0, batch_rows - 1))]
        if not ids:
            return 0
        packed = await self._client.hmget(g + "audit", [str(i) for i in ids])
        old: list[tuple[int, str | None, str | None]] = []
        for audit_id, value in zip(ids, packed, strict=True):
            if value is None:  # deleted meanwhile (by another replica): drop what is left of its index entry
                old.append((audit_id, None, None))
                continue
            row = audit_row(audit_id, as_bytes(value))
            if row.created_at < before:
                old.append((audit_id, row.kind, row.subject_id))
        if not old:
            return 0
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.hdel(g + "audit", *(str(i) for i, _, _ in old))
            pipe.zrem(g + "audit:all", *(str(i) for i, _, _ in old))
            for audit_id, kind, subject in old:
                if kind is not None:
                    pipe.zrem(g + "audit:kind:" + kind, str(audit_id))
                if subject is not None:
                    pipe.zrem(g + "audit:subject:" + subject, str(audit_id))
            await pipe.execute()
        return len(old) if len(old) == len(ids) else min(len(old), batch_rows - 1)
