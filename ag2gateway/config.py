"""The gateway's settings: flags, ``AGENTNET_AG2_*`` environment variables and their defaults."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

from agentsdk.tls import TlsConfig, add_hub_tls_arguments, hub_tls_from_args
from netkernel.env_flags import env_flag
from servicekit.tls import ServerTls, add_tls_arguments, tls_from_args

DEFAULT_MAX_FRAME_BYTES = 4 * 1024 * 1024
"""Largest WebSocket message a client may send (AG2's hub has no limit; the hub's envelopes are at most 1 MiB)."""
DEFAULT_MAX_QUEUE_BYTES = 8 * 1024 * 1024
"""Bytes of outbound frames one connection may have waiting for the client to read."""


@dataclass(frozen=True)
class Ag2GatewayOptions:
    """Settings of one gateway process."""

    host: str = "127.0.0.1"
    """Interface to listen on (AGENTNET_AG2_HOST)."""
    port: int = 8765
    """WebSocket port; 0 picks a free one (AGENTNET_AG2_PORT)."""
    hub: str = "127.0.0.1:50051"
    """The hub's gRPC address, or several replicas comma-separated (AGENTNET_AG2_HUB, else AGENTNET_HUB)."""
    secret_file: Path = Path("data/ag2gateway.secret")
    """The gateway's secret (created, mode 0600, if missing): derives its directory identity and the
    'none' scheme's keys; every gateway in front of one hub shares it (AGENTNET_AG2_SECRET_FILE)."""
    allow_none_auth: bool = False
    """Accept AG2's 'none' auth scheme: anyone who reaches the gateway may act as such an identity
    (AGENTNET_AG2_ALLOW_NONE_AUTH)."""
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    """Largest inbound WebSocket message; larger closes the connection with 1009 (AGENTNET_AG2_MAX_FRAME_BYTES)."""
    max_queue_bytes: int = DEFAULT_MAX_QUEUE_BYTES
    """Outbound bytes one connection may have queued (AGENTNET_AG2_MAX_QUEUE_BYTES)."""
    max_requests: int = 64
    """Ops one connection may run at once; the next waits (AGENTNET_AG2_MAX_REQUESTS)."""
    ws_compression: bool = False
    """Accept a client's offer of WebSocket per-message deflate (AGENTNET_AG2_WS_COMPRESSION). Off by default:
    AG2's ``WsLink`` offers it, and compressing every small JSON frame cost the gateway (and the client)
    more CPU than any other step of a notify; turn it on for large payloads over a slow network."""
    tls: ServerTls | None = None
    """wss:// for clients (--tls-cert / --tls-key); None: plaintext, loopback only unless --insecure."""
    hub_tls: TlsConfig | None = None
    """How the gateway verifies the hub (None: plaintext): ``--hub-tls``, ``--hub-ca-file``,
    ``--hub-cert-file`` + ``--hub-key-file``, ``--hub-server-name`` (``AGENTNET_AG2_HUB_TLS`` …)."""
    log_level: str = "INFO"

    def __post_init__(self) -> None:
        if self.max_frame_bytes < 1024 or self.max_queue_bytes < 1024:
            raise ValueError("--max-frame-bytes and --max-queue-bytes must be at least 1024")
        if self.max_requests < 1:
            raise ValueError("--max-requests must be at least 1")


_FLAGS: tuple[tuple[str, type, str], ...] = (
    ("host", str, "interface to listen on"),
    ("port", int, "WebSocket port (0 = any free port)"),
    ("hub", str, "the hub's gRPC address"),
    ("secret_file", Path, "the gateway's secret file (created if missing; share it between gateways)"),
    ("max_frame_bytes", int, "largest inbound WebSocket message"),
    ("max_queue_bytes", int, "outbound bytes queued per connection"),
    ("max_requests", int, "ops one connection runs at once"),
)
ENV = "AGENTNET_AG2_"


def parse_options(argv: list[str] | None = None) -> Ag2GatewayOptions:
    """Options from flags, falling back to ``AGENTNET_AG2_*`` variables, then the defaults."""
    env = os.environ
    defaults = Ag2GatewayOptions()
    parser = argparse.ArgumentParser(prog="python -m ag2gateway", description="AG2 WebSocket gateway of a hub.")
    for name, kind, text in _FLAGS:
        var = ENV + name.upper()
        raw = env.get(var) or (env.get("AGENTNET_HUB") if name == "hub" else None)
        default = kind(raw) if raw else getattr(defaults, name)
        parser.add_argument("--" + name.replace("_", "-"), type=kind, default=default, help=f"{text} [{var}]")
    parser.add_argument("--allow-none-auth", action="store_true", default=env_flag(env.get(ENV + "ALLOW_NONE_AUTH")))
    add_hub_tls_arguments(parser, ENV)
    parser.add_argument(
        "--ws-compression",
        action="store_true",
        default=env_flag(env.get(ENV + "WS_COMPRESSION")),
        help=f"accept clients' per-message deflate [{ENV}WS_COMPRESSION]",
    )
    parser.add_argument("--log-level", default=env.get("AGENTNET_LOG_LEVEL", defaults.log_level))
    add_tls_arguments(parser, ENV)
    args = parser.parse_args(argv)
    tls = tls_from_args(parser, args, args.host)
    hub_tls = hub_tls_from_args(parser, args)
    values = {k: v for k, v in vars(args).items() if k not in ("tls_cert", "tls_key", "tls_client_ca", "insecure")}
    try:
        return Ag2GatewayOptions(tls=tls, hub_tls=hub_tls, **values)
    except ValueError as err:
        parser.error(str(err))
        raise
