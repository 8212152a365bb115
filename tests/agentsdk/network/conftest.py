"""Fixtures of the SDK network tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentsdk.testing import ScriptedOpenAIServer


@pytest.fixture
def servers() -> Iterator[list[ScriptedOpenAIServer]]:
    """Servers started by :func:`tests.agentsdk.network.llm.llm` in a test, stopped after it."""
    made: list[ScriptedOpenAIServer] = []
    yield made
    for s in made:
        s.stop()
