"""``python -m a2agateway``: run the inbound A2A gateway until SIGINT / SIGTERM."""

from __future__ import annotations

import os

from netkernel.grpc_env import GRPC_EXPERIMENTS

os.environ.setdefault("GRPC_EXPERIMENTS", GRPC_EXPERIMENTS)  # before grpc is imported (netkernel/grpc_env.py)

import asyncio

from a2agateway.config import parse_options
from a2agateway.server import describe, start_gateway
from servicekit.runtime import announce_and_wait, configure_logging


async def main() -> None:
    """Start the gateway, print where it listens, serve until a signal."""
    options = parse_options()
    configure_logging(options.log_level)
    gateway = await start_gateway(options)
    try:
        await announce_and_wait(f"a2agateway listening {describe(gateway)}")
    finally:
        await gateway.stop()


if __name__ == "__main__":
    asyncio.run(main())
