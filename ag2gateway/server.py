"""The gateway's WebSocket listener (``websockets``): one :class:`Connection` per client."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
from collections.abc import Callable
from typing import Any

import grpc
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.frames import DATA_OPCODES, Frame
from websockets.protocol import Event, State

from ag2gateway.config import Ag2GatewayOptions
from ag2gateway.connection import Connection
from ag2gateway.hub import HubLink
from ag2gateway.identities import Identities
from ag2gateway.outbox import Outbox
from servicekit.auth import ensure_secret_file

log = logging.getLogger(__name__)


def _ssl_context(options: Ag2GatewayOptions) -> ssl.SSLContext | None:
    if options.tls is None:
        return None
    options.tls.check()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(options.tls.cert_file, options.tls.key_file)
    if options.tls.client_ca_file is not None:
        context.load_verify_locations(options.tls.client_ca_file)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


class Ag2Gateway:
    """A running gateway: its hub link, its directory identity and its listener. ``hub_channel``: an open
    channel to the hub at ``options.hub`` to call through instead of dialling it (:class:`HubLink`)."""

    def __init__(self, options: Ag2GatewayOptions, hub_channel: grpc.aio.Channel | None = None) -> None:
        self.options = options
        self.hub = HubLink(options.hub, options.hub_tls, hub_channel)
        self.identities = Identities(
            self.hub, ensure_secret_file(options.secret_file), allow_none_auth=options.allow_none_auth
        )
        self._server: Server | None = None
        self.port = 0
        self.connections: set[Connection] = set()

    @property
    def url(self) -> str:
        """The URL AG2 clients give ``WsLink``."""
        scheme = "wss" if self.options.tls else "ws"
        host = f"[{self.options.host}]" if ":" in self.options.host else self.options.host
        return f"{scheme}://{host}:{self.port}"

    async def start(self) -> None:
        """Register the directory identity, then listen."""
        await self.identities.start()
        self._server = await serve(
            self._serve,
            self.options.host,
            self.options.port,
            ssl=_ssl_context(self.options),
            compression="deflate" if self.options.ws_compression else None,
            max_size=self.options.max_frame_bytes,
            max_queue=16,
            write_limit=self.options.max_queue_bytes,
            create_connection=_Link,
        )
        self.port = self._server.sockets[0].getsockname()[1] if self._server.sockets else self.options.port

    async def _serve(self, ws: ServerConnection) -> None:
        async def send(frame: bytes) -> None:
            await ws.send(frame, text=True)  # UTF-8 JSON already: sent as a text frame, not decoded and re-encoded

        assert isinstance(ws, _Link)
        writer = _Writer(ws)
        conn = Connection(
            self.hub,
            self.identities,
            Outbox(self.options.max_queue_bytes, send, writer.send_now),
            hold=(writer.hold, writer.release),
            max_in_flight_requests=self.options.max_requests,
            pause=ws.transport.pause_reading,
            resume=ws.transport.resume_reading,
        )
        self.connections.add(conn)
        writing = asyncio.create_task(conn.outbox.run())
        try:
            ws.read_into(conn.feed)
            await ws.wait_closed()
        finally:
            self.connections.discard(conn)
            await conn.close()
            writing.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await writing

    async def stop(self) -> None:
        """Close every connection and the listener, then the hub link."""
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
        await self.hub.close()


class _Link(ServerConnection):
    """websockets' server connection, handing each inbound message to a callback in the turn its data is
    read (:meth:`read_into`) instead of queueing it for ``recv``: no reader task to wake and no assembler
    per message. The protocol (framing, masking, the size limit, per-message deflate, pings and the
    closing handshake) is websockets' own; only complete data messages are taken here, as bytes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._sink: Callable[[bytes], None] | None = None
        self._early: list[bytes] = []
        """Messages read before :meth:`read_into` (the client spoke right after the handshake)."""
        self._parts: list[bytes] = []
        """The fragments of a message sent in several frames, until its last."""

    def read_into(self, sink: Callable[[bytes], None]) -> None:
        """From now on every inbound message goes to ``sink`` (those read already go first)."""
        early, self._early = self._early, []
        self._sink = sink
        for message in early:
            sink(message)

    def process_event(self, event: Event) -> None:
        if self.request is None or not isinstance(event, Frame) or event.opcode not in DATA_OPCODES:
            super().process_event(event)  # the handshake, pings, pongs, close
            return
        data = event.data if type(event.data) is bytes else bytes(event.data)
        if not event.fin:
            self._parts.append(data)
            return
        if self._parts:
            self._parts.append(data)
            data = b"".join(self._parts)
            self._parts = []
        if self._sink is None:
            self._early.append(data)
        else:
            self._sink(data)


class _Writer:
    """Writes text frames to ``ws`` at once, when nothing has to wait: what ``ws.send`` does then (frame it,
    hand it to the transport) without the coroutine, context manager and drain around it, a third of the
    gateway's websockets cost per notify and response. :meth:`send_now` says False (the caller awaits
    ``ws.send``, which waits or raises as it must) while the connection is not open, a fragmented message
    is being sent, or the transport's write buffer is over its limit (``ws.send`` then waits for it to
    drain). Between :meth:`hold` and :meth:`release` (a hub batch's responses and notifies) the frames
    are framed at once but handed to the transport together, in one write: one system call, and one
    wake-up of the client, for the batch instead of one per frame."""

    def __init__(self, ws: ServerConnection) -> None:
        self._ws = ws
        self._protocol = ws.protocol
        self._held = 0
        self._sending = "send_in_progress" if hasattr(ws, "send_in_progress") else "fragmented_send_waiter"
        """websockets' mark of a fragmented message being sent (its name before 16: fragmented_send_waiter)."""

    def send_now(self, frame: bytes) -> bool:
        ws = self._ws
        if self._protocol.state is not State.OPEN or ws.paused or getattr(ws, self._sending, None) is not None:
            return False
        self._protocol.send_text(frame)
        if not self._held:
            self._flush()
        return True

    def hold(self) -> None:
        """Frames sent from now on wait in the protocol's buffer until the matching :meth:`release`."""
        self._held += 1

    def release(self) -> None:
        """Write what was held (once every hold is released)."""
        self._held -= 1
        if not self._held:
            self._flush()

    def _flush(self) -> None:
        chunks = self._protocol.data_to_send()
        try:
            if len(chunks) == 1 and chunks[0]:
                self._ws.transport.write(chunks[0])
            elif chunks and all(chunks):
                self._ws.transport.write(b"".join(chunks))
            elif chunks:  # the end of the stream is among them (the closing handshake): as ws.send_data
                for chunk in chunks:
                    if chunk:
                        self._ws.transport.write(chunk)
                    elif self._ws.transport.can_write_eof():
                        self._ws.transport.write_eof()
                    else:
                        self._ws.transport.close()
        except Exception as err:  # as ws.send: a failed write ends the connection
            log.debug("writing to an AG2 client failed: %s", err)
            self._ws.transport.abort()


async def start_gateway(options: Ag2GatewayOptions, hub_channel: grpc.aio.Channel | None = None) -> Ag2Gateway:
    """Build and start a gateway (tests and ``python -m ag2gateway``); ``hub_channel`` as :class:`Ag2Gateway`'s."""
    gateway = Ag2Gateway(options, hub_channel)
    await gateway.start()
    return gateway


def describe(gateway: Ag2Gateway) -> str:
    """The line the process prints once listening."""
    return json.dumps({"url": gateway.url, "hub": gateway.options.hub})
