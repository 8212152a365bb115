"""``read_within``: a file's content in one backend call when it fits, only its size when it does not.

The knowledge service answers every small ``Read`` with it (one storage call instead of a size
lookup followed by the read), so each backend must agree on what it returns.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentsdk.errors import NotFound, OutOfRange
from agentsdk.knowledge import RemoteKnowledgeStore
from knowledgestore.types import FileInfo
from knowledgesvc.auth import TokenAuthority
from knowledgesvc.server import start_knowledge
from tests.knowledgesvc.conftest import open_backend
from tests.knowledgesvc.helpers import TOKEN


@pytest.mark.parametrize("kind", ["memory", "sqlite", "disk", "redis"])
async def test_read_within_returns_content_that_fits_and_only_the_size_otherwise(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with await open_backend(kind, request, tmp_path) as backend:
        store = backend.namespace("ns")
        await store.write("/small", "héllo")  # 6 bytes in UTF-8
        await store.append("/small", "!")
        await store.write("/empty", "")
        assert await store.read_within("/small", 7) == ("héllo!", FileInfo(7, 2))
        assert await store.read_within("/small", 1024) == ("héllo!", FileInfo(7, 2))
        assert await store.read_within("/small", 6) == 7  # too big: the size, nothing loaded
        assert await store.read_within("/empty", 0) == ("", FileInfo(0, 1))
        with pytest.raises(NotFound):
            await store.read_within("/missing", 1024)
        with pytest.raises(NotFound):
            await backend.namespace("other").read_within("/small", 1024)  # namespaces stay apart


@pytest.mark.parametrize("kind", ["memory", "sqlite", "disk", "redis"])
async def test_read_range_within_returns_a_range_that_fits_and_only_its_length_otherwise(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with await open_backend(kind, request, tmp_path) as backend:
        store = backend.namespace("ns")
        await store.write("/log", "ab")
        await store.append("/log", "cé")  # 5 bytes: a b c 0xC3 0xA9
        assert await store.read_range_within("/log", 0, 5) == "abcé"
        assert await store.read_range_within("/log", 2, 3) == "cé"
        assert await store.read_range_within("/log", 5, 0) == ""  # at the end: nothing more
        assert await store.read_range_within("/log", 0, 4) == 5  # too long: its length, nothing loaded
        assert await store.read_range_within("/log", 1, 3) == 4
        with pytest.raises(OutOfRange):
            await store.read_range_within("/log", 4, 1024)  # inside "é"
        with pytest.raises(OutOfRange):
            await store.read_range_within("/log", 6, 1024)  # past the end
        with pytest.raises(NotFound):
            await store.read_range_within("/missing", 0, 1024)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_service_reads_files_either_side_of_the_small_read_size(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Reads and ranges at, below and above the one-call size are answered; all of the budget comes back."""
    budget_bytes = 64 * 1024  # the one-call size is then 1 KiB (1/64 of the budget)
    small = budget_bytes // 64
    sizes = [0, 1, small - 1, small, small + 1, 3 * small, budget_bytes + 5]
    async with await open_backend(kind, request, tmp_path) as backend:
        for size in sizes:
            await backend.namespace("ns").write(f"/f{size}", "a" * size)
        server = await start_knowledge(backend, TokenAuthority({TOKEN: ["*"]}), read_budget_bytes=budget_bytes)
        try:
            async with RemoteKnowledgeStore(server.target, namespace="ns", credential=TOKEN) as store:
                results = await asyncio.gather(*(store.read_info(f"/f{size}") for size in sizes * 4))
                ranges = await asyncio.gather(*(store.read_range(f"/f{size}", 1) for size in sizes[1:] * 4))
                assert await store.read_range("/f0", 0) == ""
                with pytest.raises(NotFound):
                    await store.read("/missing")
            assert results == [("a" * size, FileInfo(size, 1)) for size in sizes * 4]
            assert ranges == ["a" * (size - 1) for size in sizes[1:] * 4]
            budget = server.servicer.read_budget
            assert budget.in_use == 0
            assert 0 < budget.peak <= budget.limit
        finally:
            await server.stop(0)
