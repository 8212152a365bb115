"""Fixtures: every backend (Redis on the session redis-server of tests/conftest.py), and behind the service."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from agentsdk.knowledge import (
    DiskKnowledgeStore,
    KnowledgeStore,
    LockedKnowledgeStore,
    MemoryKnowledgeStore,
    RedisKnowledgeStore,
    RemoteKnowledgeStore,
    SqliteKnowledgeStore,
    StoreBase,
)
from tests.knowledgesvc.helpers import TOKEN, serve_in_process
from tests.procs import ServiceProcess, start_service

LOCAL_KINDS = ["memory", "sqlite", "disk", "redis", "locked-memory"]
REMOTE_KINDS = ["remote-memory", "remote-sqlite", "remote-disk", "remote-redis", "remote-subprocess"]


@pytest.fixture(scope="session")
def knowledge_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    """The real knowledge service as a subprocess (sqlite backend) for the whole session."""
    directory = tmp_path_factory.mktemp("knowledgesvc")
    tokens = directory / "tokens"
    tokens.write_text(f"# test grants\n{TOKEN} *\n")
    tokens.chmod(0o600)
    proc = start_service(
        "knowledgesvc", ["--data-dir", str(directory / "data"), "--tokens-file", str(tokens)], cwd=directory
    )
    try:
        yield proc
    finally:
        if proc.terminate() != 0:
            raise AssertionError("knowledge service did not stop cleanly:\n" + "".join(proc.output))


def unique_name(prefix: str = "t") -> str:
    """A fresh namespace / key prefix, so tests sharing a server do not see each other's files."""
    return f"{prefix}{uuid.uuid4().hex[:12]}"


async def open_backend(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> StoreBase:
    """A fresh root store of backend ``kind`` (memory, sqlite, disk, redis)."""
    if kind == "memory":
        return MemoryKnowledgeStore()
    if kind == "sqlite":
        return SqliteKnowledgeStore(tmp_path / "knowledge.db")
    if kind == "disk":
        return DiskKnowledgeStore(tmp_path / "disk")
    if kind == "redis":
        url = request.getfixturevalue("redis_url")
        return RedisKnowledgeStore(url, prefix=f"test:{unique_name()}:")
    raise ValueError(kind)


async def open_store(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path, stack: AsyncExitStack
) -> KnowledgeStore:
    """A store of ``kind`` (see LOCAL_KINDS / REMOTE_KINDS), closed by ``stack``."""
    if kind == "locked-memory":
        return LockedKnowledgeStore(await stack.enter_async_context(MemoryKnowledgeStore()), asyncio.Lock())
    if kind == "remote-subprocess":
        service: ServiceProcess = request.getfixturevalue("knowledge_process")
        remote = RemoteKnowledgeStore(service.target, namespace=unique_name(), credential=TOKEN)
        return await stack.enter_async_context(remote)
    if kind.startswith("remote-"):
        backend = await stack.enter_async_context(await open_backend(kind.removeprefix("remote-"), request, tmp_path))
        target = await stack.enter_async_context(serve_in_process(backend))
        return await stack.enter_async_context(RemoteKnowledgeStore(target, namespace="ns1", credential=TOKEN))
    return await stack.enter_async_context(await open_backend(kind, request, tmp_path))


@pytest.fixture(params=LOCAL_KINDS + REMOTE_KINDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[KnowledgeStore]:
    """Each backend in-process, and each behind the real knowledge service."""
    async with AsyncExitStack() as stack:
        yield await open_store(request.param, request, tmp_path, stack)
