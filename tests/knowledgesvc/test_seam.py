"""The knowledge service's request seam (knowledgesvc/rpc.py): every RPC declares its auth mode, and
the seam's order of checks holds on a real service — namespace name, token, grant, field limits."""

from __future__ import annotations

import pytest
from agentnet.v1 import knowledge_pb2

from agentsdk.errors import InvalidArgument, PayloadTooLarge, PermissionDenied, Unauthenticated
from agentsdk.knowledge import MemoryKnowledgeStore
from knowledgesvc.rpc import DECLARED, NAMESPACE, PER_ITEM, operation
from knowledgesvc.servicer import KNOWLEDGE_SERVICE
from tests.knowledgesvc.test_read_many import raw_rpc, reads, serve


def test_every_rpc_declares_its_auth_mode_through_the_seam() -> None:
    declared = {name.removeprefix("KnowledgeServicer."): auth for name, auth in DECLARED.items()}
    assert set(declared) == {m.name for m in KNOWLEDGE_SERVICE.methods}
    assert {name for name, auth in declared.items() if auth is PER_ITEM} == {"ReadMany"}
    assert all(auth is NAMESPACE for name, auth in declared.items() if name != "ReadMany")
    assert [operation(m.name) for m in KNOWLEDGE_SERVICE.methods] == [
        "read",
        "read_many",
        "write",
        "list",
        "delete",
        "exists",
        "append",
        "read_range",
        "watch",
    ]


async def test_the_seam_checks_name_token_grant_then_limits() -> None:
    async with serve(MemoryKnowledgeStore(), max_write_bytes=8) as target:
        async with raw_rpc(target, credential="not-a-token-at-all") as stranger:
            with pytest.raises(InvalidArgument):  # a malformed namespace name is refused before the token
                await stranger.read(knowledge_pb2.ReadRequest(namespace="../up", path="/a.md"))
            with pytest.raises(Unauthenticated):
                await stranger.read(knowledge_pb2.ReadRequest(namespace="team-a", path="/a.md"))
            with pytest.raises(Unauthenticated):
                await stranger.watch(knowledge_pb2.WatchRequest(namespace="team-a", prefix="/")).read()
        async with raw_rpc(target) as rpc:
            with pytest.raises(PermissionDenied):  # not granted: refused before the content's limit
                await rpc.write(knowledge_pb2.WriteRequest(namespace="secret", path="/a.md", content="x" * 100))
            with pytest.raises(PayloadTooLarge):
                await rpc.write(knowledge_pb2.WriteRequest(namespace="team-a", path="/a.md", content="x" * 100))
            written = await rpc.write(knowledge_pb2.WriteRequest(namespace="team-a", path="/a.md", content="short"))
            assert written.size == 5
            # ReadMany: one token lookup for the call, each item checked on its own.
            response = await rpc.read_many(reads(("team-a", "/a.md"), ("secret", "/a.md"), ("../up", "/a.md")))
            assert [r.file.content or r.error.reason for r in response.results] == [
                "short",
                "PERMISSION_DENIED",
                "INVALID_ARGUMENT",
            ]
