"""Entry points: ``HubClient.connect(target)`` for a running hub, and ``Hub.open()``
for an embedded hub served in-process on a real port. Both are async context managers.

:class:`HubClient` is defined in :mod:`agentsdk.network.hub_base` and :class:`AgentSummary` in
:mod:`agentsdk.network.directory`; this module defines :class:`Hub` (the only one that uses the hub
service's code) and re-exports them."""

from __future__ import annotations

import secrets
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from opentelemetry.trace import TracerProvider

from agentsdk.network.directory import AgentSummary
from agentsdk.network.hub_base import HubClient
from agentsdk.transport import HubConnection

if TYPE_CHECKING:
    from hubsvc.core.options import HubOptions
    from hubsvc.governance.arbiter import Arbiter
    from hubsvc.governance.policy import Policy
    from hubsvc.server import HubServer

__all__ = ["AgentSummary", "Hub", "HubClient"]


class Hub(HubClient):
    """An embedded hub: the real hub service in this process, on a real port, plus a client to it."""

    def __init__(self, connection: HubConnection, server: HubServer, operator_token: str) -> None:
        super().__init__(connection)
        self.server = server
        self.core = server.core
        self.operator_token = operator_token
        """Bearer token for operator calls (``ListAudit``) on this hub."""

    @property
    def target(self) -> str:
        """``host:port`` other processes (bridges) can connect to."""
        return self.connection.target

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        *,
        path: str | Path | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        options: HubOptions | None = None,
        clock: Callable[[], float] | None = None,
        policy: Policy | str | Path | None = None,
        arbiter: Arbiter | str | None = None,
        tracer_provider: TracerProvider | None = None,
        in_process: bool = False,
    ) -> AsyncIterator[Hub]:
        """Start a hub on SQLite ``path`` (a temporary file when None) and serve it on ``host:port`` (0 = free port).

        ``options`` tunes the hub (limits, timeouts, A2A token lifetime); ``clock`` replaces its
        wall clock (seconds since the epoch), e.g. to let tests move time forward. ``policy`` is
        the governance policy (a ``Policy`` or the path of a YAML / JSON policy file, reloaded when
        it changes) and ``arbiter`` the governance arbiter (an object or ``module:attribute``); see
        docs/governance.md. ``tracer_provider`` records the spans of the hub and of this client
        (docs/operations.md "Tracing"; None: none from the hub, OpenTelemetry's global provider for the
        client). The hub is built by the same factory as ``python -m hubsvc`` (health, reflection, limits).
        ``in_process``: this client calls the hub without the network (the same handlers, checks and
        errors; :mod:`servicekit.inprocess`, docs/network.md "In-process client"), about twice as fast a
        round trip; other clients still connect to ``hub.target``."""
        # The SDK depends on the hub service only here, and only when an embedded hub is asked for.
        from hubsvc.core.util import system_clock
        from hubsvc.server import start_hub
        from hubsvc.storage import SqliteHubStore

        with tempfile.TemporaryDirectory(prefix="agentnet-hub-") as tmp:
            store = SqliteHubStore(Path(path) if path is not None else Path(tmp) / "hub.db")
            operator_token = secrets.token_urlsafe(32)
            server = await start_hub(
                store,
                host=host,
                port=port,
                operator_token=operator_token,
                options=options,
                clock=clock or system_clock,
                policy=policy,
                arbiter=arbiter,
                tracer_provider=tracer_provider,
            )
            channel = None
            if in_process:
                from servicekit.inprocess import InProcessChannel

                channel = InProcessChannel(server.running.handlers)
            connection = HubConnection(server.target, tracer_provider=tracer_provider, channel=channel)
            hub = cls(connection, server, operator_token)
            try:
                yield hub
            finally:
                await hub.close()
                await server.stop(1.0)
