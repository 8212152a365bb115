"""The gateway's settings: flags, environment variables and their defaults."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Any

from agentsdk.tls import TlsConfig, add_hub_tls_arguments, hub_tls_from_args

DEFAULT_MAX_REQUEST_BYTES = 1024 * 1024 + 64 * 1024
"""A JSON-RPC body or gRPC message: the hub's 1 MiB message limit plus room for the envelope."""


@dataclass(frozen=True)
class GatewayOptions:
    """Settings of one gateway process (each has a flag and an ``AGENTNET_A2A_*`` variable)."""

    host: str = "127.0.0.1"
    """Interface both listeners bind (AGENTNET_A2A_HOST)."""
    port: int = 8090
    """HTTP port (cards, JSON-RPC); 0 picks a free one (AGENTNET_A2A_PORT)."""
    grpc_port: int = 8091
    """gRPC port (A2A's gRPC binding); 0 picks a free one; -1 = no gRPC listener (AGENTNET_A2A_GRPC_PORT)."""
    hub: str = "127.0.0.1:50051"
    """The hub's gRPC address (AGENTNET_A2A_HUB, else AGENTNET_HUB)."""
    public_url: str = ""
    """Base URL clients reach the HTTP listener at, written into cards; "" = http://HOST:PORT
    (AGENTNET_A2A_PUBLIC_URL)."""
    public_grpc: str = ""
    """host:port clients reach the gRPC listener at, written into cards; "" = HOST:GRPC_PORT
    (AGENTNET_A2A_PUBLIC_GRPC)."""
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    """Largest JSON-RPC request body or gRPC request message; larger is refused (AGENTNET_A2A_MAX_REQUEST_BYTES)."""
    max_tasks_listed: int = 1000
    """Executions read from the hub to answer one ListTasks or to follow one task's calls, and agents
    read to list the cards (AGENTNET_A2A_MAX_TASKS_LISTED)."""
    hub_tls: TlsConfig | None = None
    """How the gateway verifies the hub (None: plaintext): ``--hub-tls``, ``--hub-ca-file``,
    ``--hub-cert-file`` + ``--hub-key-file``, ``--hub-server-name`` (``AGENTNET_A2A_HUB_TLS`` …)."""
    log_level: str = "INFO"
    """Logging level (AGENTNET_LOG_LEVEL)."""

    def __post_init__(self) -> None:
        if self.max_request_bytes < 1024:
            raise ValueError("max_request_bytes must be at least 1024")
        if self.max_tasks_listed < 1:
            raise ValueError("max_tasks_listed must be at least 1")


_FLAGS: tuple[tuple[str, str, type, str], ...] = (
    ("host", "HOST", str, "interface to listen on"),
    ("port", "PORT", int, "HTTP port for cards and JSON-RPC (0 = any free port)"),
    ("grpc_port", "GRPC_PORT", int, "gRPC port (0 = any free port, -1 = no gRPC listener)"),
    ("hub", "HUB", str, "the hub's gRPC address"),
    ("public_url", "PUBLIC_URL", str, "base URL written into cards (default http://HOST:PORT)"),
    ("public_grpc", "PUBLIC_GRPC", str, "host:port of the gRPC listener written into cards"),
    ("max_request_bytes", "MAX_REQUEST_BYTES", int, "largest request body / gRPC message"),
    ("max_tasks_listed", "MAX_TASKS_LISTED", int, "executions read from the hub per ListTasks"),
)


def parse_options(argv: list[str] | None = None) -> GatewayOptions:
    """Options from flags, falling back to ``AGENTNET_A2A_*`` variables, then the defaults."""
    env = os.environ
    defaults = GatewayOptions()
    parser = argparse.ArgumentParser(prog="python -m a2agateway", description="The inbound A2A gateway of a hub.")
    for name, var, kind, text in _FLAGS:
        default: Any = env.get(f"AGENTNET_A2A_{var}")
        if default is None and name == "hub":
            default = env.get("AGENTNET_HUB")
        default = kind(default) if default is not None else getattr(defaults, name)
        parser.add_argument(
            "--" + name.replace("_", "-"), type=kind, default=default, help=f"{text} (AGENTNET_A2A_{var})"
        )
    add_hub_tls_arguments(parser, "AGENTNET_A2A_")
    parser.add_argument("--log-level", default=env.get("AGENTNET_LOG_LEVEL", defaults.log_level))
    args = parser.parse_args(argv)
    hub_tls = hub_tls_from_args(parser, args)
    try:
        return GatewayOptions(hub_tls=hub_tls, **vars(args))
    except ValueError as err:
        parser.error(str(err))
        raise  # unreachable: parser.error exits
