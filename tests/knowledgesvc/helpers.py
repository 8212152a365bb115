"""Helpers shared by the knowledge tests: polling assertions, event recording, servers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from agentsdk.knowledge import ChangeEvent, StoreBase
from knowledgesvc.auth import TokenAuthority
from knowledgesvc.server import start_knowledge
from servicekit.tls import ServerTls

#: The bearer token the test servers grant every namespace.
TOKEN = "test-token-0123456789abcdef"


async def assert_eventually(
    check: Callable[[], Any | Awaitable[Any]], *, timeout: float = 10.0, interval: float = 0.01
) -> None:
    """Run ``check`` (which asserts) until it passes; after ``timeout`` seconds re-raise its failure."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
            if isinstance(result, Awaitable):
                await result
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise
        await asyncio.sleep(interval)


class Recorder:
    """An on_change callback that remembers the events it was given."""

    def __init__(self) -> None:
        self.events: list[ChangeEvent] = []

    def __call__(self, event: ChangeEvent) -> None:
        self.events.append(event)

    def summary(self) -> list[tuple[str, str, int, int, int]]:
        """(path, kind, offset, size, version) of each event, for comparisons."""
        return [(e.path, e.kind, e.offset, e.size, e.version) for e in self.events]


@asynccontextmanager
async def serve_in_process(
    store: StoreBase,
    *,
    grants: Mapping[str, Sequence[str]] | None = None,
    max_write_bytes: int = 8 * 1024 * 1024,
    watch_backlog: int = 10_000,
    tls: ServerTls | None = None,
) -> AsyncIterator[str]:
    """Serve ``store`` with the real KnowledgeServicer on a free loopback port (TLS with ``tls``);
    yield ``host:port``."""
    authority = TokenAuthority(grants if grants is not None else {TOKEN: ["*"]})
    server = await start_knowledge(
        store, authority, max_write_bytes=max_write_bytes, watch_backlog=watch_backlog, tls=tls
    )
    try:
        yield server.target
    finally:
        await server.stop(0)
