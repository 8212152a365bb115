"""The optional parts of the ``agent-network`` distribution and the one error a missing part raises.

``pip install agent-network`` installs the SDK, the hub and the knowledge service (SQLite store); each
extra adds the packages of one optional part (pyproject.toml ``[project.optional-dependencies]``,
README.md "Install"). A module of an optional part imports its packages through :func:`require`, so
an absent one fails at import with an ``ImportError`` naming the extra to install, never deep inside
a call.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["DISTRIBUTION", "EXTRAS", "MissingExtra", "install_hint", "missing_extra", "require"]

DISTRIBUTION = "agent-network"
"""The distribution's name on pip's command line."""

EXTRAS: dict[str, str] = {
    "cli": "the agentnet command line (typer, rich)",
    "console": "the operator web console, agentnet console (starlette, uvicorn, jinja2)",
    "a2a": "the inbound A2A gateway, python -m a2agateway (a2a-sdk's HTTP and gRPC server, uvicorn)",
    "ag2": "the AG2 WebSocket gateway, python -m ag2gateway (websockets)",
    "redis": "the Redis stores: the hub's --store redis://, the knowledge service's and RedisKnowledgeStore",
    "langgraph": "agentsdk.langgraph.App (langgraph, langchain-core)",
    "langchain": "agentsdk.langchain.to_langchain_tools (langchain-core)",
    "disk": "DiskKnowledgeStore's change watching (watchdog)",
    "betterproto": "the betterproto2 flavour of the stubs (gen/python_betterproto)",
    "mcp": "agentsdk.mcp (agents using tools of MCP servers) and agentnet mcp (the network as an MCP server) (mcp)",
}
"""Each extra and the part it installs."""


class MissingExtra(ImportError):
    """An optional part's package is not installed; the message names the extra that installs it."""


def install_hint(extra: str) -> str:
    """The command that installs ``extra``."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def missing_extra(extra: str, exc: ImportError) -> MissingExtra:
    """The error for ``exc``, an optional part's failed import: what needs it and what to install.
    Raise it from the ``except ImportError`` around the part's imports."""
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}; the extras are {sorted(EXTRAS)}")
    package = exc.name or "a package"
    return MissingExtra(f"{EXTRAS[extra]} needs {package!r}, which is not installed: {install_hint(extra)}")


def require(extra: str, *modules: str) -> list[ModuleType]:
    """Import ``modules`` (top-level or dotted names), or raise :class:`MissingExtra` naming ``extra``."""
    loaded: list[ModuleType] = []
    for name in modules:
        try:
            loaded.append(importlib.import_module(name))
        except ImportError as exc:
            raise missing_extra(extra, exc) from exc
    return loaded
