"""TLS between replicas dividing the channels (docs/scale-out.md "TLS between replicas"): replicas
serving mTLS with identity binding forward to each other over TLS, verifying each other's
certificates and presenting their own, and a call forwarded by a replica is not refused for the
replica's certificate (the replica that received the call checked the caller's).

Two replicas are real gRPC servers in this process on one redis-server with 8 partitions, serving TLS
with certificates of a throwaway CA; the clients are the public SDK over mTLS.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import grpc
import pytest
from agentnet.v1 import hub_pb2, hub_pb2_grpc

from agentsdk.network import EV_TEXT, HubClient, Passport
from agentsdk.tls import TlsConfig
from hubsvc.replica_peers import REPLICA_KEY_HEADER
from hubsvc.server import start_hub
from hubsvc.storage.redis_store import RedisHubStore
from netkernel.errors import PermissionDenied
from servicekit.tls import ServerTls, TlsConfigError
from tests.agentsdk.network.test_session_steering import open_conversation, recording
from tests.eventually import assert_eventually
from tests.hubsvc.harness import OPERATOR_TOKEN, RunningHub
from tests.hubsvc.test_divided_replicas import OPTIONS, PARTITIONS, Divided, divided, holder, holding_and_not, redis_url
from tests.system.security.certs import make_ca, write_file, write_pair

__all__ = ["divided", "redis_url"]  # the fixtures this module's tests use


@dataclasses.dataclass
class Certs:
    """A CA, a replica certificate (server and client use) and client certificates for alice and bob."""

    directory: Path

    def path(self, name: str) -> Path:
        return self.directory / name

    def server_tls(self) -> ServerTls:
        return ServerTls(self.path("replica.pem"), self.path("replica.key"), self.path("ca.pem"))

    def client(self, name: str) -> TlsConfig:
        return TlsConfig(
            ca_file=self.path("ca.pem"),
            cert_file=self.path(f"client-{name}.pem"),
            key_file=self.path(f"client-{name}.key"),
        )


@pytest.fixture
def certs(tmp_path: Path) -> Certs:
    ca = make_ca()
    write_file(tmp_path / "ca.pem", ca.cert_pem)
    write_pair(tmp_path, "replica", ca.server(("localhost", "127.0.0.1"), client_auth=True))
    for name in ("alice", "bob"):
        write_pair(tmp_path, f"client-{name}", ca.client(name))
    return Certs(tmp_path)


async def start_tls(divided: Divided, certs: Certs) -> RunningHub:
    """A divided replica serving mTLS with identity binding, calling the others over TLS."""
    return await divided.start(tls=certs.server_tls(), tls_bind_identity=True, replica_tls_ca=certs.path("ca.pem"))


async def test_replicas_serving_mtls_forward_to_each_other_and_keep_identity_binding(
    divided: Divided, certs: Certs
) -> None:
    a = await start_tls(divided, certs)
    b = await start_tls(divided, certs)
    await divided.settled()
    a, b = holding_and_not(a, b)
    async with (
        HubClient.connect(a.target, tls=certs.client("alice")) as on_a,
        HubClient.connect(b.target, tls=certs.client("bob"), follow_redirects=False) as on_b,
    ):
        alice = await on_a.register_human(Passport(name="alice", kind="human"), pull=False)
        bob = await on_b.register_human(Passport(name="bob", kind="human"), pull=False)
        to_alice: list[str] = []
        alice.on_envelope(recording(to_alice))
        channel_id = await open_conversation(alice, bob)
        assert holder(divided.hubs, channel_id) is a
        # Bob's posts reach the holder through b over TLS (ForwardPosts), and a unary call about the
        # channel is forwarded as it came (HubService): both pass a's identity binding.
        for text in ("one", "two", "three"):
            await bob.send(channel_id, text)
        assert await on_b.can_send(channel_id, bob.agent_id)

        async def arrived() -> bool:
            return to_alice == ["one", "two", "three"]

        await assert_eventually(arrived, timeout=10)
        # The binding still holds for the caller: bob's credential on alice's certificate is refused by b
        # before anything is forwarded, and a forged replica key does not lift it.
        async with HubClient.connect(b.target, tls=certs.client("alice")) as wrong:
            request = hub_pb2.CanSendRequest(channel_id=channel_id, event_type=EV_TEXT)
            with pytest.raises(PermissionDenied):
                await wrong.rpc.as_identity(bob.credential).can_send(request)
        credentials = grpc.ssl_channel_credentials(
            certs.path("ca.pem").read_bytes(),
            certs.path("client-alice.key").read_bytes(),
            certs.path("client-alice.pem").read_bytes(),
        )
        async with grpc.aio.secure_channel(a.target, credentials) as channel:
            forged = (("authorization", f"Bearer {bob.credential}"), (REPLICA_KEY_HEADER, "not-the-key"))
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await hub_pb2_grpc.HubServiceStub(channel).CanSend(request, metadata=forged, timeout=10)
            assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED


async def test_replica_tls_settings_need_tls_and_a_usable_ca(redis_url: str, tmp_path: Path, certs: Certs) -> None:
    store = RedisHubStore(redis_url, prefix="tls-settings:", partitions=PARTITIONS)
    with pytest.raises(ValueError, match="need TLS"):
        await start_hub(store, operator_token=OPERATOR_TOKEN, options=OPTIONS, replica_tls_ca=certs.path("ca.pem"))
    bad = write_file(tmp_path / "not-a-ca.pem", b"not a certificate")
    with pytest.raises(TlsConfigError, match="--replica-tls-ca"):
        await start_hub(
            store, operator_token=OPERATOR_TOKEN, options=OPTIONS, tls=certs.server_tls(), replica_tls_ca=bad
        )
