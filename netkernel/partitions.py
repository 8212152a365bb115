"""Which partition a channel falls into: one hash every language can compute.

Hub replicas sharing a Redis store divide the channels into a fixed number of partitions,
each owned by one replica at a time (docs/scale-out.md, "Partitions and ownership"). The
partition of a channel is

    CRC-32 (IEEE 802.3, the one of zlib, Go's ``hash/crc32.ChecksumIEEE``, Java's
    ``java.util.zip.CRC32``) of the channel id's UTF-8 bytes, as an unsigned 32-bit number,
    modulo the partition count.

It lives here, shared by the hub and the SDK, so a client can route a post to the replica that
owns its channel (as Redis Cluster clients route by slot) once it knows the partition count
and the owners. ``partition_of("123456789", 64) == 38`` (CRC-32 ``0xCBF43926``).
"""

from __future__ import annotations

import zlib

MAX_PARTITIONS = 16384
"""The largest partition count a hub accepts (``--partitions``)."""


def partition_of(channel_id: str, count: int) -> int:
    """The partition of ``channel_id`` among ``count`` partitions: CRC-32 of its UTF-8 bytes mod ``count``."""
    if not 1 <= count <= MAX_PARTITIONS:
        raise ValueError(f"a partition count must be in [1, {MAX_PARTITIONS}], not {count!r}")
    return zlib.crc32(channel_id.encode("utf-8")) % count
