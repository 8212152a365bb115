"""agentsdk: the Python SDK of agent-network.

The LLM half: :class:`Agent` (``await agent.ask(...)`` → :class:`Reply`), tools
(:func:`tool`, :class:`Tool`, :class:`Inject`), the conversation :class:`Stream`,
and model configs (:class:`OpenAIConfig`, :class:`ScriptedConfig`); ``KnowledgeConfig``
(memory, aggregation, compaction — ``docs/memory.md``) is importable too. Names are
imported on first access so ``import agentsdk`` stays cheap. See ``docs/agents.md``.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING, Any

from netkernel.grpc_env import GRPC_EXPERIMENTS

# gRPC reads this once, as it starts: only before grpc is imported (docs/operations.md#grpc-threads-grpc_experiments).
if "grpc" not in sys.modules:
    os.environ.setdefault("GRPC_EXPERIMENTS", GRPC_EXPERIMENTS)

if TYPE_CHECKING:
    from agentsdk.agent import Agent, Reply
    from agentsdk.config import OpenAIConfig, ScriptedConfig
    from agentsdk.knowledge_config import KnowledgeConfig as KnowledgeConfig
    from agentsdk.stream import Stream
    from agentsdk.tools import Inject, Tool, tool

__all__ = ["Agent", "Inject", "OpenAIConfig", "Reply", "ScriptedConfig", "Stream", "Tool", "tool"]

_LAZY = {
    "Agent": "agentsdk.agent",
    "Reply": "agentsdk.agent",
    "OpenAIConfig": "agentsdk.config",
    "ScriptedConfig": "agentsdk.config",
    "KnowledgeConfig": "agentsdk.knowledge_config",
    "Stream": "agentsdk.stream",
    "Inject": "agentsdk.tools",
    "Tool": "agentsdk.tools",
    "tool": "agentsdk.tools",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentsdk' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
