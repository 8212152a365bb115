"""``python -m a2agateway``: run the inbound A2A gateway until SIGINT / SIGTERM."""

from __future__ import annotations

import asyncio
import signal

from a2agateway.config import parse_options
from a2agateway.server import describe, start_gateway
from servicekit.runtime import configure_logging


async def main() -> None:
    """Start the gateway, print where it listens, serve until a signal."""
    options = parse_options()
    configure_logging(options.log_level)
    gateway = await start_gateway(options)
    print(f"a2agateway listening {describe(gateway)}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await gateway.stop()


if __name__ == "__main__":
    asyncio.run(main())
