"""``python -m ag2embedded [hub flags] [-- gateway flags]``: the hub (``python -m hubsvc``'s flags and
``AGENTNET_HUB_*`` variables) and the AG2 gateway (``python -m ag2gateway``'s, ``AGENTNET_AG2_*``) in one
process and one event loop, the gateway calling the hub's handlers in process (servicekit/inprocess.py:
the same requests, checks and errors as over gRPC, without the transport; over loopback gRPC instead
when the gateway's flags give TLS settings for the hub). It saves the second process and the gRPC hops
between gateway and hub (bench/README.md). Prints the gateway's ``ag2gateway listening {...}`` line,
then the hub's ``agentnet-hub listening on host:port``; stops both on SIGINT / SIGTERM (the gateway first)."""

from __future__ import annotations

import os

from netkernel.grpc_env import GRPC_EXPERIMENTS

os.environ.setdefault("GRPC_EXPERIMENTS", GRPC_EXPERIMENTS)  # before grpc is imported (netkernel/grpc_env.py)

import asyncio
import dataclasses
import gc
import sys
from typing import TYPE_CHECKING

from ag2gateway.config import Ag2GatewayOptions, parse_options
from ag2gateway.server import describe, start_gateway
from hubsvc.__main__ import checked_extras, exit_on_start_failure, start_from_config
from hubsvc.config import HubConfig, parse_args
from hubsvc.server import HubServer
from servicekit.inprocess import InProcessChannel
from servicekit.runtime import announce_and_wait, configure_logging, host_port

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from hubsvc.governance.arbiter import Arbiter

PROGRAM = "ag2embedded"


def split_argv(argv: list[str]) -> tuple[list[str], list[str]]:
    """The hub's flags (before ``--``) and the gateway's (after it); the gateway may not name a hub."""
    if "--" not in argv:
        return argv, []
    at = argv.index("--")
    hub, gateway = argv[:at], argv[at + 1 :]
    if any(arg == "--hub" or arg.startswith("--hub=") for arg in gateway):
        sys.exit(f"{PROGRAM}: the gateway calls the hub of this process: drop --hub from the gateway's flags")
    return hub, gateway


def hub_address(config: HubConfig, port: int) -> str:
    """Where the gateway reaches the hub it shares the process with: the hub's own address, or loopback
    when the hub listens on every interface."""
    if config.host in ("0.0.0.0", ""):
        return f"127.0.0.1:{port}"
    if config.host == "::":
        return f"[::1]:{port}"
    return host_port(config.host, port)


def hub_path(hub: HubServer, gateway: Ag2GatewayOptions) -> InProcessChannel | None:
    """How the gateway calls the hub: in process (:mod:`servicekit.inprocess`), unless the gateway's
    flags give TLS settings for the hub (then over loopback gRPC with them, as a separate gateway)."""
    return None if gateway.hub_tls is not None else InProcessChannel(hub.running.handlers)


async def serve(
    config: HubConfig,
    gateway: Ag2GatewayOptions,
    *,
    arbiter: Arbiter | None = None,
    tracer_provider: TracerProvider | None = None,
) -> None:
    """Start the hub, then the gateway in front of it, and serve until SIGINT / SIGTERM."""
    hub = await start_from_config(config, arbiter=arbiter, tracer_provider=tracer_provider)
    try:
        options = dataclasses.replace(gateway, hub=hub_address(config, hub.port))
        running = await start_gateway(options, hub_path(hub, gateway))
        try:
            gc.freeze()  # as python -m ag2gateway: the start-up heap lives as long as the process
            print(f"ag2gateway listening {describe(running)}", flush=True)
            await announce_and_wait(f"agentnet-hub listening on {config.host}:{hub.port}")
        finally:
            await running.stop()
    finally:
        await hub.stop()
        if tracer_provider is not None:
            tracer_provider.shutdown()  # exports the spans still buffered


def main(argv: list[str] | None = None) -> None:
    """Console entry point: parse both services' flags, then serve them."""
    hub_argv, gateway_argv = split_argv(sys.argv[1:] if argv is None else argv)
    config = parse_args(hub_argv)
    gateway = parse_options(gateway_argv)
    configure_logging(config.log_level)
    arbiter, tracer_provider = checked_extras(config, PROGRAM)
    with exit_on_start_failure(PROGRAM):
        asyncio.run(serve(config, gateway, arbiter=arbiter, tracer_provider=tracer_provider))


if __name__ == "__main__":
    main()
