"""Limits every backend keeps alike (issue #13 items 6, 7, 8): offsets beyond 64 bits, the reserved
bookkeeping name, and refusals that echo little of a huge input."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path

import grpc
import pytest
from agentnet.v1 import knowledge_pb2, knowledge_pb2_grpc

from agentsdk.errors import InvalidArgument, OutOfRange
from agentsdk.knowledge import DiskKnowledgeStore, KnowledgeStore, StoreBase
from tests.knowledgesvc.conftest import open_backend
from tests.knowledgesvc.helpers import TOKEN, serve_in_process

AUTH = (("authorization", f"Bearer {TOKEN}"),)


@pytest.mark.parametrize("offset", [2**63 - 1, 2**63, 2**64 - 1])
async def test_an_offset_beyond_64_bits_is_out_of_range_on_every_backend(store: KnowledgeStore, offset: int) -> None:
    await store.write("/f", "hello")
    with pytest.raises(OutOfRange, match="offset"):
        await store.read_range("/f", offset)
    assert await store.read_range("/f", 5) == ""


async def test_the_bookkeeping_name_is_reserved_in_paths_on_every_backend(store: KnowledgeStore) -> None:
    for path in ("/.agentnet/lock", "/a/.agentnet/x", "/.AgentNet/y"):
        with pytest.raises(InvalidArgument, match="reserved"):
            await store.write(path, "x")
        with pytest.raises(InvalidArgument, match="reserved"):
            await store.read(path)
    assert await store.list("/") == []


@pytest.fixture(params=["memory", "sqlite", "disk", "redis"])
async def root(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreBase]:
    async with AsyncExitStack() as stack:
        yield await stack.enter_async_context(await open_backend(request.param, request, tmp_path))


async def test_the_bookkeeping_name_is_no_namespace_on_any_backend(root: StoreBase) -> None:
    for name in (".agentnet", ".AGENTNET"):
        with pytest.raises(InvalidArgument, match="reserved"):
            root.namespace(name)
    async with serve_in_process(root) as target, grpc.aio.insecure_channel(target) as channel:
        stub = knowledge_pb2_grpc.KnowledgeServiceStub(channel)
        request = knowledge_pb2.WriteRequest(namespace=".agentnet", path="/lock", content="overwritten")
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.Write(request, metadata=AUTH)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "reserved" in (refused.value.details() or "")


async def test_the_disk_lock_survives_a_write_to_the_reserved_namespace(tmp_path: Path) -> None:
    async with DiskKnowledgeStore(tmp_path / "disk") as disk, serve_in_process(disk) as target:
        await disk.write("/a", "x")  # creates the lock
        lock = tmp_path / "disk" / ".agentnet" / "lock"
        assert lock.read_bytes() == b""
        async with grpc.aio.insecure_channel(target) as channel:
            stub = knowledge_pb2_grpc.KnowledgeServiceStub(channel)
            with pytest.raises(grpc.aio.AioRpcError):
                await stub.Write(
                    knowledge_pb2.WriteRequest(namespace=".agentnet", path="/lock", content="x"), metadata=AUTH
                )
        assert lock.read_bytes() == b""


async def test_a_refusal_of_a_huge_field_is_small_and_says_what_was_wrong(tmp_path: Path) -> None:
    async with await open_backend("memory", None, tmp_path) as backend, serve_in_process(backend) as target:  # type: ignore[arg-type]
        async with grpc.aio.insecure_channel(target) as channel:
            stub = knowledge_pb2_grpc.KnowledgeServiceStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.Read(knowledge_pb2.ReadRequest(namespace="n" * 1_000_000, path="/x"), metadata=AUTH)
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "invalid namespace" in (refused.value.details() or "")
            assert len(refused.value.details() or "") <= 1024
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.Read(knowledge_pb2.ReadRequest(namespace="ns", path="/p" * 3000), metadata=AUTH)
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "path is 6000 bytes long, over the limit of 4096" in (refused.value.details() or "")
