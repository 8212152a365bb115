"""One bound identity's hub ``Connect`` stream: deliveries become AG2 ``notify`` frames, AG2
receipts become the hub's acks (the hub stores the cursors they reach), and a stream the hub ends
(a hub restart, a replica going away) is opened again with back-off, resuming from the hub's
stored cursors, so nothing is lost and nothing acked is sent twice."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from agentnet.v1 import connect_pb2, envelope_pb2

from agentsdk.rpc import ConnectStream, HubRpc
from netkernel.errors import AgentNetError, Superseded, Unauthenticated

log = logging.getLogger(__name__)

Deliver = Callable[[envelope_pb2.Envelope, bool, bool], Awaitable[None]]
"""Hands one delivery (envelope, replay, of the first stream) to the connection; waits while its outbox is
full. A replay of a later stream (after the hub ended the first) is what the client has not seen yet."""

MAX_IN_FLIGHT = 256
"""Deliveries the hub may have outstanding (not yet acked by the AG2 client) per identity."""
MAX_BATCH = 256
"""Deliveries the hub may pack into one frame (``Hello.max_batch``)."""
_RETRY_FIRST, _RETRY_MAX = 0.2, 5.0


class IdentityStream:
    """The live hub session of one identity bound to an AG2 connection."""

    def __init__(self, rpc: HubRpc, agent_id: str, deliver: Deliver) -> None:
        self.rpc = rpc
        self.agent_id = agent_id
        self._deliver = deliver
        self._requests: asyncio.Queue[connect_pb2.ConnectRequest | None] = asyncio.Queue()
        self._stream: ConnectStream | None = None
        self._task: asyncio.Task[None] | None = None
        self._welcome: asyncio.Future[connect_pb2.Welcome] | None = None
        self._closed = False
        self._first = True
        self.ended: str = ""
        """Why the stream stopped for good ("" while it runs): superseded, unregistered."""

    async def start(self) -> connect_pb2.Welcome:
        """Open the stream; returns the hub's Welcome (replay follows as deliveries)."""
        self._welcome = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._run())
        return await asyncio.shield(self._welcome)

    def _hello(self) -> connect_pb2.ConnectRequest:
        return connect_pb2.ConnectRequest(
            hello=connect_pb2.Hello(
                credential=self.rpc.credential,
                max_in_flight=MAX_IN_FLIGHT,
                max_batch=MAX_BATCH,
                client_name="ag2gateway",
            )
        )

    async def _frames(self) -> AsyncIterator[connect_pb2.ConnectRequest]:
        yield self._hello()
        while True:
            item = await self._requests.get()
            if item is None:
                return
            if item.WhichOneof("frame") == "ack":  # acks queued together travel in one Ack frame
                while not self._requests.empty():
                    more = self._requests.get_nowait()
                    if more is None or more.WhichOneof("frame") != "ack":
                        yield item
                        item = more
                        break
                    item.ack.entries.extend(more.ack.entries)
                if item is None:
                    return
            yield item

    async def _run(self) -> None:
        delay = _RETRY_FIRST
        while not self._closed:
            self._requests = asyncio.Queue()
            self._stream = self.rpc.connect(self._frames())
            try:
                await self._pump(self._stream)
            except (Superseded, Unauthenticated) as err:
                self.ended = type(err).__name__
                self._fail_welcome(err)
                return
            except AgentNetError as err:
                if self._welcome is not None and not self._welcome.done():
                    self._fail_welcome(err)
                    return
                log.info("hub stream of %s ended (%s); reconnecting", self.agent_id, err.reason)
            except asyncio.CancelledError:
                raise
            except Exception as err:  # a bug: log it, retry
                log.exception("hub stream of %s failed", self.agent_id)
                if self._welcome is not None and not self._welcome.done():
                    self._fail_welcome(err)
                    return
            if self._closed:
                return
            self._first = False
            await asyncio.sleep(delay)
            delay = min(delay * 2, _RETRY_MAX)

    def _fail_welcome(self, err: BaseException) -> None:
        if self._welcome is not None and not self._welcome.done():
            self._welcome.set_exception(err)

    async def _pump(self, stream: ConnectStream) -> None:
        keepalive: asyncio.Task[None] | None = None
        try:
            async for frame in stream:
                which = frame.WhichOneof("frame")
                if which == "welcome":
                    if self._welcome is not None and not self._welcome.done():
                        self._welcome.set_result(frame.welcome)
                    if frame.welcome.keepalive_seconds:
                        keepalive = asyncio.create_task(self._keepalive(frame.welcome.keepalive_seconds))
                elif which == "delivery":
                    await self._deliver(frame.delivery.envelope, frame.delivery.replay, self._first)
                elif which == "batch":
                    for delivery in frame.batch.deliveries:
                        await self._deliver(delivery.envelope, delivery.replay, self._first)
        finally:
            if keepalive is not None:
                keepalive.cancel()

    async def _keepalive(self, seconds: int) -> None:
        nonce = 0
        while True:
            await asyncio.sleep(seconds)
            nonce += 1
            self._requests.put_nowait(connect_pb2.ConnectRequest(ping=connect_pb2.Ping(nonce=nonce)))

    def ack(self, channel_id: str, seq: int) -> None:
        """The AG2 client processed the envelope at ``seq``: the hub's cursor may pass it."""
        entry = connect_pb2.AckEntry(channel_id=channel_id, seq=seq)
        self._requests.put_nowait(connect_pb2.ConnectRequest(ack=connect_pb2.Ack(entries=[entry])))

    async def close(self) -> None:
        """End the stream (acks already sent reach the hub first)."""
        self._closed = True
        self._requests.put_nowait(None)
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), 2.0)
            except (TimeoutError, Exception):
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await self._task
