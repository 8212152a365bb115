"""``python -m ag2gateway``: run the AG2 WebSocket gateway until SIGINT / SIGTERM."""

from __future__ import annotations

import asyncio
import signal

from ag2gateway.config import parse_options
from ag2gateway.server import describe, start_gateway
from servicekit.runtime import configure_logging


async def main() -> None:
    """Start the gateway, print where it listens, serve until a signal."""
    options = parse_options()
    configure_logging(options.log_level)
    gateway = await start_gateway(options)
    print(f"ag2gateway listening {describe(gateway)}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await gateway.stop()


if __name__ == "__main__":
    asyncio.run(main())
