"""The Redis store's reads of channels: records, membership, WALs, envelopes, texts.

Every read fails with UNAVAILABLE when Redis does not answer in time, and is tried once more when
its connection broke (:func:`~hubsvc.storage.redis_store.failures.read`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, cast

from redis.commands.core import AsyncScript

from hubsvc.storage.base import ChannelRow
from hubsvc.storage.redis_connect import RedisClient
from hubsvc.storage.redis_store.codec import as_bytes, datas, idem_field, text, unpack
from hubsvc.storage.redis_store.failures import read
from hubsvc.storage.redis_store.keys import KeyLayout

TEXT_SCAN_CHUNK = 2000
"""EV_TEXT rows one search script call examines at most (it blocks Redis while it runs)."""
PAGE = 1000
"""Ids read per call where a read pages through an index."""
WAL_CHANNELS = 256
"""Channels whose first WAL page one pipeline reads (hydrate)."""


class ChannelReads:
    """The channel reads of :class:`~hubsvc.storage.redis_store.store.RedisHubStore` (a mixin:
    the store sets the client, the key layout and the registered ``scan_texts.lua``)."""

    _client: RedisClient
    _keys: KeyLayout
    _scan_script: AsyncScript

    @read
    async def channel_seq(self, channel_id: str) -> int:
        """The channel's last committed seq (its ``last`` key)."""
        value = await self._client.get(self._keys.channel(channel_id, "last"))
        return 0 if value is None else int(value)

    @read
    async def channel_seqs(self, channel_ids: Sequence[str]) -> list[int]:
        """Each channel's last committed seq, in order (one pipeline: on a spread Cluster the keys
        are in several slots, which one MGET cannot read)."""
        if not channel_ids:
            return []
        async with self._client.pipeline(transaction=False) as pipe:
            for channel_id in channel_ids:
                pipe.get(self._keys.channel(channel_id, "last"))
            values = await pipe.execute()
        return [0 if value is None else int(value) for value in values]

    @read
    async def load_live_channels(self) -> list[ChannelRow]:
        """Channels not yet ended."""
        ids = sorted(text(m) for m in await self._client.smembers(self._keys.g + "channels:live"))
        return [row for row in await self._channels(ids) if row is not None and row.live]

    async def _channels(self, ids: Sequence[str]) -> list[ChannelRow | None]:
        async with self._client.pipeline(transaction=False) as pipe:
            for channel_id in ids:
                pipe.hmget(self._keys.channel(channel_id, "meta"), ["live", "record", "seed"])
            found = await pipe.execute()
        out: list[ChannelRow | None] = []
        for channel_id, (live, record, seed) in zip(ids, found, strict=True):
            out.append(None if record is None else ChannelRow(channel_id, live == b"1", bytes(record), bytes(seed)))
        return out

    @read
    async def get_channel(self, channel_id: str) -> ChannelRow | None:
        """One channel."""
        return (await self._channels([channel_id]))[0]

    @read
    async def list_channels_for(
        self, agent_id: str, *, include_ended: bool, limit: int, before: int = 0
    ) -> list[tuple[int, ChannelRow]]:
        """Channels of one member, newest first (by creation order, the zset's scores)."""
        key = self._keys.g + "member_channels:" + agent_id
        out: list[tuple[int, ChannelRow]] = []
        top = f"({before}" if before else "+inf"
        start = 0
        while limit < 0 or len(out) < limit:
            found = cast(
                "list[tuple[bytes, float]]",
                await self._client.zrevrangebyscore(key, top, "-inf", start=start, num=PAGE, withscores=True),
            )
            rows = await self._channels([text(m) for m, _ in found])
            for (_, order), row in zip(found, rows, strict=True):
                if row is not None and (include_ended or row.live):
                    out.append((int(order), row))
            if len(found) < PAGE:
                break
            start += PAGE
        return out[:limit]

    @read
    async def list_channels(self, *, live_only: bool, before: int, limit: int) -> list[tuple[int, ChannelRow]]:
        """Every channel, newest first (by creation order). Keeps no global index of ended channels:
        every call SCANs the channels' meta keys (an operator read, not a hot path)."""
        if self._keys.spread:  # the creation order is a global index (written by each channel's first global part)
            ordered_all = cast(
                "list[tuple[bytes, float]]",
                await self._client.zrange(self._keys.g + "channels:order", 0, -1, withscores=True),
            )
            live = {text(m) for m in await self._client.smembers(self._keys.g + "channels:live")} if live_only else None
            picked = sorted(
                (
                    (int(o), c)
                    for c, o in ((text(m), score) for m, score in ordered_all)
                    if (live is None or c in live) and (not before or int(o) < before)
                ),
                reverse=True,
            )[:limit]
            spread_rows = await self._channels([c for _, c in picked])
            return [(o, row) for (o, _), row in zip(picked, spread_rows, strict=True) if row is not None]
        if live_only:
            ids = [text(m) for m in await self._client.smembers(self._keys.g + "channels:live")]
        else:
            ids = []
            async for key in self._client.scan_iter(match=self._keys.meta_pattern(), count=1000):
                channel_id = self._keys.channel_id_of_meta(text(key))
                if channel_id is not None:
                    ids.append(channel_id)
        if not ids:
            return []
        async with self._client.pipeline(transaction=False) as pipe:
            for channel_id in ids:
                pipe.hget(self._keys.channel(channel_id, "meta"), "order")
            orders = await pipe.execute()
        ordered = sorted(
            (
                (int(o), c)
                for o, c in zip(orders, ids, strict=True)
                if o is not None and (not before or int(o) < before)
            ),
            reverse=True,
        )[:limit]
        rows = await self._channels([c for _, c in ordered])
        return [(o, row) for (o, _), row in zip(ordered, rows, strict=True) if row is not None]

    @read
    async def read_wal(self, channel_id: str, from_seq: int, until_seq: int, limit: int) -> list[bytes]:
        """A seq range of one channel."""
        entries = await self._client.xrange(
            self._keys.channel(channel_id, "wal"),
            min=f"{max(from_seq, 0)}-0",
            max=f"{until_seq}-0" if until_seq else "+",
            count=limit if limit > 0 else None,
        )
        return datas(entries)

    async def scan_wal(
        self, channel_ids: Sequence[str], *, batch: int = 5000
    ) -> AsyncIterator[tuple[str, list[bytes]]]:
        """Stream whole WALs channel by channel, in seq order, ``batch`` envelopes a page (XRANGE pages).

        The first page of up to :data:`WAL_CHANNELS` channels is read in one pipeline (on a
        Cluster, one batch per node), the further pages of a long WAL one call each."""
        ids = list(channel_ids)
        for low_index in range(0, len(ids), WAL_CHANNELS):
            chunk = ids[low_index : low_index + WAL_CHANNELS]
            firsts = await self._wal_first_pages([self._keys.channel(c, "wal") for c in chunk], batch)
            for channel_id, entries in zip(chunk, firsts, strict=True):
                key = self._keys.channel(channel_id, "wal")
                while entries:
                    yield channel_id, datas(entries)
                    if len(entries) < batch:
                        break
                    entries = await self._wal_page(key, "(" + text(entries[-1][0] or b""), batch)

    @read
    async def _wal_first_pages(self, keys: Sequence[str], batch: int) -> list[Any]:
        async with self._client.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.xrange(key, min="-", max="+", count=batch)
            return await pipe.execute()

    @read
    async def _wal_page(self, key: str, low: str, batch: int) -> Any:
        return await self._client.xrange(key, min=low, max="+", count=batch)

    async def _envelope_at(self, channel_id: str, seq: int) -> bytes | None:
        entries = await self._client.xrange(self._keys.channel(channel_id, "wal"), min=f"{seq}-0", max=f"{seq}-0")
        found = datas(entries)
        return found[0] if found else None

    @read
    async def find_envelope(self, envelope_id: str) -> bytes | None:
        """Envelope by id (the global index names its channel and seq)."""
        where = await self._client.hget(self._keys.g + "envelopes", envelope_id)
        if where is None:
            return None
        channel_id, seq = unpack(as_bytes(where))
        return await self._envelope_at(channel_id.decode(), int(seq))

    @read
    async def find_idempotent(self, channel_id: str, sender_id: str, key: str) -> bytes | None:
        """The envelope written under an idempotency key."""
        seq = await self._client.hget(self._keys.channel(channel_id, "idem"), idem_field(sender_id, key))
        return None if seq is None else await self._envelope_at(channel_id, int(seq))

    @read
    async def find_idempotent_many(self, channel_id: str, sender_id: str, keys: Sequence[str]) -> dict[str, bytes]:
        """The envelopes written under any of ``keys``: one HMGET of the channel's idempotency hash, then a
        read of each hit (a retry; fresh keys, the usual case, cost the HMGET alone)."""
        seqs = await self._client.hmget(
            self._keys.channel(channel_id, "idem"), [idem_field(sender_id, k) for k in keys]
        )
        found: dict[str, bytes] = {}
        for key, seq in zip(keys, seqs, strict=True):
            if seq is not None and (data := await self._envelope_at(channel_id, int(seq))) is not None:
                found[key] = data
        return found

    @read
    async def find_reply(self, channel_id: str, sender_id: str, causation_id: str) -> bytes | None:
        """The first envelope ``sender_id`` wrote to the channel answering ``causation_id`` (the replies hash)."""
        seq = await self._client.hget(self._keys.channel(channel_id, "replies"), idem_field(sender_id, causation_id))
        return None if seq is None else await self._envelope_at(channel_id, int(seq))

    @read
    async def search_text(self, channel_ids: Sequence[str], query: str, limit: int) -> list[bytes]:
        """ASCII-case-insensitive substring search over EV_TEXT bodies (an exact scan, chunked per call)."""
        return await self._texts(channel_ids, "q", query, limit)

    @read
    async def texts_from(self, channel_ids: Sequence[str], sender_id: str, limit: int) -> list[bytes]:
        """Latest texts of one sender."""
        return await self._texts(channel_ids, "s", sender_id, limit)

    async def _texts(self, channel_ids: Sequence[str], mode: str, needle: str, limit: int) -> list[bytes]:
        """Newest matching EV_TEXT envelopes of the channels (by created_at, then seq), at most ``limit``."""
        if limit <= 0:
            return []
        hits: list[tuple[str, int, str]] = []  # (created_at, seq, channel_id)
        for channel_id in channel_ids:
            upper, found = "+", 0
            while found < limit:
                done, last, out = cast(
                    "list[Any]",
                    await self._scan_script(
                        keys=[self._keys.channel(channel_id, "texts")],
                        args=[upper, TEXT_SCAN_CHUNK, mode, needle, limit - found],
                    ),
                )
                for j in range(0, len(out), 2):
                    hits.append((text(out[j + 1]), int(text(out[j]).split("-")[0]), channel_id))
                found += len(out) // 2
                if int(done) or not last:
                    break
                upper = "(" + text(last)
        hits.sort(reverse=True)
        hits = hits[:limit]
        async with self._client.pipeline(transaction=False) as pipe:
            for _, seq, channel_id in hits:
                pipe.xrange(self._keys.channel(channel_id, "wal"), min=f"{seq}-0", max=f"{seq}-0")
            found_entries = await pipe.execute()
        return [bytes(entries[0][1][b"d"]) for entries in found_entries if entries]
