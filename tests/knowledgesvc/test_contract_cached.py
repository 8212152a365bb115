"""The KnowledgeStore contract (test_contract.py) again, through RemoteKnowledgeStore with its read cache on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from agentsdk.knowledge import KnowledgeStore, RemoteKnowledgeStore
from tests.knowledgesvc import test_contract
from tests.knowledgesvc.conftest import open_backend
from tests.knowledgesvc.helpers import TOKEN, serve_in_process

# The contract's tests, collected here once more with the `store` fixture below.
globals().update({name: test for name, test in vars(test_contract).items() if name.startswith("test_")})


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[KnowledgeStore]:
    """A backend behind the real service, used through a caching RemoteKnowledgeStore."""
    async with AsyncExitStack() as stack:
        backend = await stack.enter_async_context(await open_backend(request.param, request, tmp_path))
        target = await stack.enter_async_context(serve_in_process(backend))
        remote = RemoteKnowledgeStore(target, namespace="ns1", credential=TOKEN, cache=True)
        yield await stack.enter_async_context(remote)
