"""Knowledge service configuration: flags, environment variables and their defaults."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

BACKENDS = ("memory", "sqlite", "disk", "redis")


@dataclass(frozen=True)
class KnowledgeConfig:
    """Settings of one knowledge-service process."""

    host: str = "127.0.0.1"
    """Interface to listen on (AGENTNET_KNOWLEDGE_HOST)."""
    port: int = 50052
    """TCP port; 0 picks a free one and prints it (AGENTNET_KNOWLEDGE_PORT)."""
    backend: str = "sqlite"
    """Storage backend: memory, sqlite, disk or redis (AGENTNET_KNOWLEDGE_BACKEND)."""
    data_dir: Path = Path("data")
    """Directory for sqlite / disk storage (AGENTNET_DATA_DIR)."""
    redis_url: str = "redis://127.0.0.1:6379/0"
    """Redis URL for the redis backend (AGENTNET_REDIS_URL)."""
    log_level: str = "INFO"
    """Logging level (AGENTNET_LOG_LEVEL)."""


def parse_args(argv: list[str] | None = None) -> KnowledgeConfig:
    """Build a :class:`KnowledgeConfig` from command-line flags over environment variables."""
    env = os.environ
    d = KnowledgeConfig
    parser = argparse.ArgumentParser(
        prog="python -m knowledgesvc", description="agent-network knowledge service: path-addressed agent memory."
    )
    parser.add_argument("--host", default=env.get("AGENTNET_KNOWLEDGE_HOST", d.host), help="listen address")
    parser.add_argument(
        "--port", type=int, default=int(env.get("AGENTNET_KNOWLEDGE_PORT", d.port)), help="TCP port (0 = any free)"
    )
    parser.add_argument(
        "--backend", choices=BACKENDS, default=env.get("AGENTNET_KNOWLEDGE_BACKEND", d.backend), help="storage backend"
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(env.get("AGENTNET_DATA_DIR", str(d.data_dir))),
        help="directory for sqlite/disk storage",
    )
    parser.add_argument("--redis-url", default=env.get("AGENTNET_REDIS_URL", d.redis_url), help="redis backend URL")
    parser.add_argument("--log-level", default=env.get("AGENTNET_LOG_LEVEL", d.log_level), help="log level")
    a = parser.parse_args(argv)
    return KnowledgeConfig(
        host=a.host, port=a.port, backend=a.backend, data_dir=a.data_dir, redis_url=a.redis_url, log_level=a.log_level
    )
