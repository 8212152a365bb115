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


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A module that sets ``HUB_PATHS = ("grpc", "in-process")`` runs each test using ``hub`` once per
    path its client takes to the embedded hub (``Hub.open(in_process=...)``)."""
    paths = getattr(metafunc.module, "HUB_PATHS", None)
    if paths and "hub_path" in metafunc.fixturenames:
        metafunc.parametrize("hub_path", paths)


@pytest.fixture
def hub_path() -> str:
    """How the ``hub`` fixture's client reaches its hub: "grpc" (its port), or "in-process"."""
    return "grpc"


@pytest.fixture
async def hub(hub_path: str) -> AsyncIterator[Hub]:
    """An embedded hub with the default options (``Hub.open()``), stopped after the test; a module
    that needs another kind of hub defines its own ``hub``."""
    async with Hub.open(in_process=hub_path == "in-process") as h:
        yield h
