"""Serve the console with uvicorn on a socket this module binds (so ``--port 0`` reports the real port).

Plain HTTP: the login form carries the operator token, so the console listens on a loopback address
unless told ``insecure`` (behind a TLS-terminating proxy, say)."""

from __future__ import annotations

import ipaddress
import signal
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from netkernel.extras import missing_extra

try:
    import uvicorn
except ImportError as exc:
    raise missing_extra("console", exc) from exc

from agentsdk.console.app import Console

GRACEFUL_SHUTDOWN_SECONDS = 2
"""On SIGINT/SIGTERM, open live streams get this long before they are cut."""


class ConsoleAddressError(Exception):
    """The console was asked to listen where it must not; the message says what to do."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (or ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int, *, insecure: bool = False) -> socket.socket:
    """A listening socket on host:port (loopback only unless ``insecure``)."""
    if not is_loopback(host) and not insecure:
        raise ConsoleAddressError(
            f"the console serves plain HTTP and the login form carries the operator token: {host!r} is not a "
            "loopback address. Listen on 127.0.0.1 (the default) and reach it through an SSH tunnel, or put a "
            "TLS-terminating proxy in front and pass --insecure."
        )
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as err:
        sock.close()
        raise ConsoleAddressError(
            f"cannot listen on {host}:{port} ({err.strerror or err}): pick another --port."
        ) from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


class _Server(uvicorn.Server):
    """uvicorn's server, stopping cleanly on SIGINT/SIGTERM with exit status 0 (like the services)."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        """Stop on SIGINT/SIGTERM (a second SIGINT cuts the graceful shutdown short)."""
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def serve(console: Console, sock: socket.socket, login_path: str = "") -> None:
    """Serve until SIGINT/SIGTERM; print the address first (``agentnet-console listening on HOST:PORT``),
    and the one-time login link when given its path (``login_path``, from :meth:`Console.login_link`)."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    print(f"agentnet-console listening on {shown}:{port} (http://{shown}:{port}/)", flush=True)
    if login_path:
        print(f"log in once with this link (it works one time): http://{shown}:{port}{login_path}", flush=True)
    config = uvicorn.Config(
        console.app(),
        log_level="warning",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
        access_log=False,
    )
    _Server(config).run(sockets=[sock])
    sys.stdout.flush()
