"""OperatorService.Backup: a consistent copy of the hub's store, streamed to the operator.

Why a stream and not a path on the hub's host: a request naming a file the hub writes would be a
file-write primitive for whoever holds the operator token (overwrite any file the hub's user may
write). Streamed, the copy goes where the operator's own ``agentnet backup OUT`` writes it, with
the operator's permissions, and works the same against a hub on another host. The price is a
temporary copy beside the database (in a new 0700 directory, deleted once streamed or when the
client goes) and the copy's bytes on the wire.
"""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path

from agentnet.v1 import operator_pb2

from hubsvc.core.util import to_timestamp
from hubsvc.storage import HubStore
from hubsvc.storage.history import HistoryStore
from netkernel.errors import FailedPrecondition, LimitExceeded

CHUNK_BYTES = 1 << 20
"""Bytes of the file per BackupResponse."""


def _read_chunk(path: Path, offset: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(CHUNK_BYTES)


async def backup_stream(store: HubStore) -> AsyncIterator[operator_pb2.BackupResponse]:
    """Copy the store into a private temporary file beside it, stream the file, then delete it."""
    kind, _ = store.location()
    if not isinstance(store, HistoryStore) or kind != "sqlite":
        raise FailedPrecondition(
            f"this hub's store ({kind}) is not backed up through the hub: back a Redis server up with its own "
            'snapshot (BGSAVE, then copy the RDB file), as docs/operations.md "Data over time" shows.',
            metadata={"store_kind": kind},
        )
    _, address = store.location()
    if address in ("", ":memory:"):
        raise FailedPrecondition("this hub's SQLite database is in memory: there is no file to back up.")
    if store.backup_running():
        raise LimitExceeded("a backup of this hub is being copied already: wait for it to finish and ask again.")
    directory = await asyncio.to_thread(store.backup_dir)
    try:
        target = directory / "hub-backup.db"
        taken_at = time.time()
        seconds = await store.backup_to(target)
        digest = hashlib.sha256()
        offset = 0
        while True:
            chunk = await asyncio.to_thread(_read_chunk, target, offset)
            if not chunk:
                break
            digest.update(chunk)
            offset += len(chunk)
            yield operator_pb2.BackupResponse(data=chunk)
        # Deleted before the summary goes out: a client that has the summary finds no copy left behind
        # (the finally below would run only once the summary's write completed, after the client read it).
        await asyncio.to_thread(shutil.rmtree, directory, True)
        yield operator_pb2.BackupResponse(
            summary=operator_pb2.BackupSummary(
                store_kind=kind,
                size_bytes=offset,
                sha256=digest.hexdigest(),
                copy_seconds=seconds,
                taken_at=to_timestamp(taken_at),
            )
        )
    finally:
        await asyncio.to_thread(shutil.rmtree, directory, True)
