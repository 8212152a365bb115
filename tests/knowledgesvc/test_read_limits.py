"""Oversized reads are refused before the file is loaded, whatever the backend."""

from __future__ import annotations

import asyncio
import tracemalloc
from pathlib import Path

import pytest

from agentsdk.errors import PayloadTooLarge
from agentsdk.knowledge import RemoteKnowledgeStore
from knowledgestore.sqlite_store import SqliteKnowledgeStore
from knowledgesvc.auth import TokenAuthority
from knowledgesvc.server import start_knowledge
from knowledgesvc.servicer import MAX_RESPONSE_BYTES
from tests.knowledgesvc.conftest import open_backend
from tests.knowledgesvc.helpers import TOKEN, serve_in_process

FILE_BYTES = MAX_RESPONSE_BYTES + 8 * 1024 * 1024
READERS = 4


@pytest.mark.parametrize("kind", ["memory", "sqlite", "disk", "redis"])
async def test_concurrent_oversized_reads_allocate_nothing_like_the_file(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with await open_backend(kind, request, tmp_path) as backend:
        await backend.namespace("ns").write("/huge", "x" * FILE_BYTES)
        async with serve_in_process(backend) as address:
            async with RemoteKnowledgeStore(address, namespace="ns", credential=TOKEN) as store:
                await store.exists("/huge")  # the connection is up before we measure
                tracemalloc.start()
                try:
                    reads = [store.read("/huge") for _ in range(READERS)]
                    ranges = [store.read_range("/huge", 0) for _ in range(READERS)]
                    outcomes = await asyncio.gather(*reads, *ranges, return_exceptions=True)
                    _, peak = tracemalloc.get_traced_memory()
                finally:
                    tracemalloc.stop()
                assert all(isinstance(o, PayloadTooLarge) for o in outcomes), outcomes
                # Before, each read loaded the whole file (and decoded it) before checking its size.
                assert peak < FILE_BYTES // 2, f"{peak} bytes allocated to refuse {2 * READERS} reads"
                # A read from an offset that fits is still answered.
                assert await store.read_range("/huge", FILE_BYTES - 3) == "xxx"


async def test_concurrent_reads_load_at_most_the_read_budget_at_once(tmp_path: Path) -> None:
    """Eight reads of 3 MiB files under a 4 MiB budget all succeed, one or so at a time."""
    size = 3 * 1024 * 1024
    backend = SqliteKnowledgeStore(tmp_path / "knowledge.db")
    await backend.open()
    try:
        for i in range(READERS):
            await backend.namespace("ns").write(f"/big{i}", str(i) * size)
        server = await start_knowledge(backend, TokenAuthority({TOKEN: ["*"]}), read_budget_bytes=4 * 1024 * 1024)
        try:
            async with RemoteKnowledgeStore(server.target, namespace="ns", credential=TOKEN) as store:
                reads = [store.read(f"/big{i}") for i in range(READERS)]
                ranges = [store.read_range(f"/big{i}", 1) for i in range(READERS)]
                contents = await asyncio.gather(*reads, *ranges)
            assert contents == [str(i) * size for i in range(READERS)] + [str(i) * (size - 1) for i in range(READERS)]
            budget = server.servicer.read_budget
            assert budget.in_use == 0
            assert size <= budget.peak <= budget.limit  # never two 3 MiB files at once
        finally:
            await server.stop(0)
    finally:
        await backend.close()
