"""The knowledge service's own duties: authentication, namespaces, limits, wire statuses, processes."""

from __future__ import annotations

import signal
import stat
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import pytest
from agentnet.v1 import knowledge_pb2, knowledge_pb2_grpc

from agentsdk.errors import InvalidArgument, NotFound, PayloadTooLarge, PermissionDenied, Unauthenticated
from agentsdk.knowledge import MemoryKnowledgeStore, RemoteKnowledgeStore
from knowledgesvc.servicer import MAX_RESPONSE_BYTES
from tests.knowledgesvc.conftest import unique_name
from tests.knowledgesvc.helpers import TOKEN, Recorder, assert_eventually, serve_in_process
from tests.procs import ServiceProcess, serving, start_service

TEAM_TOKEN = "team-token-abcdefghijklmnop"
LIMIT = 1024


@pytest.fixture
async def target() -> AsyncIterator[str]:
    """A service granting TOKEN every namespace and TEAM_TOKEN only team-*, with a 1 KiB write limit."""
    async with MemoryKnowledgeStore() as backend:
        grants = {TOKEN: ["*"], TEAM_TOKEN: ["team-*", "shared"]}
        async with serve_in_process(backend, grants=grants, max_write_bytes=LIMIT) as address:
            yield address


def remote(target: str, namespace: str = "ns", credential: str = TOKEN) -> RemoteKnowledgeStore:
    return RemoteKnowledgeStore(target, namespace=namespace, credential=credential)


async def test_missing_or_unknown_token_is_unauthenticated(target: str) -> None:
    for credential in ("", "not-a-known-token-at-all"):
        async with remote(target, credential=credential) as store:
            with pytest.raises(Unauthenticated):
                await store.read("/x")
            with pytest.raises(Unauthenticated):
                await store.write("/x", "y")
            with pytest.raises(Unauthenticated):
                await store.on_change("/", Recorder())


async def test_namespace_not_granted_is_permission_denied(target: str) -> None:
    async with remote(target, "team-a", TEAM_TOKEN) as allowed:
        await allowed.write("/x", "ok")
        assert await allowed.read("/x") == "ok"
        for name in ("other", "teamx", "shared-not"):
            denied = allowed.namespace(name)
            with pytest.raises(PermissionDenied):
                await denied.read("/x")
            with pytest.raises(PermissionDenied):
                await denied.on_change("/", Recorder())
        assert await allowed.namespace("shared").list("/") == []


@pytest.mark.parametrize("name", ["", "bad/name", "x" * 65, "..", "spa ce", "ü"])
async def test_bad_namespace_names_are_invalid_argument(target: str, name: str) -> None:
    async with remote(target, name) as store:
        with pytest.raises(InvalidArgument):
            await store.write("/x", "y")
        with pytest.raises(InvalidArgument):
            await store.on_change("/", Recorder())


async def test_namespaces_are_isolated(target: str) -> None:
    async with remote(target, "one") as one:
        two = one.namespace("two")
        await one.write("/same/path", "one")
        await two.write("/same/path", "two")
        assert await one.read("/same/path") == "one"
        assert await two.read("/same/path") == "two"
        await one.delete("/same/path")
        assert await two.exists("/same/path")
        with pytest.raises(NotFound):
            await one.read("/same/path")


