"""``read_within``: a file's content in one backend call when it fits, only its size when it does not.

The knowledge service answers every small ``Read`` with it (one storage call instead of a size
lookup followed by the read), so each backend must agree on what it returns.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentsdk.errors import NotFound
from knowledgestore.types import FileInfo
from tests.knowledge.conftest import open_backend


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
