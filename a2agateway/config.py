"""The gateway's settings: each declared once (netkernel/options.py), its flag and variable derived from it."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from agentsdk.tls import TlsConfig, add_hub_tls_arguments, hub_tls_from_args
from netkernel.options import OptionSpec, Range, add_options, check_args, check_declared, named_specs, option

DEFAULT_MAX_REQUEST_BYTES = 1024 * 1024 + 64 * 1024
"""A JSON-RPC body or gRPC message: the hub's 1 MiB message limit plus room for the envelope."""


@dataclass(frozen=True)
class GatewayOptions:
    """Settings of one gateway process (each declared once: its flag and ``AGENTNET_A2A_*`` variable)."""

    host: str = option("127.0.0.1", "--host", "AGENTNET_A2A_HOST", "interface to listen on")
    """Interface both listeners bind."""
    port: int = option(8090, "--port", "AGENTNET_A2A_PORT", "HTTP port for cards and JSON-RPC (0 = any free port)")
    """HTTP port (cards, JSON-RPC); 0 picks a free one."""
    grpc_port: int = option(
        8091, "--grpc-port", "AGENTNET_A2A_GRPC_PORT", "gRPC port (0 = any free port, -1 = no gRPC listener)"
    )
    """gRPC port (A2A's gRPC binding); 0 picks a free one; -1 = no gRPC listener."""
    hub: str = option(
        "127.0.0.1:50051", "--hub", "AGENTNET_A2A_HUB", "the hub's gRPC address", fallback_env=("AGENTNET_HUB",)
    )
    """The hub's gRPC address (AGENTNET_A2A_HUB, else AGENTNET_HUB)."""
    public_url: str = option(
        "", "--public-url", "AGENTNET_A2A_PUBLIC_URL", "base URL written into cards (default http://HOST:PORT)"
    )
    """Base URL clients reach the HTTP listener at, written into cards; "" = http://HOST:PORT."""
    public_grpc: str = option(
        "", "--public-grpc", "AGENTNET_A2A_PUBLIC_GRPC", "host:port of the gRPC listener written into cards"
    )
    """host:port clients reach the gRPC listener at, written into cards; "" = HOST:GRPC_PORT."""
    max_request_bytes: int = option(
        DEFAULT_MAX_REQUEST_BYTES,
        "--max-request-bytes",
        "AGENTNET_A2A_MAX_REQUEST_BYTES",
        "largest request body / gRPC message",
        check=Range(1024, brackets="[)"),
    )
    """Largest JSON-RPC request body or gRPC request message; larger is refused."""
    max_tasks_listed: int = option(
        1000,
        "--max-tasks-listed",
        "AGENTNET_A2A_MAX_TASKS_LISTED",
        "executions read from the hub per ListTasks",
        check=Range(1, brackets="[)"),
    )
    """Executions read from the hub to answer one ListTasks or to follow one task's calls, and agents
    read to list the cards."""
    hub_tls: TlsConfig | None = None
    """How the gateway verifies the hub (None: plaintext): ``--hub-tls``, ``--hub-ca-file``,
    ``--hub-cert-file`` + ``--hub-key-file``, ``--hub-server-name`` (``AGENTNET_A2A_HUB_TLS`` …)."""
    log_level: str = option("INFO", "--log-level", "AGENTNET_LOG_LEVEL", "log level")
    """Logging level."""

    def __post_init__(self) -> None:
        check_declared(self)


def gateway_option_specs() -> list[tuple[str, OptionSpec]]:
    """Every declared option of ``python -m a2agateway`` as (field name, spec), beside the hub TLS flags."""
    return named_specs(GatewayOptions)


def parse_options(argv: list[str] | None = None) -> GatewayOptions:
    """Options from flags, falling back to ``AGENTNET_A2A_*`` variables, then the defaults."""
    parser = argparse.ArgumentParser(prog="python -m a2agateway", description="The inbound A2A gateway of a hub.")
    specs = gateway_option_specs()
    add_options(parser, specs, GatewayOptions())
    add_hub_tls_arguments(parser, "AGENTNET_A2A_")
    args = parser.parse_args(argv)
    values = check_args(parser, args, specs)
    return GatewayOptions(hub_tls=hub_tls_from_args(parser, args), **values)
