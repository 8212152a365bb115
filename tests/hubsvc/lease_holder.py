"""A process holding one partition lease, for the SIGSTOP test of tests/hubsvc/test_ownership.py.

``python -m tests.hubsvc.lease_holder URL PREFIX COUNT PARTITION TTL``: opens the Redis store with
partitions, acquires ``PARTITION`` for ``TTL`` seconds and prints ``epoch <n>``, then renews the
lease every ``TTL / 5`` seconds. Each line ``commit <channel> <seq>`` read from stdin commits one
WAL row fenced with the epoch acquired at the start (what an in-flight commit of a paused owner
carries) and prints ``ok`` or ``moved`` (refused with cause ``partition_moved``).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys

from hubsvc.storage import Writes
from hubsvc.storage.redis_store import RedisHubStore
from netkernel.errors import PartitionMoved
from tests.hubsvc.test_redis_store import row


async def main(url: str, prefix: str, count: int, partition: int, ttl: float) -> None:
    store = RedisHubStore(url, prefix=prefix, partitions=count)
    await store.open()
    assert store.partitions is not None
    leases = store.partitions
    epoch = (await leases.acquire([partition], ttl)).gained[partition]
    print(f"epoch {epoch}", flush=True)

    async def renew() -> None:
        while True:
            await asyncio.sleep(ttl / 5)
            with contextlib.suppress(Exception):
                await leases.renew({partition: epoch}, ttl)

    renewing = asyncio.create_task(renew())
    reader = asyncio.StreamReader()
    await asyncio.get_running_loop().connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := (await reader.readline()).decode().split():
        _, channel_id, seq = line
        try:
            await store.commit(Writes(wal=[row(channel_id, int(seq))], fence={partition: epoch}))
        except PartitionMoved:
            print("moved", flush=True)
        else:
            print("ok", flush=True)
    renewing.cancel()
    await store.close()


if __name__ == "__main__":
    url, prefix, count, partition, ttl = sys.argv[1:]
    asyncio.run(main(url, prefix, int(count), int(partition), float(ttl)))
