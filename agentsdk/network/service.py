"""Running a client as a long-lived service: wait for the signal that stops it."""

from __future__ import annotations

import asyncio
import signal


def stop_signal(
    signals: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM),
) -> asyncio.Future[signal.Signals]:
    """A future resolved with the first of ``signals`` (SIGINT or SIGTERM by default) the process receives.

    The handlers are installed at once (call it before announcing that the service is ready, so
    an early signal is not missed) and removed when it resolves. ``await stop_signal()`` then
    lets the code after it run the service's clean shutdown (``async with`` blocks exit, clients
    disconnect) instead of the process dying mid-envelope. Call it inside the running event
    loop; Unix loops only.
    """
    loop = asyncio.get_running_loop()
    received: asyncio.Future[signal.Signals] = loop.create_future()

    def on_signal(sig: signal.Signals) -> None:
        if not received.done():
            received.set_result(sig)

    def remove(_: asyncio.Future[signal.Signals]) -> None:
        for sig in signals:
            loop.remove_signal_handler(sig)

    for sig in signals:
        loop.add_signal_handler(sig, on_signal, sig)
    received.add_done_callback(remove)
    return received
