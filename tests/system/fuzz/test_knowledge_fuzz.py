"""Property-based fuzz of every unary knowledge RPC against a real knowledge service (sqlite backend).

For any request: the service answers, a refusal is a documented (reason, code) pair from
docs/errors.md and never INTERNAL/UNKNOWN, the stored files are unchanged after a refusal,
and the service still answers its health check.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from agentnet.v1 import knowledge_pb2, knowledge_pb2_grpc
from hypothesis import given
from hypothesis import strategies as st

from tests.procs import ServiceProcess, start_service
from tests.system.fuzz.checks import assert_documented_refusal, assert_serving, fuzz_settings, sqlite_fingerprint
from tests.system.fuzz.strategies import messages, mutations

pytestmark = pytest.mark.fuzz

SERVICE_NAME = "agentnet.v1.KnowledgeService"
SERVICE = knowledge_pb2.DESCRIPTOR.services_by_name["KnowledgeService"]
UNARY = [m for m in SERVICE.methods if not m.client_streaming and not m.server_streaming]
SETTINGS = fuzz_settings(max_examples=200)


@dataclass
class World:
    """A running knowledge service, its database, a channel, tokens and real values."""

    process: ServiceProcess
    db: Path
    channel: grpc.Channel
    tokens: dict[str, str]
    pool: dict[str, list[str]]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    data = tmp_path_factory.mktemp("knowledgefuzz")
    tokens = {"all": secrets.token_hex(16), "team": secrets.token_hex(16), "none": "", "garbage": "y" * 32}
    tokens_file = data / "tokens"
    tokens_file.write_text(f"{tokens['all']} *\n{tokens['team']} team-*\n")
    tokens_file.chmod(0o600)
    args = ["--data-dir", str(data), "--backend", "sqlite", "--tokens-file", str(tokens_file), "--log-level", "WARNING"]
    process = start_service("knowledgesvc", args, cwd=data)
    channel = grpc.insecure_channel(process.target)
    try:
        stub = knowledge_pb2_grpc.KnowledgeServiceStub(channel)
        md = (("authorization", f"Bearer {tokens['all']}"),)
        for ns, path, content in (("ns", "/notes/a.md", "héllo wörld"), ("team-x", "/log.txt", "line\n" * 50)):
            stub.Write(knowledge_pb2.WriteRequest(namespace=ns, path=path, content=content), metadata=md, timeout=10)
        pool = {
            "": ["ns", "team-x", "/notes/a.md", "/log.txt", "/notes"],
            "namespace": ["ns", "team-x", "other"],
            "path": ["/notes/a.md", "/log.txt", "/notes", "/", "/new.md"],
            "prefix": ["/notes", "/", ""],
            "content": ["new text", ""],
            "text": ["more\n"],
        }
        yield World(process, data / "knowledge.db", channel, tokens, pool)
    finally:
        channel.close()
        assert process.terminate() == 0, "".join(process.output[-50:])


BASES: dict[str, Any] = {
    "Read": knowledge_pb2.ReadRequest(namespace="ns", path="/notes/a.md"),
    "Write": knowledge_pb2.WriteRequest(namespace="ns", path="/notes/b.md", content="x"),
    "List": knowledge_pb2.ListRequest(namespace="ns", path="/"),
    "Delete": knowledge_pb2.DeleteRequest(namespace="ns", path="/notes/gone.md"),
    "Exists": knowledge_pb2.ExistsRequest(namespace="ns", path="/notes/a.md"),
    "Append": knowledge_pb2.AppendRequest(namespace="team-x", path="/log.txt", text="more\n"),
    "ReadRange": knowledge_pb2.ReadRangeRequest(namespace="ns", path="/notes/a.md", offset=3),
    "ReadMany": knowledge_pb2.ReadManyRequest(
        reads=[
            knowledge_pb2.ReadRequest(namespace="ns", path="/notes/a.md"),
            knowledge_pb2.ReadRequest(namespace="team-x", path="/log.txt"),
        ]
    ),
}


_REQUESTS: dict[tuple[int, str], st.SearchStrategy[Any]] = {}


def _requests(world: World, name: str) -> st.SearchStrategy[Any]:
    """The requests fuzzed for RPC ``name``: random ones, and (three times as often) its valid base
    request with a field made hostile. Built once per RPC and reused by every example (building the
    strategies again for each example cost a quarter of the module's time)."""
    key = (id(world), name)  # a world set up again (another module ran between) has a pool of its own
    if key not in _REQUESTS:
        method = SERVICE.methods_by_name[name]
        random_requests = messages(method.input_type, world.pool)
        mutated = mutations(BASES[name], world.pool)
        _REQUESTS[key] = st.one_of(random_requests, mutated, mutated, mutated)
    return _REQUESTS[key]


@pytest.mark.parametrize("method", UNARY, ids=[m.name for m in UNARY])
@SETTINGS
@given(data=st.data())
def test_every_unary_rpc_refuses_cleanly_and_changes_nothing(world: World, method: Any, data: st.DataObject) -> None:
    request = data.draw(_requests(world, method.name), label="request")
    caller = data.draw(st.sampled_from(["all"] * 6 + ["team", "none", "garbage"]))
    before = sqlite_fingerprint(world.db)
    call = world.channel.unary_unary(
        f"/{SERVICE_NAME}/{method.name}",
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=lambda b: b,
    )
    what = f"{method.name} with the {caller!r} token"
    try:
        call(request, metadata=(("authorization", f"Bearer {world.tokens[caller]}"),), timeout=10)
    except grpc.RpcError as err:
        assert_documented_refusal(err, what)
        assert sqlite_fingerprint(world.db) == before, f"{what}: the store changed although the call was refused"
    assert_serving(world.channel, SERVICE_NAME)


def test_the_fuzz_covers_every_unary_rpc() -> None:
    assert {m.name for m in UNARY} == {m.name for m in SERVICE.methods} - {"Watch"} == set(BASES)
