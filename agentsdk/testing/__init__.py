"""Test helpers: a real local OpenAI-compatible server that answers from a script.

``ScriptedConfig`` (in :mod:`agentsdk.config`) is the no-HTTP alternative.
"""

from __future__ import annotations

from agentsdk.testing.openai_server import (
    Rule,
    ScriptedOpenAIServer,
    ServerError,
    ServerReply,
    completion_chunks,
    completion_json,
    text_pieces,
)

__all__ = [
    "Rule",
    "ScriptedOpenAIServer",
    "ServerError",
    "ServerReply",
    "completion_chunks",
    "completion_json",
    "text_pieces",
]
