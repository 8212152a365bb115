"""ReadMany: several reads in one call, each with its own outcome, and the client's coalescing of
concurrent reads into it (with its fallback to single Reads against a service without ReadMany)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
import pytest
from agentnet.v1 import knowledge_pb2

from agentsdk.errors import InvalidArgument, NotFound, PayloadTooLarge, PermissionDenied
from agentsdk.knowledge import MemoryKnowledgeStore, RemoteKnowledgeStore, StoreBase
from agentsdk.knowledge.read_batch import ReadBatcher
from agentsdk.knowledge.rpc import KnowledgeRpc
from knowledgestore.base import ReadWithin
from knowledgesvc.auth import TokenAuthority
from knowledgesvc.server import start_knowledge
from knowledgesvc.servicer import KNOWLEDGE_SERVICE, KnowledgeServicer
from tests.knowledgesvc.conftest import open_backend
from tests.knowledgesvc.helpers import TOKEN

#: Grants the team-* namespaces only, so a read of "secret" is refused.
GRANTS = {TOKEN: ["team-*"]}


@asynccontextmanager
async def serve(store: StoreBase, **limits: int) -> AsyncIterator[str]:
    """The real knowledge service over ``store`` (``GRANTS``, ``limits`` as start_knowledge's) on a free port."""
    server = await start_knowledge(store, TokenAuthority(GRANTS), **limits)  # type: ignore[arg-type]
    try:
        yield server.target
    finally:
        await server.stop(0)


@asynccontextmanager
async def raw_rpc(target: str, credential: str = TOKEN) -> AsyncIterator[KnowledgeRpc]:
    """The typed RPCs on a fresh channel to ``target``."""
    async with grpc.aio.insecure_channel(target) as channel:
        yield KnowledgeRpc(channel, credential, timeout=30)


def reads(*items: tuple[str, str]) -> knowledge_pb2.ReadManyRequest:
    """A ReadManyRequest of (namespace, path) items."""
    return knowledge_pb2.ReadManyRequest(reads=[knowledge_pb2.ReadRequest(namespace=n, path=p) for n, p in items])


def outcome(result: knowledge_pb2.ReadManyResult) -> tuple[str, str]:
    """("file", content) or ("error", reason)."""
    return ("file", result.file.content) if result.HasField("file") else ("error", result.error.reason)


@pytest.mark.parametrize("kind", ["memory", "sqlite", "disk", "redis"])
async def test_each_read_gets_its_own_file_or_error(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    async with await open_backend(kind, request, tmp_path) as backend:
        await backend.namespace("team-a").write("/notes/a.md", "alpha")
        await backend.namespace("team-a").write("/big", "b" * (70 * 1024))  # past the one-call small read
        await backend.namespace("team-b").write("/notes/a.md", "beta")
        await backend.namespace("secret").write("/notes/a.md", "hidden")
        async with serve(backend) as target, raw_rpc(target) as rpc:
            response = await rpc.read_many(
                reads(
                    ("team-a", "/notes/a.md"),
                    ("team-a", "/missing.md"),
                    ("secret", "/notes/a.md"),
                    ("team-a", "/.agentnet/x"),
                    ("team-b", "notes//a.md"),
                    ("team-a", "/big"),
                    ("bad name!", "/a"),
                    ("team-a", "/notes/a.md"),
                )
            )
            assert [outcome(r) for r in response.results] == [
                ("file", "alpha"),
                ("error", "NOT_FOUND"),
                ("error", "PERMISSION_DENIED"),
                ("error", "INVALID_ARGUMENT"),
                ("file", "beta"),
                ("file", "b" * (70 * 1024)),
                ("error", "INVALID_ARGUMENT"),
                ("file", "alpha"),
            ]
            first, missing, refused = response.results[0], response.results[1], response.results[2]
            assert (first.file.size, first.file.version) == (5, 1)
            assert missing.error.code == grpc.StatusCode.NOT_FOUND.value[0]
            assert dict(missing.error.metadata) == {"path": "/missing.md"}
            assert refused.error.code == grpc.StatusCode.PERMISSION_DENIED.value[0]
            assert "secret" in refused.error.message
            # The same refusal as a single Read.
            with pytest.raises(PermissionDenied) as denied:
                await rpc.read(knowledge_pb2.ReadRequest(namespace="secret", path="/notes/a.md"))
            assert denied.value.message == refused.error.message
            assert len((await rpc.read_many(reads())).results) == 0
        async with serve(backend) as target, raw_rpc(target, credential="not-a-token-at-all") as stranger:
            response = await stranger.read_many(reads(("team-a", "/notes/a.md")))
            assert [outcome(r) for r in response.results] == [("error", "UNAUTHENTICATED")]


async def test_too_many_items_are_refused_naming_the_field() -> None:
    async with MemoryKnowledgeStore() as backend, serve(backend, read_many_max_items=2) as target:
        async with raw_rpc(target) as rpc:
            with pytest.raises(InvalidArgument) as err:
                await rpc.read_many(reads(("team-a", "/a"), ("team-a", "/b"), ("team-a", "/c")))
            assert err.value.metadata == {"field": "reads", "items": "3", "limit": "2"}
            assert "--read-many-max-items" in err.value.message
            assert len((await rpc.read_many(reads(("team-a", "/a"), ("team-a", "/b")))).results) == 2


async def test_items_past_the_byte_budget_are_refused_alone_and_the_client_reads_them_singly() -> None:
    async with MemoryKnowledgeStore() as backend:
        files = {"/big": "B" * (70 * 1024), "/mid": "M" * (40 * 1024), "/small": "s" * 100}
        for path, content in files.items():
            await backend.namespace("team-a").write(path, content)
        async with serve(backend, read_many_max_bytes=100 * 1024) as target:
            async with raw_rpc(target) as rpc:
                response = await rpc.read_many(reads(*(("team-a", path) for path in files)))
                big, mid, small = response.results
                assert outcome(big) == ("file", files["/big"])
                assert mid.error.reason == "PAYLOAD_TOO_LARGE"
                assert mid.error.metadata["field"] == "reads" and mid.error.metadata["limit"] == str(100 * 1024)
                assert outcome(small) == ("file", files["/small"])  # later items that fit are still answered
            async with RemoteKnowledgeStore(target, namespace="team-a", credential=TOKEN) as store:
                assert await asyncio.gather(*(store.read(path) for path in files)) == list(files.values())


async def test_a_file_no_response_can_carry_is_refused_as_read_refuses_it() -> None:
    async with MemoryKnowledgeStore() as backend, serve(backend, read_budget_bytes=64 * 1024 * 1024) as target:
        await backend.namespace("team-a").write("/huge", "h" * (17 * 1024 * 1024))
        async with RemoteKnowledgeStore(target, namespace="team-a", credential=TOKEN) as store:
            with pytest.raises(PayloadTooLarge) as err:
                await store.read("/huge")
            assert "field" not in err.value.metadata and "read_range" in err.value.message


async def test_concurrent_reads_share_one_call_and_each_caller_gets_its_own_outcome() -> None:
    async with MemoryKnowledgeStore() as backend, serve(backend) as target:
        for i in range(20):
            await backend.namespace("team-a").write(f"/f{i}", f"file {i}")
        await backend.namespace("team-b").write("/f0", "b's file")
        async with RemoteKnowledgeStore(target, namespace="team-a", credential=TOKEN) as store:
            other, secret = store.namespace("team-b"), store.namespace("secret")
            calls = [store.read(f"/f{i}") for i in range(20)]
            calls += [store.read("/nope"), other.read("/f0"), secret.read("/f0"), store.read("/f3")]
            outcomes = await asyncio.gather(*calls, return_exceptions=True)
            assert outcomes[:20] == [f"file {i}" for i in range(20)]
            assert isinstance(outcomes[20], NotFound) and outcomes[20].metadata == {"path": "/nope"}
            assert outcomes[21] == "b's file"
            assert isinstance(outcomes[22], PermissionDenied)
            assert outcomes[23] == "file 3"
            batcher = store._reads()
            assert batcher.calls == 1  # all made in one event-loop turn: one ReadMany
            # A caller that gives up does not disturb the others.
            waiting = asyncio.ensure_future(store.read("/f1"))
            together = asyncio.gather(store.read("/f2"), store.read("/f5"))
            await asyncio.sleep(0)
            waiting.cancel()
            assert await together == ["file 2", "file 5"]
            assert waiting.cancelled()


class GatedStore(MemoryKnowledgeStore):
    """A memory store whose batched reads wait for ``gate`` (shared by its namespace views)."""

    def __init__(self, gate: asyncio.Event, entered: asyncio.Event) -> None:
        super().__init__()
        self.gate, self.entered = gate, entered

    def _make_view(self, name: str) -> GatedStore:
        return GatedStore(self.gate, self.entered)

    async def read_many_within(self, paths: Sequence[str], max_bytes: int) -> list[ReadWithin]:
        self.entered.set()
        await self.gate.wait()
        return await super().read_many_within(paths, max_bytes)


async def test_reads_made_while_a_batch_is_in_flight_go_out_together() -> None:
    gate, entered = asyncio.Event(), asyncio.Event()
    async with GatedStore(gate, entered) as backend, serve(backend) as target:
        gate.set()
        for i in range(10):
            await backend.namespace("team-a").write(f"/f{i}", f"file {i}")
        async with RemoteKnowledgeStore(target, namespace="team-a", credential=TOKEN) as store:
            gate.clear()
            first = asyncio.ensure_future(store.read("/f0"))
            await entered.wait()  # the first batch (one read) is held by the service
            rest = []
            for i in range(1, 10):  # one read per event-loop turn
                rest.append(asyncio.ensure_future(store.read(f"/f{i}")))
                await asyncio.sleep(0)
            gate.set()
            assert await first == "file 0"
            assert [await r for r in rest] == [f"file {i}" for i in range(1, 10)]
            assert store._reads().calls == 2


async def test_the_client_learns_a_lower_item_limit() -> None:
    async with MemoryKnowledgeStore() as backend, serve(backend, read_many_max_items=3) as target:
        for i in range(10):
            await backend.namespace("team-a").write(f"/f{i}", f"file {i}")
        async with RemoteKnowledgeStore(target, namespace="team-a", credential=TOKEN) as store:
            assert await asyncio.gather(*(store.read(f"/f{i}") for i in range(10))) == [f"file {i}" for i in range(10)]
            assert store._reads().max_items == 3


@asynccontextmanager
async def serve_without_read_many(store: StoreBase) -> AsyncIterator[str]:
    """A real gRPC server offering the knowledge service's Read and Write but not ReadMany (an older
    service): the method is not registered at all, so gRPC answers UNIMPLEMENTED."""
    servicer = KnowledgeServicer(store, TokenAuthority(GRANTS), max_write_bytes=1024 * 1024)
    handlers = {
        "Read": grpc.unary_unary_rpc_method_handler(
            servicer.Read,
            request_deserializer=knowledge_pb2.ReadRequest.FromString,
            response_serializer=knowledge_pb2.ReadResponse.SerializeToString,
        ),
        "Write": grpc.unary_unary_rpc_method_handler(
            servicer.Write,
            request_deserializer=knowledge_pb2.WriteRequest.FromString,
            response_serializer=knowledge_pb2.WriteResponse.SerializeToString,
        ),
    }
    server = grpc.aio.server()
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(KNOWLEDGE_SERVICE.full_name, handlers)])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(0)


@pytest.mark.parametrize("cache", [False, True])
async def test_reads_fall_back_to_single_reads_against_a_service_without_read_many(cache: bool) -> None:
    async with MemoryKnowledgeStore() as backend, serve_without_read_many(backend) as target:
        async with RemoteKnowledgeStore(target, namespace="team-a", credential=TOKEN, cache=cache) as store:
            await store.write("/a", "alpha")
            await store.write("/b", "beta")
            outcomes = await asyncio.gather(
                store.read("/a"), store.read("/missing"), store.read("/b"), return_exceptions=True
            )
            assert outcomes[0] == "alpha" and outcomes[2] == "beta"
            assert isinstance(outcomes[1], NotFound)
            batcher: ReadBatcher = store._reads()
            assert not batcher.batched and batcher.calls == 1  # asked once, then single Reads only
            await store.write("/a", "again")
            assert await store.read("/a") == "again"
            assert batcher.calls == 1
