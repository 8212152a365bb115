"""Hub service configuration: flags, environment variables and their defaults."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class HubConfig:
    """Settings of one hub process."""

    host: str = "127.0.0.1"
    """Interface to listen on (AGENTNET_HUB_HOST)."""
    port: int = 50051
    """TCP port; 0 picks a free one and prints it (AGENTNET_HUB_PORT)."""
    data_dir: Path = Path("data")
    """Directory for the embedded SQLite database (AGENTNET_DATA_DIR)."""
    db_path: Path | None = None
    """SQLite file; default ``<data_dir>/hub.db`` (AGENTNET_HUB_DB)."""
    log_level: str = "INFO"
    """Logging level (AGENTNET_LOG_LEVEL)."""

    @property
    def database(self) -> Path:
        """The SQLite file this hub uses."""
        return self.db_path if self.db_path is not None else self.data_dir / "hub.db"


def parse_args(argv: list[str] | None = None) -> HubConfig:
    """Build a :class:`HubConfig` from command-line flags over environment variables."""
    env = os.environ
    parser = argparse.ArgumentParser(
        prog="python -m hubsvc",
        description="agent-network hub: identities, channels, durable WAL, delivery, tasks, A2A, tools.",
    )
    parser.add_argument("--host", default=env.get("AGENTNET_HUB_HOST", HubConfig.host), help="listen address")
    parser.add_argument(
        "--port", type=int, default=int(env.get("AGENTNET_HUB_PORT", HubConfig.port)), help="TCP port (0 = any free)"
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(env.get("AGENTNET_DATA_DIR", str(HubConfig.data_dir))),
        help="directory for embedded storage",
    )
    parser.add_argument(
        "--db",
        type=Path,
        default=Path(env["AGENTNET_HUB_DB"]) if env.get("AGENTNET_HUB_DB") else None,
        help="SQLite file (default: <data-dir>/hub.db)",
    )
    parser.add_argument("--log-level", default=env.get("AGENTNET_LOG_LEVEL", HubConfig.log_level), help="log level")
    args = parser.parse_args(argv)
    return HubConfig(host=args.host, port=args.port, data_dir=args.data_dir, db_path=args.db, log_level=args.log_level)
