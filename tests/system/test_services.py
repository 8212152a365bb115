"""Both services run as real subprocesses: health, reflection and clean SIGTERM shutdown;
the embedded hub (``Hub.open``) is built by the same factory and serves the same."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.protobuf import descriptor_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from agentsdk.network import Hub
from tests.procs import ServiceProcess, serving, start_service

SERVICES = {
    "hubsvc": "agentnet.v1.HubService",
    "knowledgesvc": "agentnet.v1.KnowledgeService",
}


@pytest.fixture(params=sorted(SERVICES))
def service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, ServiceProcess]]:
    module = request.param
    with serving(module, ["--data-dir", str(tmp_path / "data")], cwd=tmp_path) as proc:
        yield module, proc


def assert_serving(target: str, service_name: str) -> None:
    with grpc.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for name in ("", service_name):
            resp = stub.Check(health_pb2.HealthCheckRequest(service=name), timeout=10)
            assert resp.status == health_pb2.HealthCheckResponse.SERVING, name


REFLECTION_VERSIONS = ("v1", "v1alpha")


def reflect(
    channel: grpc.Channel, version: str, request: reflection_pb2.ServerReflectionRequest
) -> reflection_pb2.ServerReflectionResponse:
    """One request to grpc.reflection.<version>.ServerReflection. v1 and v1alpha share their
    messages field for field, so the v1alpha classes encode a v1 call exactly."""
    call = channel.stream_stream(
        f"/grpc.reflection.{version}.ServerReflection/ServerReflectionInfo",
        request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
        response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
    )
    responses = list(call(iter([request]), timeout=10))
    assert len(responses) == 1
    return responses[0]


def described_services(response: reflection_pb2.ServerReflectionResponse) -> set[str]:
    """Full names of the services declared by the files of a file_containing_symbol answer."""
    assert response.WhichOneof("message_response") == "file_descriptor_response", response
    names = set()
    for blob in response.file_descriptor_response.file_descriptor_proto:
        file = descriptor_pb2.FileDescriptorProto.FromString(blob)
        names |= {f"{file.package}.{s.name}" for s in file.service}
    return names


def assert_reflected(target: str, service_name: str) -> None:
    with grpc.insecure_channel(target) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        responses = list(stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")])))
        names = {s.name for s in responses[0].list_services_response.service}
        assert service_name in names
        assert "grpc.health.v1.Health" in names
        for version in REFLECTION_VERSIONS:
            listed = reflect(channel, version, reflection_pb2.ServerReflectionRequest(list_services=""))
            names = {s.name for s in listed.list_services_response.service}
            assert {service_name, "grpc.health.v1.Health"} <= names, (version, names)
            assert {f"grpc.reflection.{v}.ServerReflection" for v in REFLECTION_VERSIONS} <= names, (version, names)
            for symbol in (service_name, "grpc.reflection.v1.ServerReflection"):
                found = reflect(channel, version, reflection_pb2.ServerReflectionRequest(file_containing_symbol=symbol))
                assert symbol in described_services(found), (version, symbol)


def test_health_reports_serving(service: tuple[str, ServiceProcess]) -> None:
    module, proc = service
    assert_serving(proc.target, SERVICES[module])


def test_reflection_lists_the_service(service: tuple[str, ServiceProcess]) -> None:
    module, proc = service
    assert_reflected(proc.target, SERVICES[module])


async def test_embedded_hub_serves_health_and_reflection_like_the_service() -> None:
    async with Hub.open() as hub:
        await asyncio.to_thread(assert_serving, hub.target, SERVICES["hubsvc"])
        await asyncio.to_thread(assert_reflected, hub.target, SERVICES["hubsvc"])


def test_sigterm_stops_with_exit_code_zero(service: tuple[str, ServiceProcess]) -> None:
    _, proc = service
    assert proc.terminate(signal.SIGTERM) == 0
    assert any("stopped" in line for line in proc.output)


def test_sigint_stops_with_exit_code_zero(service: tuple[str, ServiceProcess]) -> None:
    _, proc = service
    assert proc.terminate(signal.SIGINT) == 0


def test_creates_data_dir_for_embedded_storage(service: tuple[str, ServiceProcess], tmp_path: Path) -> None:
    assert (tmp_path / "data").is_dir()


def test_help_documents_flags_and_env(tmp_path: Path) -> None:
    import subprocess
    import sys

    for module in SERVICES:
        out = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, check=True)
        for flag in ("--host", "--port", "--data-dir", "--log-level"):
            assert flag in out.stdout, (module, flag)


def test_hub_generates_a_private_operator_token_for_the_audit_log(tmp_path: Path) -> None:
    from agentnet.v1 import hub_pb2, hub_pb2_grpc, identity_pb2

    proc = start_service("hubsvc", ["--data-dir", str(tmp_path / "data")], cwd=tmp_path)
    try:
        token_file = tmp_path / "data" / "hub-operator.token"
        assert token_file.stat().st_mode & 0o777 == 0o600
        token = token_file.read_text().strip()
        with grpc.insecure_channel(proc.target) as channel:
            stub = hub_pb2_grpc.HubServiceStub(channel)
            stub.Register(hub_pb2.RegisterRequest(passport=identity_pb2.Passport(name="a")), timeout=10)
            audit = stub.ListAudit(hub_pb2.ListAuditRequest(), metadata=(("authorization", f"Bearer {token}"),))
            assert [r.kind for r in audit.records] == ["agent_registered"]
            with pytest.raises(grpc.RpcError) as refused:
                stub.ListAudit(hub_pb2.ListAuditRequest(), metadata=(("authorization", "Bearer nope"),))
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    finally:
        assert proc.terminate(signal.SIGTERM) == 0
