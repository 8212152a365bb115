"""Oversized reads are refused before the file is loaded, whatever the backend."""

from __future__ import annotations

import asyncio
import tracemalloc
from pathlib import Path

import pytest

from agentsdk.errors import PayloadTooLarge
from agentsdk.knowledge import RemoteKnowledgeStore
from knowledgesvc.servicer import MAX_RESPONSE_BYTES
from tests.knowledge.conftest import open_backend
from tests.knowledge.helpers import TOKEN, serve_in_process

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
