"""Fixtures of the SDK network tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from agentsdk.network import Hub
from agentsdk.testing import ScriptedOpenAIServer


@pytest.fixture
def servers() -> Iterator[list[ScriptedOpenAIServer]]:
    """Servers started by :func:`tests.agentsdk.network.llm.llm` in a test, stopped after it."""
    made: list[ScriptedOpenAIServer] = []
    yield made
    for s in made:
        s.stop()


@pytest.fixture
async def hub() -> AsyncIterator[Hub]:
    """An embedded hub with the default options (``Hub.open()``), stopped after the test; a module
    that needs another kind of hub defines its own ``hub``."""
    async with Hub.open() as h:
        yield h
