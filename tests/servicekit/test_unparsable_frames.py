"""Bytes that are not the request message get INVALID_ARGUMENT saying the frame could not be parsed
(servicekit/parse_guard.py): on the Connect stream (as its first frame or after Hello), on unary and
server-streaming RPCs of the hub, the knowledge service and the A2A gateway's gRPC port. They used
to get INTERNAL ("Report this bug") on a stream and UNKNOWN ("Unexpected <class DecodeError>") on a
unary call. Sent over raw gRPC channels, as an outside client would."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import grpc
import pytest
from agentnet.v1 import connect_pb2, hub_pb2

from a2agateway.config import GatewayOptions
from a2agateway.server import start_gateway
from agentsdk.knowledge import MemoryKnowledgeStore
from agentsdk.network import Hub
from knowledgesvc.auth import TokenAuthority
from knowledgesvc.server import start_knowledge
from netkernel.errors import InvalidArgument, error_from_rpc
from tests.hubsvc.harness import register

GARBAGE = b"\xff\xff\xff\xff\x0f" + os.urandom(64)
"""Not a protobuf message of any type (a field with an invalid wire type and a truncated varint)."""


def _raw(data: bytes) -> bytes:
    return data


def assert_unparsable(err: grpc.aio.AioRpcError, type_name: str) -> None:
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, (err.code(), err.details())
    assert f"could not be parsed as {type_name}" in (err.details() or "")
    refused = error_from_rpc(err)
    assert isinstance(refused, InvalidArgument) and refused.metadata["message_type"] == type_name


@pytest.fixture
async def hub() -> AsyncIterator[Hub]:
    async with Hub.open() as hub:
        yield hub


async def test_garbage_on_connect_and_unary_rpcs_of_the_hub_is_invalid_argument(hub: Hub) -> None:
    alice = await register(hub.target, "alice")
    auth = alice.metadata
    async with grpc.aio.insecure_channel(hub.target) as channel:
        connect = channel.stream_stream(
            "/agentnet.v1.HubService/Connect", request_serializer=_raw, response_deserializer=_raw
        )
        for _ in range(3):  # as the first frame
            call = connect(metadata=auth)
            await call.write(GARBAGE)
            with pytest.raises(grpc.aio.AioRpcError) as first:
                await call.read()
            assert_unparsable(first.value, "agentnet.v1.ConnectRequest")
        # After a valid Hello: the Welcome, then the stream ends with the same refusal.
        call = connect(metadata=auth)
        hello = connect_pb2.ConnectRequest(hello=connect_pb2.Hello(credential=alice.credential))
        await call.write(hello.SerializeToString())
        welcome = connect_pb2.ConnectResponse.FromString(await call.read())
        assert welcome.WhichOneof("frame") == "welcome"
        await call.write(GARBAGE)
        with pytest.raises(grpc.aio.AioRpcError) as later:
            while True:  # pings or deliveries may come first
                await call.read()
        assert_unparsable(later.value, "agentnet.v1.ConnectRequest")
        unary = channel.unary_unary(
            "/agentnet.v1.HubService/ListAgents", request_serializer=_raw, response_deserializer=_raw
        )
        with pytest.raises(grpc.aio.AioRpcError) as listed:
            await unary(GARBAGE, metadata=auth)
        assert_unparsable(listed.value, "agentnet.v1.ListAgentsRequest")
        streamed = channel.unary_stream(
            "/agentnet.v1.HubService/ReadWal", request_serializer=_raw, response_deserializer=_raw
        )
        with pytest.raises(grpc.aio.AioRpcError) as read:
            async for _ in streamed(GARBAGE, metadata=auth):
                pass
        assert_unparsable(read.value, "agentnet.v1.ReadWalRequest")
        health = channel.unary_unary(
            "/grpc.health.v1.Health/Check", request_serializer=_raw, response_deserializer=_raw
        )
        with pytest.raises(grpc.aio.AioRpcError) as checked:
            await health(GARBAGE)
        assert_unparsable(checked.value, "grpc.health.v1.HealthCheckRequest")
    # The hub still serves as before.
    agents = await alice.rpc("ListAgents", hub_pb2.ListAgentsRequest())
    assert [a.agent_id for a in agents.agents] == [alice.agent_id]


async def test_garbage_on_the_knowledge_service_is_invalid_argument() -> None:
    async with MemoryKnowledgeStore() as store:
        server = await start_knowledge(store, TokenAuthority({"t": ["*"]}))
        try:
            async with grpc.aio.insecure_channel(server.target) as channel:
                read = channel.unary_unary(
                    "/agentnet.v1.KnowledgeService/Read", request_serializer=_raw, response_deserializer=_raw
                )
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await read(GARBAGE, metadata=[("authorization", "Bearer t")])
                assert_unparsable(refused.value, "agentnet.v1.ReadRequest")
        finally:
            await server.stop(0)


async def test_garbage_on_the_a2a_gateways_grpc_port_is_invalid_argument(hub: Hub) -> None:
    gateway = await start_gateway(GatewayOptions(port=0, grpc_port=0, hub=hub.target))
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{gateway.grpc_port}") as channel:
            send = channel.unary_unary(
                "/lf.a2a.v1.A2AService/SendMessage", request_serializer=_raw, response_deserializer=_raw
            )
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await send(GARBAGE)
            assert_unparsable(refused.value, "lf.a2a.v1.SendMessageRequest")
    finally:
        await gateway.stop()
