"""Fixtures: a real ScriptedOpenAIServer on port 0 and an OpenAIConfig pointed at it."""

from tests.openai_fixtures import config, server

__all__ = ["config", "server"]
