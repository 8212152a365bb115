"""Calls through :class:`servicekit.inprocess.InProcessChannel` against a real hub (and a bare server
with a small message limit): the same answers, streams and domain errors as over the hub's gRPC port,
the server's interceptors run (metrics, the hub's RPC spans), deadlines, cancellation, size limits,
unknown methods and a stopped server answered as gRPC answers them."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator

import grpc
import pytest
from agentnet.v1 import hub_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client import CollectorRegistry, Counter

from agentsdk.network import EV_TEXT, Hub, HubClient, Passport
from agentsdk.rpc import HubRpc
from agentsdk.transport import HubConnection
from netkernel.errors import NotFound, NotParticipant, Unauthenticated
from servicekit.inprocess import InProcessChannel
from servicekit.metrics import RpcCounter
from servicekit.runtime import RunningServer, start_server
from tests.eventually import assert_eventually


@pytest.fixture
async def hub() -> AsyncIterator[Hub]:
    async with Hub.open() as h:
        yield h


def in_process(hub: Hub) -> HubConnection:
    return HubConnection(hub.target, channel=InProcessChannel(hub.server.running.handlers))


async def test_a_conversation_through_the_in_process_channel_is_the_one_the_port_serves(hub: Hub) -> None:
    near = HubClient(in_process(hub))
    alice = await near.register_human(Passport(name="alice", kind="human"))
    bob = await hub.register_human(Passport(name="bob", kind="human"))  # over the gRPC port
    channel = await alice.open(type="conversation", target="bob")
    sent = [await alice.send(channel.channel_id, f"hello {i}") for i in range(5)]
    got = [await bob.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=10) for _ in sent]
    assert [e.envelope_id for e in got] == [e.envelope_id for e in sent]
    reply = await bob.send(channel.channel_id, "hi alice")
    back = await alice.next_envelope(predicate=lambda e: e.envelope_id == reply.envelope_id, timeout=10)
    assert back.text == "hi alice"  # delivered over the in-process Connect stream
    request = hub_pb2.ReadWalRequest(channel_id=channel.channel_id)
    near_wal = [item.envelope async for item in alice.rpc.read_wal(request)]
    port_wal = [item.envelope async for item in HubRpc(hub.connection, alice.rpc.credential).read_wal(request)]
    assert near_wal == port_wal and near_wal[-1].event_type == EV_TEXT
    await near.close()


async def test_refusals_are_the_hubs_domain_errors_with_the_same_message(hub: Hub) -> None:
    near = HubClient(in_process(hub))
    alice = await hub.register_human(Passport(name="alice", kind="human"))
    await hub.register_human(Passport(name="bob", kind="human"))
    carol = await hub.register_human(Passport(name="carol", kind="human"))
    channel = await alice.open(type="conversation", target="bob")
    request = hub_pb2.DescribeChannelRequest(channel_id=channel.channel_id)
    near_carol = HubRpc(near.connection, carol.rpc.credential)
    for rpc in (carol.rpc, near_carol):
        with pytest.raises(NotParticipant) as refused:
            await rpc.describe_channel(request)
        assert refused.value.metadata["channel_id"] == channel.channel_id
    with pytest.raises(NotParticipant) as on_port:
        await carol.rpc.describe_channel(request)
    with pytest.raises(NotParticipant) as in_proc:
        await near_carol.describe_channel(request)
    assert str(in_proc.value) == str(on_port.value) and in_proc.value.metadata == on_port.value.metadata
    with pytest.raises(NotParticipant):  # a server stream refused
        [item async for item in near_carol.read_wal(hub_pb2.ReadWalRequest(channel_id=channel.channel_id))]
    with pytest.raises(Unauthenticated):
        await HubRpc(near.connection, "nobody.not-a-credential").describe_channel(request)
    with pytest.raises(NotFound):
        await HubRpc(near.connection, alice.rpc.credential).describe_agent(
            hub_pb2.DescribeAgentRequest(name="nobody-here")
        )
    await near.close()


async def test_a_deadline_ends_the_call_and_cancels_the_handler(hub: Hub) -> None:
    alice = await hub.register_human(Passport(name="alice", kind="human"))
    handlers = hub.server.running.handlers
    channel = InProcessChannel(handlers)
    read_wal = channel.unary_stream(
        "/agentnet.v1.HubService/ReadWal",
        request_serializer=hub_pb2.ReadWalRequest.SerializeToString,
        response_deserializer=hub_pb2.ReadWalResponse.FromString,
    )
    await hub.register_human(Passport(name="bob", kind="human"))
    opened = await alice.open(type="conversation", target="bob")
    follow = hub_pb2.ReadWalRequest(channel_id=opened.channel_id, follow=True)
    call = read_wal(follow, metadata=(("authorization", f"Bearer {alice.rpc.credential}"),), timeout=0.3)
    with pytest.raises(grpc.aio.AioRpcError) as ended:
        [item async for item in call]
    assert ended.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    await assert_eventually(lambda: handlers.running == 0)  # the following handler was cancelled


async def test_cancelling_a_connect_stream_ends_the_hubs_session(hub: Hub) -> None:
    near = HubClient(in_process(hub))
    alice = await near.register_human(Passport(name="alice", kind="human"))
    await hub.register_human(Passport(name="bob", kind="human"))
    await alice.open(type="conversation", target="bob")  # the stream is up
    assert hub.core.sessions.streams_here(alice.agent_id)
    await near.close()  # cancels alice's Connect call
    await assert_eventually(lambda: not hub.core.sessions.streams_here(alice.agent_id))


@pytest.fixture
async def small_server() -> AsyncIterator[tuple[RunningServer, Counter]]:
    counter = Counter("calls", "calls served", ["method"], registry=CollectorRegistry())
    running = await start_server(
        [], host="127.0.0.1", port=0, max_message_bytes=1024, interceptors=[RpcCounter(counter)]
    )
    try:
        yield running, counter
    finally:
        await running.stop(0.5)


async def test_interceptors_run_and_limits_hold_on_a_bare_server(small_server: tuple[RunningServer, Counter]) -> None:
    running, counter = small_server
    stub = health_pb2_grpc.HealthStub(InProcessChannel(running.handlers))
    answer = await stub.Check(health_pb2.HealthCheckRequest(service=""))
    assert answer.status == health_pb2.HealthCheckResponse.SERVING
    assert counter.labels(method="/grpc.health.v1.Health/Check")._value.get() == 1  # the interceptor ran
    with pytest.raises(grpc.aio.AioRpcError) as too_big:
        await stub.Check(health_pb2.HealthCheckRequest(service="x" * 2000))
    assert too_big.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    unknown = InProcessChannel(running.handlers).unary_unary("/no.Such/Method")
    with pytest.raises(grpc.aio.AioRpcError) as missing:
        await unknown(b"")
    assert missing.value.code() == grpc.StatusCode.UNIMPLEMENTED
    await running.stop(0.5)
    with pytest.raises(grpc.aio.AioRpcError) as stopped:
        await stub.Check(health_pb2.HealthCheckRequest(service=""))
    assert stopped.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_a_stream_the_caller_drops_is_cancelled_and_a_stopped_server_ends_streams_unavailable(
    small_server: tuple[RunningServer, Counter],
) -> None:
    running, _ = small_server
    handlers = running.handlers
    stub = health_pb2_grpc.HealthStub(InProcessChannel(handlers))
    dropped = stub.Watch(health_pb2.HealthCheckRequest(service=""))
    first = await anext(aiter(dropped))
    assert first.status == health_pb2.HealthCheckResponse.SERVING
    assert handlers.running == 1
    del dropped  # as on gRPC: a call nobody holds any more is cancelled
    gc.collect()
    await assert_eventually(lambda: handlers.running == 0)
    watching = stub.Watch(health_pb2.HealthCheckRequest(service=""))
    answers = aiter(watching)
    assert (await anext(answers)).status == health_pb2.HealthCheckResponse.SERVING
    await running.stop(0.1)
    with pytest.raises(grpc.aio.AioRpcError) as ended:
        async for _ in answers:  # NOT_SERVING may come first, then the end
            pass
    assert ended.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_the_hubs_rpc_spans_cover_in_process_calls(spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans
    async with Hub.open(tracer_provider=provider) as hub:
        near = HubClient(in_process(hub))
        alice = await near.register_human(Passport(name="alice", kind="human"))
        await hub.register_human(Passport(name="bob", kind="human"))
        await alice.open(type="conversation", target="bob")
        method = "/agentnet.v1.HubService/OpenChannel"
        served = [s for s in exporter.get_finished_spans() if s.name == method]
        assert len(served) == 1 and served[0].kind == SpanKind.SERVER
        assert (served[0].attributes or {}).get("rpc.grpc.status_code") == grpc.StatusCode.OK.value[0]
        await near.close()
