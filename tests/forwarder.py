"""A loopback TCP port a test holds across a service restart, forwarding to wherever the service listens now.

Restarting a service "on the same port" after it exited races with every other process on
the machine (the port is free in between). Instead the service always starts on port 0,
clients dial this forwarder's port (bound once, held until the test ends), and the test
points the forwarder at each new address.

It can also lose a service's answers: :meth:`TcpForwarder.hold_replies` keeps what the service
sends back from the clients, and :meth:`TcpForwarder.cut` then drops every open connection
(what was held is never delivered), as a network that fails between a service's commit and
its answer would.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable


class TcpForwarder:
    """Accepts on ``127.0.0.1:<port 0>`` and pipes each connection to the current upstream."""

    def __init__(self) -> None:
        self._upstream: tuple[str, int] | None = None
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()
        self._holding = False
        self._open: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()

    async def __aenter__(self) -> TcpForwarder:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self.cut()
        await self._server.wait_closed()

    @property
    def target(self) -> str:
        """``127.0.0.1:<port>`` for clients to dial (stable for the forwarder's life)."""
        assert self._server is not None
        return f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    def point_to(self, target: str | None) -> None:
        """Forward new connections to ``host:port`` (``None``: refuse them, as a stopped service would)."""
        if target is None:
            self._upstream = None
            return
        host, _, port = target.rpartition(":")
        self._upstream = (host, int(port))

    def hold_replies(self) -> None:
        """From now on keep the service's bytes from the clients (until :meth:`cut`)."""
        self._holding = True

    async def cut(self) -> None:
        """Drop every open connection without delivering what was held; new ones forward as before."""
        pipes = list(self._pipes)
        for writers in list(self._open):
            for w in writers:
                w.transport.abort()
        _, pending = await asyncio.wait(pipes, timeout=5) if pipes else (set(), set())
        for task in pending:  # still dialling the upstream
            task.cancel()
        self._holding = False

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._pipes.add(task)
        try:
            if self._upstream is None:
                return
            try:
                up_reader, up_writer = await asyncio.open_connection(*self._upstream)
            except OSError:
                return  # the service is down: the client sees its connection closed and retries
            self._open.add((writer, up_writer))
            try:
                await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer, lambda: self._holding))
            finally:
                self._open.discard((writer, up_writer))
                up_writer.close()
        finally:
            writer.close()
            self._pipes.discard(task)


async def _pipe(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, holding: Callable[[], bool] = lambda: False
) -> None:
    """Copy until EOF or an error on either side (dropping what arrives while ``holding()``); then end
    the writing side."""
    with contextlib.suppress(OSError, ConnectionError):
        while data := await reader.read(65536):
            if holding():
                continue
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(OSError, ConnectionError, RuntimeError):
        writer.close()
