"""A script that uses a knowledge store and never closes it still exits (issue #14).

Each case runs a real interpreter that opens the store, subscribes, writes in two namespaces
and returns from ``main`` without ``close()``; the test waits for the process to end.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentsdk.knowledge import SqliteKnowledgeStore
from tests.knowledgesvc.helpers import TOKEN
from tests.procs import ServiceProcess
from tests.system.lifecycle.exits import run_probe


@pytest.mark.parametrize("case", ["sqlite", "disk", "memory"])
def test_a_local_store_left_open_does_not_block_exit(case: str, tmp_path: Path) -> None:
    assert run_probe(case, tmp_path) == "returned\n"


def test_what_an_unclosed_sqlite_store_committed_is_there_on_the_next_open(tmp_path: Path) -> None:
    run_probe("sqlite", tmp_path)

    async def read() -> str:
        async with SqliteKnowledgeStore(tmp_path / "k.db") as store:
            return await store.read("/notes/a.md")

    assert asyncio.run(read()) == "hello"


def test_a_redis_store_left_open_does_not_block_exit(tmp_path: Path, redis_url: str) -> None:
    assert run_probe("redis", tmp_path, redis_url) == "returned\n"


@pytest.mark.parametrize("case", ["remote", "remote-cached"])
def test_a_remote_store_left_open_does_not_block_exit(
    case: str, tmp_path: Path, knowledge_process: ServiceProcess
) -> None:
    assert run_probe(case, tmp_path, knowledge_process.target, TOKEN) == "returned\n"
