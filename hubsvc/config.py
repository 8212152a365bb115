"""Hub service configuration: flags, environment variables and their defaults."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

from hubsvc.core.options import HubOptions


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
    synchronous: str = "NORMAL"
    """SQLite synchronous mode: NORMAL survives a killed process, FULL also power loss (AGENTNET_HUB_SYNCHRONOUS)."""
    invite_ack_timeout: float = 30.0
    """Seconds to wait for invite acks (AGENTNET_INVITE_ACK_TIMEOUT)."""
    max_depth: int = 8
    """Delegation (and A2A call) depth limit (AGENTNET_MAX_DEPTH)."""
    a2a_token_ttl: float = 300.0
    """Seconds an A2A call token stays valid (AGENTNET_A2A_TOKEN_TTL)."""
    operator_token_file: Path | None = None
    """File holding the operator token for operator calls such as ListAudit; created with a
    random token when missing; default ``<data_dir>/hub-operator.token`` (AGENTNET_HUB_OPERATOR_TOKEN_FILE)."""

    def options(self) -> HubOptions:
        """The core options these settings imply."""
        return HubOptions(
            invite_ack_timeout=self.invite_ack_timeout, max_depth=self.max_depth, a2a_token_ttl=self.a2a_token_ttl
        )

    @property
    def operator_token_path(self) -> Path:
        """The operator token file this hub uses."""
        return (
            self.operator_token_file if self.operator_token_file is not None else self.data_dir / "hub-operator.token"
        )

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
    parser.add_argument(
        "--synchronous",
        choices=["NORMAL", "FULL"],
        default=env.get("AGENTNET_HUB_SYNCHRONOUS", "NORMAL"),
        help="SQLite durability: NORMAL survives a killed process; FULL also survives power loss (slower)",
    )
    parser.add_argument(
        "--invite-ack-timeout",
        type=float,
        default=float(env.get("AGENTNET_INVITE_ACK_TIMEOUT", "30")),
        help="seconds a new channel waits for every invite ack",
    )
    parser.add_argument(
        "--max-depth", type=int, default=int(env.get("AGENTNET_MAX_DEPTH", "8")), help="delegation depth limit"
    )
    parser.add_argument(
        "--a2a-token-ttl",
        type=float,
        default=float(env.get("AGENTNET_A2A_TOKEN_TTL", "300")),
        help="seconds an A2A call token stays valid (refresh with RefreshCallToken)",
    )
    parser.add_argument(
        "--operator-token-file",
        type=Path,
        default=Path(env["AGENTNET_HUB_OPERATOR_TOKEN_FILE"]) if env.get("AGENTNET_HUB_OPERATOR_TOKEN_FILE") else None,
        help="file with the operator token for ListAudit (default: <data-dir>/hub-operator.token, generated)",
    )
    args = parser.parse_args(argv)
    if args.a2a_token_ttl <= 0:
        parser.error("--a2a-token-ttl must be positive")
    return HubConfig(
        host=args.host,
        port=args.port,
        data_dir=args.data_dir,
        db_path=args.db,
        log_level=args.log_level,
        synchronous=args.synchronous,
        invite_ack_timeout=args.invite_ack_timeout,
        max_depth=args.max_depth,
        a2a_token_ttl=args.a2a_token_ttl,
        operator_token_file=args.operator_token_file,
    )
