"""The Python SDK over TLS and mTLS against real servers (``start_hub`` / ``start_knowledge`` with
throwaway certificates), and the hub's binding of agent identities to client certificates."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
import pytest
from agentnet.v1 import connect_pb2, hub_pb2, hub_pb2_grpc

from agentsdk import Agent, ScriptedConfig
from agentsdk.a2a.client import AgentToAgent
from agentsdk.errors import PermissionDenied, Unauthenticated, Unavailable
from agentsdk.knowledge import MemoryKnowledgeStore, RemoteKnowledgeStore, TlsConfig
from agentsdk.network import HubClient
from agentsdk.tls import open_channel
from hubsvc.server import HubServer, start_hub
from hubsvc.storage import SqliteHubStore
from netkernel.envelope import EV_TEXT
from netkernel.identity import Passport
from servicekit.tls import ServerTls
from tests.eventually import assert_eventually
from tests.knowledgesvc.helpers import TOKEN, serve_in_process
from tests.system.security.certs import Bundle, make_ca, write_bundle, write_pair


@pytest.fixture
def bundle(tmp_path: Path) -> Bundle:
    return write_bundle(tmp_path / "certs", ["alice", "bob"])


def server_tls(bundle: Bundle, *, mutual: bool = False) -> ServerTls:
    return ServerTls(bundle.server_cert, bundle.server_key, bundle.ca_cert if mutual else None)


def client_tls(bundle: Bundle, name: str | None = None, **kw: str) -> TlsConfig:
    if name is None:
        return TlsConfig(ca_file=bundle.ca_cert, **kw)
    return TlsConfig(ca_file=bundle.ca_cert, cert_file=bundle.client_cert(name), key_file=bundle.client_key(name))


OPERATOR_TOKEN = "operator-token-for-tests"


@asynccontextmanager
async def hub(tmp_path: Path, tls: ServerTls, *, bind: bool = False) -> AsyncIterator[HubServer]:
    server = await start_hub(
        SqliteHubStore(tmp_path / "hub.db"), operator_token=OPERATOR_TOKEN, tls=tls, tls_bind_identity=bind
    )
    try:
        yield server
    finally:
        await server.stop(0.5)


async def audit(server: HubServer, tls: TlsConfig, kind: str, count: int) -> list[hub_pb2.AuditRecord]:
    """The hub's ``count`` audit records of ``kind``, read with the operator token over ``tls`` (records
    are written with the next group commit: polled until they are all there)."""
    channel = open_channel(server.target, tls)
    try:
        stub = hub_pb2_grpc.HubServiceStub(channel)
        metadata = (("authorization", f"Bearer {OPERATOR_TOKEN}"),)

        async def records() -> list[hub_pb2.AuditRecord]:
            response = await stub.ListAudit(hub_pb2.ListAuditRequest(kind=kind), metadata=metadata, timeout=10)
            assert len(response.records) == count, list(response.records)
            return list(response.records)

        found: list[hub_pb2.AuditRecord] = await assert_eventually(records)
        return found
    finally:
        await channel.close()


async def converse(client: HubClient, first: str, second: str) -> None:
    """Register two humans, open a conversation and deliver a message over Connect."""
    a = await client.register_human(Passport(name=first, kind="human"))
    b = await client.register_human(Passport(name=second, kind="human"), pull=True)
    channel = await a.open(type="conversation", target=second)
    sent = await a.send(channel.channel_id, "over TLS")
    got = await b.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=10)
    assert got.envelope_id == sent.envelope_id and got.text == "over TLS"


async def test_sdk_registers_streams_and_posts_over_tls(tmp_path: Path, bundle: Bundle) -> None:
    async with hub(tmp_path, server_tls(bundle)) as server:
        async with HubClient.connect(server.target, tls=client_tls(bundle)) as client:
            await converse(client, "alice", "bob")
            agents = await client.list_agents()
            assert {a.name for a in agents} == {"alice", "bob"}


async def test_sdk_over_mtls_with_a_client_certificate(tmp_path: Path, bundle: Bundle) -> None:
    async with hub(tmp_path, server_tls(bundle, mutual=True)) as server:
        async with HubClient.connect(server.target, tls=client_tls(bundle, "alice")) as client:
            await converse(client, "alice", "bob")  # without binding, one certificate may carry any identity


async def test_plaintext_sdk_cannot_reach_a_tls_hub(tmp_path: Path, bundle: Bundle) -> None:
    async with hub(tmp_path, server_tls(bundle)) as server:
        async with HubClient.connect(server.target) as client:
            with pytest.raises(Unavailable):
                await client.register_human(Passport(name="alice", kind="human"))


async def test_sdk_refuses_a_hub_whose_certificate_it_cannot_verify(tmp_path: Path, bundle: Bundle) -> None:
    other = tmp_path / "other-ca.pem"
    other.write_bytes(make_ca("someone else").cert_pem)
    async with hub(tmp_path, server_tls(bundle)) as server:
        for tls in (TlsConfig(ca_file=other), True):  # a private CA it does not trust; the default roots
            async with HubClient.connect(server.target, tls=tls) as client:
                with pytest.raises(Unavailable):
                    await client.register_human(Passport(name="alice", kind="human"))


async def test_server_name_overrides_the_name_verified(tmp_path: Path, bundle: Bundle) -> None:
    write_pair(bundle.directory, "internal", bundle.ca.server(["hub.internal"]))
    tls = ServerTls(bundle.directory / "internal.pem", bundle.directory / "internal.key")
    async with hub(tmp_path, tls) as server:
        async with HubClient.connect(server.target, tls=client_tls(bundle)) as client:
            with pytest.raises(Unavailable):  # the certificate is not for 127.0.0.1
                await client.register_human(Passport(name="alice", kind="human"))
        named = client_tls(bundle, server_name="hub.internal")
        async with HubClient.connect(server.target, tls=named) as client:
            await client.register_human(Passport(name="alice", kind="human"))


async def test_mtls_hub_refuses_clients_without_a_certificate_from_its_ca(tmp_path: Path, bundle: Bundle) -> None:
    stranger = make_ca("another CA").client("alice")
    write_pair(tmp_path, "stranger", stranger)
    async with hub(tmp_path, server_tls(bundle, mutual=True)) as server:
        for tls in (
            client_tls(bundle),
            TlsConfig(ca_file=bundle.ca_cert, cert_file=tmp_path / "stranger.pem", key_file=tmp_path / "stranger.key"),
        ):
            async with HubClient.connect(server.target, tls=tls) as client:
                with pytest.raises(Unavailable):
                    await client.register_human(Passport(name="alice", kind="human"))


def test_tls_config_checks_its_files(tmp_path: Path, bundle: Bundle) -> None:
    with pytest.raises(ValueError, match="both cert_file and key_file"):
        TlsConfig(ca_file=bundle.ca_cert, cert_file=bundle.client_cert("alice"))
    with pytest.raises(ValueError, match=r"TlsConfig\.ca_file: cannot read"):
        TlsConfig(ca_file=tmp_path / "missing.pem").channel_credentials()


async def test_knowledge_read_write_and_watch_over_mtls(tmp_path: Path, bundle: Bundle) -> None:
    async with (
        MemoryKnowledgeStore() as backend,
        serve_in_process(backend, tls=server_tls(bundle, mutual=True)) as target,
    ):
        async with RemoteKnowledgeStore(
            target, namespace="team", credential=TOKEN, tls=client_tls(bundle, "alice"), cache=True
        ) as store:
            await store.write("/memory/notes.md", "kept over mTLS")
            assert await store.read("/memory/notes.md") == "kept over mTLS"
            assert await store.namespace("other").list("/") == []  # a view shares the TLS connection
        async with RemoteKnowledgeStore(target, namespace="team", credential=TOKEN) as plaintext:
            with pytest.raises(Unavailable):
                await plaintext.read("/memory/notes.md")
        async with RemoteKnowledgeStore(target, namespace="team", credential=TOKEN, tls=client_tls(bundle)) as no_cert:
            with pytest.raises(Unavailable):
                await no_cert.read("/memory/notes.md")


async def test_a2a_client_dials_over_tls(tmp_path: Path, bundle: Bundle) -> None:
    async with hub(tmp_path, server_tls(bundle)) as server:
        async with HubClient.connect(server.target, tls=client_tls(bundle)) as client:
            alice = await client.register_human(Passport(name="alice", kind="human"))
            async with AgentToAgent(server.target, alice.credential, tls=client_tls(bundle)) as a2a:
                found = await a2a.discover_agents()
                assert isinstance(found, list)
            async with AgentToAgent(server.target, alice.credential) as plaintext:
                with pytest.raises(Unavailable):
                    await plaintext.discover_agents()


# -- identity bound to the client certificate ---------------------------------------------------


async def test_bound_identity_registers_and_works_with_its_own_certificate(tmp_path: Path, bundle: Bundle) -> None:
    async with hub(tmp_path, server_tls(bundle, mutual=True), bind=True) as server:
        async with HubClient.connect(server.target, tls=client_tls(bundle, "alice")) as as_alice:
            alice = await as_alice.register_human(Passport(name="alice", kind="human"))
            async with HubClient.connect(server.target, tls=client_tls(bundle, "bob")) as as_bob:
                bob = await as_bob.register_human(Passport(name="bob", kind="human"), pull=True)
                channel = await alice.open(type="conversation", target="bob")
                await alice.send(channel.channel_id, "bound")
                got = await bob.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=10)
                assert got.text == "bound"


async def test_bound_identity_refuses_registering_another_name(tmp_path: Path, bundle: Bundle) -> None:
    async with hub(tmp_path, server_tls(bundle, mutual=True), bind=True) as server:
        async with HubClient.connect(server.target, tls=client_tls(bundle, "alice")) as as_alice:
            with pytest.raises(PermissionDenied) as info:
                await as_alice.register_human(Passport(name="bob", kind="human"))
            assert "names agent 'alice'" in str(info.value) and "register 'bob'" in str(info.value)
            assert info.value.metadata == {"certificate_agent": "alice", "agent": "bob"}
            with pytest.raises(PermissionDenied):
                await as_alice.register(Agent("bob", config=ScriptedConfig([])), Passport(name="bob"))
        async with HubClient.connect(server.target, tls=client_tls(bundle, "bob")) as as_bob:
            await as_bob.register_human(Passport(name="bob", kind="human"))  # the name was not taken
        refusals = await audit(server, client_tls(bundle, "bob"), "identity_refused", 2)
        assert {r.subject_id for r in refusals} == {"alice"}
        assert json.loads(refusals[0].detail_json)["check"] == "register"


async def test_bound_identity_refuses_another_agents_credential(tmp_path: Path, bundle: Bundle) -> None:
    async with hub(tmp_path, server_tls(bundle, mutual=True), bind=True) as server:
        async with HubClient.connect(server.target, tls=client_tls(bundle, "alice")) as as_alice:
            alice = await as_alice.register_human(Passport(name="alice", kind="human"))
        bob_channel = open_channel(server.target, client_tls(bundle, "bob"))
        try:
            stub = hub_pb2_grpc.HubServiceStub(bob_channel)
            metadata = (("authorization", f"Bearer {alice.credential}"),)
            with pytest.raises(grpc.aio.AioRpcError) as unary:
                await stub.ListAgents(hub_pb2.ListAgentsRequest(), metadata=metadata, timeout=10)
            assert unary.value.code() == grpc.StatusCode.PERMISSION_DENIED
            assert "names agent 'bob'" in (unary.value.details() or "")

            hello = connect_pb2.ConnectRequest(hello=connect_pb2.Hello(credential=alice.credential))
            stream = stub.Connect(iter([hello]), timeout=10)
            with pytest.raises(grpc.aio.AioRpcError) as streamed:
                async for _ in stream:
                    pass
            assert streamed.value.code() == grpc.StatusCode.PERMISSION_DENIED
        finally:
            await bob_channel.close()
        async with HubClient.connect(server.target, tls=client_tls(bundle, "bob")) as as_bob:
            with pytest.raises(PermissionDenied):  # resuming alice from bob's connection
                await as_bob.resume_human(alice.credential)
        refusals = await audit(server, client_tls(bundle, "alice"), "identity_refused", 3)
        assert [r.actor_id for r in refusals] == [alice.agent_id] * 3
        assert {json.loads(r.detail_json)["certificate_agent"] for r in refusals} == {"bob"}


async def test_certificate_naming_no_agent_is_unauthenticated(tmp_path: Path, bundle: Bundle) -> None:
    ambiguous = bundle.ca.client("alice", uris=["agentnet:agent:mallory"])  # two names: names no agent
    write_pair(tmp_path, "ambiguous", ambiguous)
    tls = TlsConfig(ca_file=bundle.ca_cert, cert_file=tmp_path / "ambiguous.pem", key_file=tmp_path / "ambiguous.key")
    async with hub(tmp_path, server_tls(bundle, mutual=True), bind=True) as server:
        async with HubClient.connect(server.target, tls=tls) as client:
            with pytest.raises(Unauthenticated) as info:
                await client.register_human(Passport(name="alice", kind="human"))
            assert "connect with a client certificate that names your agent" in str(info.value)


async def test_common_name_names_the_agent_without_a_uri(tmp_path: Path, bundle: Bundle) -> None:
    write_pair(tmp_path, "cn-only", bundle.ca.client("carol", uri=False))
    tls = TlsConfig(ca_file=bundle.ca_cert, cert_file=tmp_path / "cn-only.pem", key_file=tmp_path / "cn-only.key")
    async with hub(tmp_path, server_tls(bundle, mutual=True), bind=True) as server:
        async with HubClient.connect(server.target, tls=tls) as client:
            with pytest.raises(PermissionDenied):
                await client.register_human(Passport(name="alice", kind="human"))
            await client.register_human(Passport(name="carol", kind="human"))


async def test_uri_names_the_agent_over_the_common_name(tmp_path: Path, bundle: Bundle) -> None:
    write_pair(tmp_path, "both", bundle.ca.client("dave", common_name="someone-else"))
    tls = TlsConfig(ca_file=bundle.ca_cert, cert_file=tmp_path / "both.pem", key_file=tmp_path / "both.key")
    async with hub(tmp_path, server_tls(bundle, mutual=True), bind=True) as server:
        async with HubClient.connect(server.target, tls=tls) as client:
            with pytest.raises(PermissionDenied):
                await client.register_human(Passport(name="someone-else", kind="human"))
            await client.register_human(Passport(name="dave", kind="human"))


async def test_operator_token_is_not_bound_to_a_certificate(tmp_path: Path, bundle: Bundle) -> None:
    server = await start_hub(
        SqliteHubStore(tmp_path / "hub.db"),
        operator_token="operator-token-for-tests",
        tls=server_tls(bundle, mutual=True),
        tls_bind_identity=True,
    )
    try:
        channel = open_channel(server.target, client_tls(bundle, "alice"))
        try:
            stub = hub_pb2_grpc.HubServiceStub(channel)
            metadata = (("authorization", "Bearer operator-token-for-tests"),)
            audit = await stub.ListAudit(hub_pb2.ListAuditRequest(), metadata=metadata, timeout=10)
            assert isinstance(audit, hub_pb2.ListAuditResponse)
        finally:
            await channel.close()
    finally:
        await server.stop(0.5)


async def test_bind_identity_without_a_client_ca_is_refused(tmp_path: Path, bundle: Bundle) -> None:
    with pytest.raises(ValueError, match="needs TLS with a client CA"):
        await start_hub(SqliteHubStore(tmp_path / "hub.db"), tls=server_tls(bundle), tls_bind_identity=True)
