"""Nothing secret in what the services write: the hub's log (at DEBUG), audit log and database;
the knowledge service's log.

A real ``python -m hubsvc`` runs at ``--log-level DEBUG`` through registration, Connect,
posts, an A2A call with a nested call (call tokens), operator calls and refused bad
credentials; no credential, operator token or call token (nor a credential's stored
hash) may appear in its output, and no secret in its audit rows or its SQLite database.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from agentnet.v1 import hub_pb2, hub_pb2_grpc, identity_pb2

from agentsdk.errors import PermissionDenied, Unauthenticated
from agentsdk.knowledge import RemoteKnowledgeStore
from hubsvc.core.util import hash_secret
from tests.hubsvc.harness import EV_TEXT, Participant, call, data_of
from tests.hubsvc.test_a2a import a2a_agent, answering, invoke
from tests.hubsvc.test_a2a_call_tokens import database_text
from tests.procs import ServiceProcess, serving, start_service

BAD_CREDENTIAL = "typo-of-a-real-credential-0123456789abcdef"
BAD_OPERATOR_TOKEN = "wrong-operator-token-0123456789abcdef"


@pytest.fixture
def hub_process(tmp_path: Path) -> Iterator[ServiceProcess]:
    with serving("hubsvc", ["--data-dir", str(tmp_path / "data"), "--log-level", "DEBUG"], cwd=tmp_path) as proc:
        yield proc


async def operator_calls(target: str, token: str) -> list[hub_pb2.AuditRecord]:
    """ListAudit and ListExecutions as the operator, and one call with a wrong operator token."""
    async with grpc.aio.insecure_channel(target) as ch:
        stub = hub_pb2_grpc.HubServiceStub(ch)
        metadata = (("authorization", f"Bearer {token}"),)
        audit = await call(stub.ListAudit(hub_pb2.ListAuditRequest(), metadata=metadata, timeout=10))
        await call(stub.ListExecutions(hub_pb2.ListExecutionsRequest(), metadata=metadata, timeout=10))
        wrong = (("authorization", f"Bearer {BAD_OPERATOR_TOKEN}"),)
        with pytest.raises((Unauthenticated, PermissionDenied)):
            await call(stub.ListAudit(hub_pb2.ListAuditRequest(), metadata=wrong, timeout=10))
    return list(audit.records)


async def test_a_debug_hub_logs_no_credential_token_or_operator_secret(
    hub_process: ServiceProcess, tmp_path: Path
) -> None:
    target = hub_process.target
    operator_token = (tmp_path / "data" / "hub-operator.token").read_text().strip()
    a = await a2a_agent(target, "a")
    b = await a2a_agent(target, "b")
    c = await a2a_agent(target, "c")
    opened = await a.rpc("OpenChannel", hub_pb2.OpenChannelRequest(type="conversation", targets=[b.agent_id]))
    channel_id = opened.channel.channel_id
    await a.next(lambda e: e.event_type == "ag2.channel.opened" and e.channel_id == channel_id)
    await a.say(channel_id, "hello b")
    call_tokens: list[str] = []

    async def b_loop() -> None:
        question = await b.next(lambda e: e.event_type == EV_TEXT and "a2a" in data_of(e))
        execution_id = data_of(question)["a2a"]["execution_id"]
        token = await b.rpc("RefreshCallToken", hub_pb2.RefreshCallTokenRequest(execution_id=execution_id))
        fresh = await b.rpc("RefreshCallToken", hub_pb2.RefreshCallTokenRequest(call_token=token.call_token))
        call_tokens.extend([token.call_token, fresh.call_token])
        nested = await b.rpc("InvokeAgent", invoke(c, "and you?", call_token=fresh.call_token))
        with pytest.raises(Unauthenticated):  # a mistyped token is refused without being echoed
            await b.rpc("InvokeAgent", invoke(c, "again", call_token=fresh.call_token + "x"))
        await b.say(question.channel_id, f"C said: {nested.result}")

    b_task = asyncio.create_task(b_loop())
    async with answering(c, lambda _d: ("leaf", None)):
        top = await a.rpc("InvokeAgent", invoke(b, "ask C"))
    await b_task
    assert top.result == "C said: leaf"

    audit = await operator_calls(target, operator_token)
    # Refused bad credentials: as metadata, in Hello, and an agent credential on an operator RPC.
    stranger = Participant(target, identity_pb2.AgentRecord(agent_id="x"), BAD_CREDENTIAL)
    with pytest.raises(Unauthenticated):
        await stranger.rpc("ListExecutions", hub_pb2.ListExecutionsRequest())
    with pytest.raises(Unauthenticated):
        await stranger.connect()
    await stranger.close()
    with pytest.raises(PermissionDenied):
        await a.rpc("ListAudit", hub_pb2.ListAuditRequest())
    for p in (a, b, c):
        await p.close()
    assert hub_process.terminate() == 0

    secrets = {"operator token": operator_token, "bad credential": BAD_CREDENTIAL, "bad operator": BAD_OPERATOR_TOKEN}
    for p in (a, b, c):  # "<agent id>.<secret>", stored as the hash of the secret
        secrets[f"{p.name}'s credential"] = p.credential.partition(".")[2]
    for i, token in enumerate(call_tokens):  # "<execution id>.<secret>", kept hashed in memory
        secrets[f"call token {i}"] = token.partition(".")[2]
    stored = {f"hash of {k}": hash_secret(v) for k, v in secrets.items()}
    output = "".join(hub_process.output)
    assert "DEBUG" in output  # the hub did log at DEBUG
    audit_text = "\n".join(f"{r.kind} {r.actor_id} {r.subject_id} {r.detail_json}" for r in audit)
    assert audit
    database = database_text(tmp_path / "data" / "hub.db")
    assert channel_id in database
    # aiosqlite logs each statement with its parameters at DEBUG; the hub mutes that echo.
    assert "INSERT INTO wal" not in output and "hello b" not in output
    leaks = [f"{name} in the log" for name, value in {**secrets, **stored}.items() if value in output]
    leaks += [f"{name} in the audit log" for name, value in secrets.items() if value in audit_text]
    leaks += [f"{name} in the database" for name, value in secrets.items() if value in database]
    assert leaks == []


async def test_a_debug_knowledge_service_logs_no_token_or_memory(tmp_path: Path) -> None:
    data = tmp_path / "data"
    proc = start_service("knowledgesvc", ["--data-dir", str(data), "--log-level", "DEBUG"], cwd=tmp_path)
    try:
        token = (data / "knowledge.token").read_text().strip()
        async with RemoteKnowledgeStore(proc.target, namespace="ns", credential=token) as store:
            await store.write("/notes/private.md", "the customer's card ends in 4242")
            assert await store.read("/notes/private.md") == "the customer's card ends in 4242"
        async with RemoteKnowledgeStore(proc.target, namespace="ns", credential=BAD_CREDENTIAL) as stranger:
            with pytest.raises(Unauthenticated):
                await stranger.read("/notes/private.md")
    finally:
        assert proc.terminate() == 0
    output = "".join(proc.output)
    assert "DEBUG" in output
    secrets = {"token": token, "bad token": BAD_CREDENTIAL, "memory": "card ends in 4242"}
    assert [name for name, value in secrets.items() if value in output] == []
