"""A script that connects to a hub and never closes its clients still exits (issue #14)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.procs import ServiceProcess, start_service
from tests.system.lifecycle.exits import run_probe


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    """The real hub service as a subprocess."""
    directory = tmp_path_factory.mktemp("hub")
    proc = start_service("hubsvc", ["--data-dir", str(directory)], cwd=directory)
    try:
        yield proc
    finally:
        proc.terminate()


@pytest.mark.parametrize("case", ["hub-connection", "human", "agent"])
def test_a_hub_client_left_connected_does_not_block_exit(case: str, tmp_path: Path, hub: ServiceProcess) -> None:
    assert run_probe(case, tmp_path, hub.target) == "returned\n"
