"""What the services store is readable by its owner only (issue #13 item 9): real services,
real files, checked with os.stat."""

from __future__ import annotations

import stat
from pathlib import Path

import grpc
import pytest
from agentnet.v1 import hub_pb2, hub_pb2_grpc, identity_pb2, knowledge_pb2, knowledge_pb2_grpc

from tests.procs import start_service


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_hub_keeps_its_data_private(tmp_path: Path) -> None:
    data = tmp_path / "data"
    proc = start_service("hubsvc", ["--data-dir", str(data)], cwd=tmp_path)
    try:
        with grpc.insecure_channel(proc.target) as channel:
            hub_pb2_grpc.HubServiceStub(channel).Register(
                hub_pb2.RegisterRequest(passport=identity_pb2.Passport(name="a")), timeout=10
            )
        assert mode(data) == 0o700
        for name in ("hub.db", "hub.db-wal", "hub.db-shm", "hub-operator.token"):
            assert mode(data / name) == 0o600, name
    finally:
        assert proc.terminate() == 0


def test_the_hub_tightens_a_database_other_users_could_read(tmp_path: Path) -> None:
    data = tmp_path / "data"
    proc = start_service("hubsvc", ["--data-dir", str(data)], cwd=tmp_path)
    assert proc.terminate() == 0
    for path in data.iterdir():
        path.chmod(0o644)
    proc = start_service("hubsvc", ["--data-dir", str(data)], cwd=tmp_path)
    try:
        for path in data.iterdir():
            assert mode(path) == 0o600, path.name
        assert "hub.db was accessible to other users" in "".join(proc.output)
    finally:
        assert proc.terminate() == 0


@pytest.mark.parametrize("backend", ["sqlite", "disk"])
def test_the_knowledge_service_keeps_its_data_private(tmp_path: Path, backend: str) -> None:
    data = tmp_path / "data"
    proc = start_service("knowledgesvc", ["--data-dir", str(data), "--backend", backend], cwd=tmp_path)
    try:
        token = (data / "knowledge.token").read_text().strip()
        with grpc.insecure_channel(proc.target) as channel:
            knowledge_pb2_grpc.KnowledgeServiceStub(channel).Write(
                knowledge_pb2.WriteRequest(namespace="ns", path="/notes/a.md", content="secret"),
                metadata=(("authorization", f"Bearer {token}"),),
                timeout=10,
            )
        assert mode(data) == 0o700
        assert mode(data / "knowledge.token") == 0o600
        if backend == "sqlite":
            for name in ("knowledge.db", "knowledge.db-wal", "knowledge.db-shm"):
                assert mode(data / name) == 0o600, name
        else:
            store = data / "knowledge"
            assert mode(store) == 0o700
            assert mode(store / "ns" / "notes" / "a.md") == 0o600
            # Every folder and file the store made: its sub-folders (made with their parents, which
            # mkdir -p makes 0755), its version records and journal, not only the written file.
            made = list(store.rglob("*"))
            assert {p.relative_to(store).as_posix() for p in made if p.is_dir()} >= {"ns", "ns/notes"}
            assert any("versions" in p.parts for p in made if p.is_file())
            assert {
                (p.relative_to(store).as_posix(), mode(p)) for p in made if p.is_dir() and mode(p) != 0o700
            } == set()
            assert {
                (p.relative_to(store).as_posix(), mode(p)) for p in made if p.is_file() and mode(p) != 0o600
            } == set()
    finally:
        assert proc.terminate() == 0
