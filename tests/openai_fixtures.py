"""Fixtures shared by the LLM test packages: a real ScriptedOpenAIServer on port 0 and an
OpenAIConfig pointed at it (imported by their conftest.py files)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agentsdk.config import OpenAIConfig
from agentsdk.testing import ScriptedOpenAIServer

__all__ = ["config", "server"]


@pytest.fixture
async def server() -> AsyncIterator[ScriptedOpenAIServer]:
    """A scripted OpenAI-compatible server over real HTTP."""
    async with ScriptedOpenAIServer(api_key="test") as srv:
        yield srv


@pytest.fixture
async def config(server: ScriptedOpenAIServer) -> AsyncIterator[OpenAIConfig]:
    """The real openai client's config for ``server``."""
    cfg = OpenAIConfig(model="gpt-test", base_url=server.base_url, api_key="test", max_retries=0, timeout=10)
    yield cfg
    await cfg.aclose()
