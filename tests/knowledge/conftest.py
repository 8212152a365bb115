"""Fixtures: a real redis-server, every backend, and every backend behind the real knowledge service."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
import redis

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
from tests.knowledge.helpers import TOKEN, serve_in_process
from tests.procs import ServiceProcess, start_service

LOCAL_KINDS = ["memory", "sqlite", "disk", "redis", "locked-memory"]
REMOTE_KINDS = ["remote-memory", "remote-sqlite", "remote-disk", "remote-redis", "remote-subprocess"]


def free_port() -> int:
    """A TCP port that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_ping(port: int, proc: subprocess.Popen[bytes], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1)
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if client.ping():
                    return True
            except redis.exceptions.ConnectionError:
                time.sleep(0.05)
        return False
    finally:
        client.close()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Start a throw-away redis-server on a free port for the session; yield its URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not on PATH: run `make redis-server` to install it (CI does)")
    directory = tmp_path_factory.mktemp("redis")
    for _ in range(3):  # the free port may be taken between probing and binding
        port = free_port()
        proc = subprocess.Popen(
            [
                binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(directory),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if _wait_for_ping(port, proc, timeout=10):
            break
        proc.kill()
        proc.wait()
    else:
        pytest.fail("redis-server did not answer PING on three free ports")
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


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
