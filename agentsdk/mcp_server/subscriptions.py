"""Resource subscriptions of ``agentnet mcp``: a new envelope becomes ``notifications/resources/updated``.

An envelope delivered to the identity updates its channel's two resources
(``agentnet://channels/{id}`` and ``.../transcript``); a channel's invite, opening, closing or
expiry also updates ``agentnet://channels``. Hosts on a handshake protocol version subscribe with
``resources/subscribe``: each MCP session keeps at most :data:`MAX_SUBSCRIPTIONS` URIs (one more
is refused), at most :data:`MAX_SESSIONS` sessions keep subscriptions, and updates are coalesced:
a URI updated many times before the host read the notification is notified once, so a host that
reads slowly holds nothing but its set of pending URIs. Hosts on the 2026-07-28 protocol
(``subscriptions/listen``) get the same updates through the ``mcp`` package's subscription bus.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from mcp.server.connection import Connection
from mcp.server.session import ServerSession
from mcp.server.subscriptions import ResourceUpdated, SubscriptionBus
from mcp.shared.exceptions import MCPError

from agentsdk.mcp_server.resources import CHANNELS_URI, channel_uris, parse_uri
from netkernel.envelope import (
    EV_CHANNEL_CLOSED,
    EV_CHANNEL_EXPIRED,
    EV_CHANNEL_INVITE,
    EV_CHANNEL_OPENED,
    Envelope,
)

MAX_SUBSCRIPTIONS = 256
"""Resource URIs one MCP session may be subscribed to at once."""
MAX_SESSIONS = 64
"""MCP sessions with subscriptions kept at once: a new one ends the subscriptions of the one that
subscribed longest ago (a session's subscriptions also end when it closes)."""
SEND_TIMEOUT = 10.0
"""Seconds one notification may wait on a session's transport before the session's subscriptions end."""
LIFECYCLE_EVENTS = frozenset({EV_CHANNEL_INVITE, EV_CHANNEL_OPENED, EV_CHANNEL_CLOSED, EV_CHANNEL_EXPIRED})
"""Envelopes that also update ``agentnet://channels``."""

log = logging.getLogger(__name__)
LIMIT_EXCEEDED = -32000
"""The JSON-RPC error code of a refused subscription (over :data:`MAX_SUBSCRIPTIONS`)."""


def connection_of(session: ServerSession) -> Connection:
    """The MCP connection (one host's session) a request's ``ServerSession`` belongs to.

    The ``mcp`` package builds a ``ServerSession`` per request; subscriptions belong to the connection
    it wraps, which 2.x keeps in ``_connection`` (the extra pins ``mcp>=2.3,<3``; the tests cover it)."""
    connection: Connection = session._connection
    return connection


class _Watcher:
    """One session's subscriptions and the URIs it is yet to be told about."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.uris: set[str] = set()
        self.pending: set[str] = set()
        self.wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None


class Subscriptions:
    """Every MCP session's resource subscriptions, and the notifications new envelopes cause."""

    def __init__(self, bus: SubscriptionBus) -> None:
        self.bus = bus
        """Where updates go for hosts listening with ``subscriptions/listen``."""
        self._watchers: dict[int, _Watcher] = {}

    def subscribe(self, session: ServerSession, uri: str) -> None:
        """Notify ``session`` when ``uri`` changes; MCPError for an unknown URI or one too many."""
        parse_uri(uri)
        connection = connection_of(session)
        watcher = self._watchers.get(id(connection))
        if watcher is None or watcher.connection is not connection:
            while len(self._watchers) >= MAX_SESSIONS:
                self._end(next(iter(self._watchers.values())))
            watcher = self._watchers[id(connection)] = _Watcher(connection)
            connection.exit_stack.callback(self._end, watcher)  # the session closed: its subscriptions end
        if uri not in watcher.uris and len(watcher.uris) >= MAX_SUBSCRIPTIONS:
            raise MCPError(
                LIMIT_EXCEEDED,
                f"RESOURCE_EXHAUSTED: this session is subscribed to {MAX_SUBSCRIPTIONS} resources, the most it may "
                "be; unsubscribe from one first.",
            )
        watcher.uris.add(uri)
        if watcher.task is None:
            watcher.task = asyncio.get_running_loop().create_task(self._pump(watcher))

    def unsubscribe(self, session: ServerSession, uri: str) -> None:
        """Stop notifying ``session`` about ``uri`` (not subscribed: nothing to do)."""
        connection = connection_of(session)
        watcher = self._watchers.get(id(connection))
        if watcher is not None and watcher.connection is connection:
            watcher.uris.discard(uri)
            watcher.pending.discard(uri)

    def subscribed(self, session: ServerSession) -> frozenset[str]:
        """The URIs ``session`` is subscribed to."""
        connection = connection_of(session)
        watcher = self._watchers.get(id(connection))
        return frozenset(watcher.uris) if watcher is not None and watcher.connection is connection else frozenset()

    async def envelope(self, envelope: Envelope) -> None:
        """An envelope reached the identity: mark the resources it updates (the identity's envelope callback)."""
        uris = set(channel_uris(envelope.channel_id))
        if envelope.event_type in LIFECYCLE_EVENTS:
            uris.add(CHANNELS_URI)
        for watcher in self._watchers.values():
            hit = watcher.uris & uris
            if hit:
                watcher.pending |= hit
                watcher.wake.set()
        for uri in sorted(uris):
            await self.bus.publish(ResourceUpdated(uri))

    async def _pump(self, watcher: _Watcher) -> None:
        """Send ``watcher``'s pending updates, one notification per URI, until its session is gone."""
        try:
            while True:
                await watcher.wake.wait()
                watcher.wake.clear()
                uris, watcher.pending = watcher.pending, set()
                for uri in sorted(uris):
                    async with asyncio.timeout(SEND_TIMEOUT):
                        await watcher.connection.send_resource_updated(uri)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # the session's transport closed (or stalled): its subscriptions end
            log.debug("resource updates to an MCP session stopped: %r", err)
        finally:
            self._end(watcher)

    def _end(self, watcher: _Watcher) -> None:
        """Forget ``watcher`` and stop its notifications (idempotent)."""
        if self._watchers.get(id(watcher.connection)) is watcher:
            del self._watchers[id(watcher.connection)]
        if watcher.task is not None and watcher.task is not asyncio.current_task():
            watcher.task.cancel()

    async def close(self) -> None:
        """Stop every session's notifications."""
        tasks = [w.task for w in self._watchers.values() if w.task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._watchers.clear()
