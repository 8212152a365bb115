"""Both services as real subprocesses with real (throwaway) certificates: TLS, mTLS, the bind check,
startup errors for unusable files, and certificates replaced on disk without a restart."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentsdk.errors import PermissionDenied
from agentsdk.network import HubClient, TlsConfig
from netkernel.identity import Passport
from tests.procs import ServiceProcess, serving
from tests.system.security.certs import Bundle, make_ca, write_bundle, write_file, write_pair

SERVICES = ("hubsvc", "knowledgesvc")


@pytest.fixture
def bundle(tmp_path: Path) -> Bundle:
    return write_bundle(tmp_path / "certs", ["alice"])


def tls_flags(bundle: Bundle, *, mutual: bool = False) -> list[str]:
    flags = ["--tls-cert", str(bundle.server_cert), "--tls-key", str(bundle.server_key)]
    return [*flags, "--tls-client-ca", str(bundle.ca_cert)] if mutual else flags


@contextmanager
def serve(tmp_path: Path, module: str, args: list[str]) -> Iterator[ServiceProcess]:
    with serving(module, ["--data-dir", str(tmp_path / "data"), *args], cwd=tmp_path) as proc:
        yield proc


def health(target: str, credentials: grpc.ChannelCredentials | None) -> int:
    """The overall health status over a new channel (TLS with ``credentials``, else plaintext)."""
    options = [("grpc.ssl_target_name_override", "localhost")]
    with (
        grpc.secure_channel(target, credentials, options=options)
        if credentials is not None
        else grpc.insecure_channel(target)
    ) as channel:
        status: int = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10).status
        return status


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll ``condition`` (e.g. a line of a service's output read by another thread) until it holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def client_credentials(ca: bytes, pair: tuple[Path, Path] | None = None) -> grpc.ChannelCredentials:
    if pair is None:
        return grpc.ssl_channel_credentials(ca)
    cert, key = pair
    return grpc.ssl_channel_credentials(ca, key.read_bytes(), cert.read_bytes())


def refused(target: str, credentials: grpc.ChannelCredentials | None) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        health(target, credentials)
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
    return info.value


@pytest.mark.parametrize("module", SERVICES)
def test_tls_serves_and_plaintext_clients_are_refused(module: str, tmp_path: Path, bundle: Bundle) -> None:
    with serve(tmp_path, module, tls_flags(bundle)) as proc:
        ca = bundle.ca_cert.read_bytes()
        assert health(proc.target, client_credentials(ca)) == health_pb2.HealthCheckResponse.SERVING
        refused(proc.target, None)  # a plaintext client cannot talk to a TLS port
        other_ca = make_ca("not the server's CA").cert_pem
        refused(proc.target, client_credentials(other_ca))  # nor one that does not trust the server's CA


@pytest.mark.parametrize("module", SERVICES)
def test_mtls_requires_a_client_certificate_from_the_client_ca(module: str, tmp_path: Path, bundle: Bundle) -> None:
    stranger = make_ca("another CA").client("alice")
    write_pair(tmp_path, "stranger", stranger)
    with serve(tmp_path, module, tls_flags(bundle, mutual=True)) as proc:
        ca = bundle.ca_cert.read_bytes()
        alice = (bundle.client_cert("alice"), bundle.client_key("alice"))
        assert health(proc.target, client_credentials(ca, alice)) == health_pb2.HealthCheckResponse.SERVING
        refused(proc.target, client_credentials(ca))  # no client certificate
        refused(proc.target, client_credentials(ca, (tmp_path / "stranger.pem", tmp_path / "stranger.key")))


@pytest.mark.parametrize("module", SERVICES)
def test_replaced_certificates_serve_new_connections_without_a_restart(
    module: str, tmp_path: Path, bundle: Bundle
) -> None:
    with serve(tmp_path, module, tls_flags(bundle, mutual=True)) as proc:
        old_ca = bundle.ca_cert.read_bytes()
        alice = (bundle.client_cert("alice"), bundle.client_key("alice"))
        with grpc.secure_channel(
            proc.target, client_credentials(old_ca, alice), options=[("grpc.ssl_target_name_override", "localhost")]
        ) as kept:
            stub = health_pb2_grpc.HealthStub(kept)
            assert stub.Check(health_pb2.HealthCheckRequest(), timeout=10).status == 1

            # Rotate everything to a new CA: server certificate, key and the client CA.
            new_ca = make_ca("rotated CA")
            write_pair(bundle.directory, "server", new_ca.server())
            write_file(bundle.ca_cert, new_ca.cert_pem)
            write_pair(tmp_path, "alice2", new_ca.client("alice"))
            alice2 = (tmp_path / "alice2.pem", tmp_path / "alice2.key")

            # A new connection gets the new certificate and is verified against the new client CA.
            assert health(proc.target, client_credentials(new_ca.cert_pem, alice2)) == 1
            refused(proc.target, client_credentials(old_ca, alice))  # the old chain is no longer served
            refused(proc.target, client_credentials(new_ca.cert_pem, alice))  # nor the old client CA trusted
            # The connection opened before the rotation keeps working.
            assert stub.Check(health_pb2.HealthCheckRequest(), timeout=10).status == 1
        assert proc.proc.poll() is None  # no restart


def run_service(module: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a service that is expected to refuse to start."""
    return subprocess.run(
        [sys.executable, "-m", module, "--port", "0", "--data-dir", str(cwd / "data"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("module", SERVICES)
@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_plaintext_on_a_non_loopback_address_needs_insecure(module: str, host: str, tmp_path: Path) -> None:
    result = run_service(module, ["--host", host], tmp_path)
    assert result.returncode != 0
    assert f"refusing to serve plaintext on {host}" in result.stderr
    assert "--insecure" in result.stderr


@pytest.mark.parametrize("module", SERVICES)
def test_insecure_allows_plaintext_on_every_interface(module: str, tmp_path: Path) -> None:
    with serve(tmp_path, module, ["--host", "0.0.0.0", "--insecure"]) as proc:
        assert health(f"127.0.0.1:{proc.port}", None) == 1


@pytest.mark.parametrize("module", SERVICES)
def test_tls_on_every_interface_needs_no_insecure(module: str, tmp_path: Path, bundle: Bundle) -> None:
    with serve(tmp_path, module, ["--host", "0.0.0.0", *tls_flags(bundle)]) as proc:
        assert health(f"127.0.0.1:{proc.port}", client_credentials(bundle.ca_cert.read_bytes())) == 1


@pytest.mark.parametrize("module", SERVICES)
def test_insecure_from_the_environment(module: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prefix = "AGENTNET_HUB_" if module == "hubsvc" else "AGENTNET_KNOWLEDGE_"
    monkeypatch.setenv(prefix + "INSECURE", "1")
    with serve(tmp_path, module, ["--host", "0.0.0.0"]) as proc:
        assert health(f"127.0.0.1:{proc.port}", None) == 1


BAD_FLAGS = {
    "cert without key": (["--tls-cert", "{certs}/server.pem"], "--tls-cert needs --tls-key"),
    "key without cert": (["--tls-key", "{certs}/server.key"], "--tls-key needs --tls-cert"),
    "client CA without TLS": (["--tls-client-ca", "{certs}/ca.pem"], "--tls-client-ca needs --tls-cert"),
    "missing certificate": (
        ["--tls-cert", "{certs}/missing.pem", "--tls-key", "{certs}/server.key"],
        "cannot read the TLS certificate",
    ),
    "unreadable key": (
        ["--tls-cert", "{certs}/server.pem", "--tls-key", "{certs}"],
        "cannot read the TLS key",
    ),
    "key of another certificate": (
        ["--tls-cert", "{certs}/server.pem", "--tls-key", "{certs}/client-alice.key"],
        "are not a usable PEM certificate and its matching private key",
    ),
    "not a certificate": (
        ["--tls-cert", "{certs}/server.key", "--tls-key", "{certs}/server.key"],
        "are not a usable PEM certificate",
    ),
    "client CA without a certificate": (
        ["--tls-cert", "{certs}/server.pem", "--tls-key", "{certs}/server.key", "--tls-client-ca", "{certs}/ca.key"],
        "holds no usable PEM certificate",
    ),
}


@pytest.mark.parametrize("module", SERVICES)
@pytest.mark.parametrize("case", sorted(BAD_FLAGS))
def test_unusable_tls_settings_stop_startup_with_a_clear_message(
    module: str, case: str, tmp_path: Path, bundle: Bundle
) -> None:
    args, message = BAD_FLAGS[case]
    result = run_service(module, [arg.format(certs=bundle.directory) for arg in args], tmp_path)
    assert result.returncode != 0
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_bind_identity_needs_a_client_ca(tmp_path: Path, bundle: Bundle) -> None:
    result = run_service("hubsvc", ["--tls-bind-identity", *tls_flags(bundle)], tmp_path)
    assert result.returncode != 0
    assert "--tls-bind-identity needs --tls-client-ca" in result.stderr


def test_a_half_replaced_certificate_keeps_the_loaded_one_until_the_key_follows(tmp_path: Path, bundle: Bundle) -> None:
    with serve(tmp_path, "hubsvc", tls_flags(bundle)) as proc:
        old_ca = bundle.ca_cert.read_bytes()
        new_ca = make_ca("rotated CA")
        pair = new_ca.server()
        write_file(bundle.server_cert, pair.cert)  # the certificate first: it does not match the old key
        assert health(proc.target, client_credentials(old_ca)) == 1  # still the loaded certificate
        refused(proc.target, client_credentials(new_ca.cert_pem))
        write_file(bundle.server_key, pair.key, private=True)  # now the set is whole again
        assert health(proc.target, client_credentials(new_ca.cert_pem)) == 1
        refused(proc.target, client_credentials(old_ca))
        wait_for(lambda: "cannot be used yet" in "".join(proc.output))  # the half-replaced state was logged


def test_tls_settings_from_the_environment(tmp_path: Path, bundle: Bundle, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTNET_KNOWLEDGE_TLS_CERT", str(bundle.server_cert))
    monkeypatch.setenv("AGENTNET_KNOWLEDGE_TLS_KEY", str(bundle.server_key))
    monkeypatch.setenv("AGENTNET_KNOWLEDGE_TLS_CLIENT_CA", str(bundle.ca_cert))
    with serve(tmp_path, "knowledgesvc", ["--host", "0.0.0.0"]) as proc:
        alice = (bundle.client_cert("alice"), bundle.client_key("alice"))
        assert health(f"127.0.0.1:{proc.port}", client_credentials(bundle.ca_cert.read_bytes(), alice)) == 1
        refused(f"127.0.0.1:{proc.port}", client_credentials(bundle.ca_cert.read_bytes()))


async def test_bind_identity_from_the_command_line(tmp_path: Path, bundle: Bundle) -> None:
    args = [*tls_flags(bundle, mutual=True), "--tls-bind-identity"]
    with serve(tmp_path, "hubsvc", args) as proc:
        alice = TlsConfig(
            ca_file=bundle.ca_cert, cert_file=bundle.client_cert("alice"), key_file=bundle.client_key("alice")
        )
        async with HubClient.connect(proc.target, tls=alice) as client:
            with pytest.raises(PermissionDenied):
                await client.register_human(Passport(name="bob", kind="human"))
            await client.register_human(Passport(name="alice", kind="human"))