async def test_oversized_writes_and_appends_are_payload_too_large(target: str) -> None:
    async with remote(target) as store:
        await store.write("/fits", "x" * LIMIT)
        with pytest.raises(PayloadTooLarge, match=f"limit of {LIMIT} bytes"):
            await store.write("/big", "x" * (LIMIT + 1))
        with pytest.raises(PayloadTooLarge, match=f"limit of {LIMIT} bytes"):
            await store.append("/big", "é" * (LIMIT // 2 + 1))  # counted in UTF-8 bytes
        assert not await store.exists("/big")


async def test_responses_larger_than_a_message_are_refused(tmp_path: Path) -> None:
    async with MemoryKnowledgeStore() as backend:
        namespaced = backend.namespace("ns")
        await namespaced.write("/huge", "x" * (MAX_RESPONSE_BYTES + 1))
        async with serve_in_process(backend) as address, remote(address) as store:
            with pytest.raises(PayloadTooLarge, match="read_range from a later offset"):
                await store.read("/huge")
            assert await store.read_range("/huge", MAX_RESPONSE_BYTES - 2) == "xxx"


async def test_wire_statuses_and_response_fields(target: str) -> None:
    metadata = (("authorization", f"Bearer {TOKEN}"),)
    async with grpc.aio.insecure_channel(target) as channel:
        stub = knowledge_pb2_grpc.KnowledgeServiceStub(channel)
        written = await stub.Write(
            knowledge_pb2.WriteRequest(namespace="w", path="/f", content="hé"), metadata=metadata
        )
        assert (written.version, written.size) == (1, 3)
        appended = await stub.Append(knowledge_pb2.AppendRequest(namespace="w", path="f", text="→"), metadata=metadata)
        assert (appended.offset, appended.size, appended.version) == (3, 6, 2)
        read = await stub.Read(knowledge_pb2.ReadRequest(namespace="w", path="/f"), metadata=metadata)
        assert (read.content, read.size, read.version) == ("hé→", 6, 2)
        ranged = await stub.ReadRange(
            knowledge_pb2.ReadRangeRequest(namespace="w", path="/f", offset=1), metadata=metadata
        )
        assert (ranged.content, ranged.next_offset) == ("é→", 6)

        async def code_of(call: object) -> grpc.StatusCode:
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await call  # type: ignore[misc]
            return info.value.code()

        assert await code_of(stub.Read(knowledge_pb2.ReadRequest(namespace="w", path="/no"), metadata=metadata)) == (
            grpc.StatusCode.NOT_FOUND
        )
        bad_offset = knowledge_pb2.ReadRangeRequest(namespace="w", path="/f", offset=2)
        assert await code_of(stub.ReadRange(bad_offset, metadata=metadata)) == grpc.StatusCode.OUT_OF_RANGE
        traversal = knowledge_pb2.ReadRequest(namespace="w", path="/../etc/passwd")
        assert await code_of(stub.Read(traversal, metadata=metadata)) == grpc.StatusCode.INVALID_ARGUMENT
        assert await code_of(stub.Read(knowledge_pb2.ReadRequest(namespace="w", path="/f"))) == (
            grpc.StatusCode.UNAUTHENTICATED
        )
        other = (("authorization", f"Bearer {TEAM_TOKEN}"),)
        assert await code_of(stub.Read(knowledge_pb2.ReadRequest(namespace="w", path="/f"), metadata=other)) == (
            grpc.StatusCode.PERMISSION_DENIED
        )
        big = knowledge_pb2.WriteRequest(namespace="w", path="/b", content="x" * (LIMIT + 1))
        assert await code_of(stub.Write(big, metadata=metadata)) == grpc.StatusCode.RESOURCE_EXHAUSTED

        watch = stub.Watch(knowledge_pb2.WatchRequest(namespace="w", prefix="/"), metadata=metadata)
        first = await watch.read()
        assert first.subscribed
        await stub.Delete(knowledge_pb2.DeleteRequest(namespace="w", path="/f"), metadata=metadata)
        change = (await watch.read()).change
        assert (change.path, change.kind, change.size, change.version) == (
            "/f",
            knowledge_pb2.CHANGE_KIND_DELETED,
            0,
            0,
        )
        watch.cancel()


async def test_a_watch_that_falls_behind_is_ended_as_unavailable() -> None:
    metadata = (("authorization", f"Bearer {TOKEN}"),)
    async with MemoryKnowledgeStore() as backend, serve_in_process(backend, watch_backlog=3) as address:
        async with grpc.aio.insecure_channel(address) as channel:
            stub = knowledge_pb2_grpc.KnowledgeServiceStub(channel)
            watch = stub.Watch(knowledge_pb2.WatchRequest(namespace="ns", prefix="/"), metadata=metadata)
            assert (await watch.read()).subscribed
            # The memory store publishes without yielding, so all 20 changes queue before the stream sends any.
            for i in range(20):
                await backend.namespace("ns").write(f"/f{i}", "x")
            changes = 0
            with pytest.raises(grpc.aio.AioRpcError) as info:
                while True:
                    frame = await watch.read()
                    assert frame is not grpc.aio.EOF
                    changes += 1
            assert info.value.code() == grpc.StatusCode.UNAVAILABLE
            assert "fell 3 changes behind" in (info.value.details() or "")
            assert changes == 3


async def test_close_ends_active_watches(target: str) -> None:
    store = remote(target)
    recorder = Recorder()
    sub = await store.on_change("/", recorder)
    await store.write("/x", "1")
    await assert_eventually(lambda: _assert_count(recorder, 1))
    await store.close()
    assert not sub.active


def _assert_count(recorder: Recorder, count: int) -> None:
    assert len(recorder.events) == count


@pytest.fixture
def generated_token_service(tmp_path: Path) -> Iterator[tuple[ServiceProcess, Path]]:
    """The service as a subprocess without a tokens file (memory backend)."""
    data = tmp_path / "data"
    with serving("knowledgesvc", ["--data-dir", str(data), "--backend", "memory"], cwd=tmp_path) as proc:
        yield proc, data


async def test_subprocess_service_generates_a_private_token(
    generated_token_service: tuple[ServiceProcess, Path],
) -> None:
    proc, data = generated_token_service
    token_file = data / "knowledge.token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert any(str(token_file) in line for line in proc.output), proc.output
    token = token_file.read_text().strip()
    async with remote(proc.target, "any-namespace", token) as store:
        await store.write("/hello.md", "from a token nobody configured")
        assert await store.read("/hello.md") == "from a token nobody configured"
    async with remote(proc.target, "any-namespace", TOKEN) as intruder:
        with pytest.raises(Unauthenticated):
            await intruder.read("/hello.md")
    assert proc.terminate(signal.SIGTERM) == 0


@pytest.mark.parametrize("backend", ["memory", "sqlite", "disk", "redis"])
async def test_subprocess_service_serves_each_backend(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN} *\n")
    args = ["--data-dir", str(tmp_path / "data"), "--backend", backend, "--tokens-file", str(tokens)]
    if backend == "redis":
        args += ["--redis-url", request.getfixturevalue("redis_url"), "--redis-prefix", f"test:{unique_name()}:"]
    proc = start_service("knowledgesvc", args, cwd=tmp_path)
    try:
        async with remote(proc.target) as store:
            recorder = Recorder()
            await store.on_change("/", recorder)
            assert await store.append("/log", "a→") == 0
            assert await store.read_range("/log", 1) == "→"
            await assert_eventually(lambda: _assert_count(recorder, 1))
        assert proc.terminate(signal.SIGTERM) == 0
    finally:
        if proc.proc.poll() is None:
            proc.proc.kill()
            proc.proc.wait()
    if backend == "sqlite":
        assert (tmp_path / "data" / "knowledge.db").is_file()
        assert not (tmp_path / "data" / "knowledge.db-wal").exists()  # closed cleanly: WAL checkpointed away
    if backend == "disk":
        assert (tmp_path / "data" / "knowledge" / "ns" / "log").read_text() == "a→"


def test_bad_tokens_file_stops_startup_with_a_message(tmp_path: Path) -> None:
    import subprocess
    import sys

    tokens = tmp_path / "tokens"
    tokens.write_text("short *\n")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "knowledgesvc",
            "--port",
            "0",
            "--data-dir",
            str(tmp_path),
            "--tokens-file",
            str(tokens),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "at least 16 characters" in result.stderr
