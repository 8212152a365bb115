"""The gateway's settings: each declared once (netkernel/options.py), with its flag and ``AGENTNET_AG2_*``
environment variable."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from agentsdk.tls import TlsConfig, add_hub_tls_arguments, hub_tls_from_args
from netkernel.options import OptionSpec, Range, add_options, check_args, check_declared, named_specs, option
from servicekit.tls import ServerTls, add_tls_arguments, tls_from_args

DEFAULT_MAX_FRAME_BYTES = 4 * 1024 * 1024
"""Largest WebSocket message a client may send (AG2's hub has no limit; the hub's envelopes are at most 1 MiB)."""
DEFAULT_MAX_QUEUE_BYTES = 8 * 1024 * 1024
"""Bytes of outbound frames one connection may have waiting for the client to read."""
ENV = "AGENTNET_AG2_"
"""Prefix of the gateway's environment variables."""


@dataclass(frozen=True)
class Ag2GatewayOptions:
    """Settings of one gateway process (each declared once: its flag and ``AGENTNET_AG2_*`` variable)."""

    host: str = option("127.0.0.1", "--host", "AGENTNET_AG2_HOST", "interface to listen on")
    """Interface to listen on."""
    port: int = option(8765, "--port", "AGENTNET_AG2_PORT", "WebSocket port (0 = any free port)")
    """WebSocket port; 0 picks a free one."""
    hub: str = option(
        "127.0.0.1:50051",
        "--hub",
        "AGENTNET_AG2_HUB",
        "the hub's gRPC address, or several replicas comma-separated",
        fallback_env=("AGENTNET_HUB",),
    )
    """The hub's gRPC address, or several replicas comma-separated (AGENTNET_AG2_HUB, else AGENTNET_HUB)."""
    secret_file: Path = option(
        Path("data/ag2gateway.secret"),
        "--secret-file",
        "AGENTNET_AG2_SECRET_FILE",
        "the gateway's secret file (created if missing; share it between gateways)",
    )
    """The gateway's secret (created, mode 0600, if missing): derives its directory identity and the
    'none' scheme's keys; every gateway in front of one hub shares it."""
    allow_none_auth: bool = option(
        False,
        "--allow-none-auth",
        "AGENTNET_AG2_ALLOW_NONE_AUTH",
        "accept AG2's 'none' auth scheme: anyone who reaches the gateway may act as such an identity",
    )
    """Accept AG2's 'none' auth scheme: anyone who reaches the gateway may act as such an identity."""
    max_frame_bytes: int = option(
        DEFAULT_MAX_FRAME_BYTES,
        "--max-frame-bytes",
        "AGENTNET_AG2_MAX_FRAME_BYTES",
        "largest inbound WebSocket message",
        check=Range(1024, brackets="[)"),
    )
    """Largest inbound WebSocket message; larger closes the connection with 1009."""
    max_queue_bytes: int = option(
        DEFAULT_MAX_QUEUE_BYTES,
        "--max-queue-bytes",
        "AGENTNET_AG2_MAX_QUEUE_BYTES",
        "outbound bytes queued per connection",
        check=Range(1024, brackets="[)"),
    )
    """Outbound bytes one connection may have queued."""
    max_requests: int = option(
        64,
        "--max-requests",
        "AGENTNET_AG2_MAX_REQUESTS",
        "ops one connection runs at once",
        check=Range(1, brackets="[)"),
    )
    """Ops one connection may run at once; the next waits."""
    ws_compression: bool = option(
        False, "--ws-compression", "AGENTNET_AG2_WS_COMPRESSION", "accept clients' per-message deflate"
    )
    """Accept a client's offer of WebSocket per-message deflate. Off by default: AG2's ``WsLink`` offers it, and
    compressing every small JSON frame cost the gateway (and the client) more CPU than any other step of a
    notify; turn it on for large payloads over a slow network."""
    tls: ServerTls | None = None
    """wss:// for clients (--tls-cert / --tls-key); None: plaintext, loopback only unless --insecure."""
    hub_tls: TlsConfig | None = None
    """How the gateway verifies the hub (None: plaintext): ``--hub-tls``, ``--hub-ca-file``,
    ``--hub-cert-file`` + ``--hub-key-file``, ``--hub-server-name`` (``AGENTNET_AG2_HUB_TLS`` …)."""
    log_level: str = option("INFO", "--log-level", "AGENTNET_LOG_LEVEL", "log level")
    """Logging level."""

    def __post_init__(self) -> None:
        check_declared(self)


def ag2_gateway_option_specs() -> list[tuple[str, OptionSpec]]:
    """Every declared option of ``python -m ag2gateway`` as (field name, spec), beside the TLS flags (the
    clients' and the hub's) that servicekit and the SDK add."""
    return named_specs(Ag2GatewayOptions)


def parse_options(argv: list[str] | None = None) -> Ag2GatewayOptions:
    """Options from flags, falling back to ``AGENTNET_AG2_*`` variables, then the defaults."""
    parser = argparse.ArgumentParser(prog="python -m ag2gateway", description="AG2 WebSocket gateway of a hub.")
    specs = ag2_gateway_option_specs()
    add_options(parser, specs, Ag2GatewayOptions())
    add_hub_tls_arguments(parser, ENV)
    add_tls_arguments(parser, ENV)
    args = parser.parse_args(argv)
    values = check_args(parser, args, specs)
    tls = tls_from_args(parser, args, args.host)
    return Ag2GatewayOptions(tls=tls, hub_tls=hub_tls_from_args(parser, args), **values)
