"""Both services bind their ports through ``servicekit.runtime.start_server``: the Prometheus endpoint
answers while the service runs and is closed when the service stops and when the gRPC port cannot be
served (the service never started); a taken port stops the service with a message naming the flag."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from hubsvc.server import start_hub
from hubsvc.storage.sqlite import SqliteHubStore
from knowledgestore.sqlite_store import SqliteKnowledgeStore
from knowledgesvc.auth import TokenAuthority
from knowledgesvc.server import start_knowledge
from servicekit.metrics import MetricsSettings
from servicekit.runtime import PortUnavailable
from tests.knowledgesvc.helpers import TOKEN
from tests.procs import ROOT
from tests.scrape import scrape

Start = Callable[[Path, int, MetricsSettings], Awaitable[Any]]


async def _hub(tmp: Path, port: int, metrics: MetricsSettings) -> Any:
    return await start_hub(SqliteHubStore(tmp / "hub.db"), port=port, metrics=metrics)


@asynccontextmanager
async def _knowledge_store(tmp: Path) -> AsyncIterator[SqliteKnowledgeStore]:
    store = SqliteKnowledgeStore(tmp / "knowledge.db")
    await store.open()
    try:
        yield store
    finally:
        await store.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _answers(port: int) -> bool:
    """Whether the endpoint answers a scrape (False: the port is closed)."""
    try:
        await scrape(f"http://127.0.0.1:{port}/metrics")
    except OSError:
        return False
    return True


@pytest.mark.parametrize("service", ["hub", "knowledge"])
async def test_the_metrics_endpoint_lives_exactly_as_long_as_the_service(service: str, tmp_path: Path) -> None:
    async with _knowledge_store(tmp_path) as kstore:

        async def start(port: int, metrics_port: int) -> Any:
            metrics = MetricsSettings(port=metrics_port)
            if service == "hub":
                return await _hub(tmp_path, port, metrics)
            return await start_knowledge(kstore, TokenAuthority({TOKEN: ["*"]}), port=port, metrics=metrics)

        metrics_port = _free_port()
        server = await start(0, metrics_port)
        assert await _answers(metrics_port)
        await server.stop()
        assert not await _answers(metrics_port)

        with socket.socket() as taken:  # the gRPC port is taken: the service does not start ...
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            with pytest.raises(PortUnavailable, match="could not bind"):
                await start(taken.getsockname()[1], metrics_port)
        assert not await _answers(metrics_port)  # ... and leaves no metrics endpoint behind


@pytest.mark.parametrize(
    ("module", "flag"), [("hubsvc", "--port"), ("knowledgesvc", "--port"), ("hubsvc", "--metrics-port")]
)
def test_a_taken_port_stops_the_service_with_a_message(module: str, flag: str, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        args = ["--port", "0", "--metrics-port", port] if flag == "--metrics-port" else ["--port", port]
        done = subprocess.run(
            [sys.executable, "-m", module, "--data-dir", str(tmp_path / "data"), *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and f"Pick another with {flag}" in done.stderr, done.stderr
