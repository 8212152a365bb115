"""The typed RPC layer (agentsdk.rpc.HubRpc and OperatorRpc, agentsdk.knowledge.rpc.KnowledgeRpc): one
method per RPC of each service's descriptor, the generated table they mix in as ``make proto`` writes it
now, and against a real hub typed messages in and out, the hub's domain exceptions on failure, for
unary, server-streaming and Connect calls."""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from pathlib import Path

import pytest
from agentnet.v1 import envelope_pb2, hub_pb2, knowledge_pb2, operator_pb2
from google.protobuf.descriptor import ServiceDescriptor

from agentsdk.knowledge.rpc import KnowledgeRpc, WatchStream
from agentsdk.network import EV_TEXT, Hub, Passport
from agentsdk.network._delivery import DeliveryStream
from agentsdk.rpc import ConnectStream, HubRpc, OperatorRpc
from netkernel.errors import NotFound, NotParticipant, PermissionDenied, Unauthenticated
from scripts.rpc_tables import python as python_tables
from scripts.rpc_tables.descriptors import MessageRef, Method, Service, load
from tests.eventually import assert_eventually

HUB_PATHS = ("grpc", "in-process")
"""Each test runs with the embedded hub's client over its port and in process (conftest.py)."""

ROOT = Path(__file__).resolve().parents[3]


async def test_unary_and_streaming_calls_carry_typed_messages(hub: Hub) -> None:
    alice = await hub.register_human(Passport(name="alice", kind="human"))
    await hub.register_human(Passport(name="bob", kind="human"))
    channel = await alice.open(type="conversation", target="bob")
    await alice.send(channel.channel_id, "hello")
    described = await alice.rpc.describe_channel(hub_pb2.DescribeChannelRequest(channel_id=channel.channel_id))
    assert isinstance(described, hub_pb2.DescribeChannelResponse)
    assert described.channel.channel_id == channel.channel_id and list(described.offered_tools) == ["say"]
    items = [item async for item in alice.rpc.read_wal(hub_pb2.ReadWalRequest(channel_id=channel.channel_id))]
    assert all(isinstance(item, hub_pb2.ReadWalResponse) for item in items)
    seqs = [item.envelope.seq for item in items]
    assert seqs == sorted(seqs) and items[-1].envelope.event_type == EV_TEXT


async def test_failures_raise_the_hubs_domain_exception(hub: Hub) -> None:
    alice = await hub.register_human(Passport(name="alice", kind="human"))
    await hub.register_human(Passport(name="bob", kind="human"))
    carol = await hub.register_human(Passport(name="carol", kind="human"))
    channel = await alice.open(type="conversation", target="bob")
    request = hub_pb2.DescribeChannelRequest(channel_id=channel.channel_id)
    with pytest.raises(NotParticipant):
        await carol.rpc.describe_channel(request)
    with pytest.raises(NotParticipant):
        [item async for item in carol.rpc.read_wal(hub_pb2.ReadWalRequest(channel_id=channel.channel_id))]
    with pytest.raises(Unauthenticated):
        await HubRpc(hub.connection, "nobody.not-a-credential").describe_channel(request)


async def test_a_refused_connect_stream_raises_the_hubs_exception(hub: Hub) -> None:
    async def dispatch(envelope: envelope_pb2.Envelope, size: int) -> None:
        raise AssertionError("nothing is delivered to an unknown credential")

    stream = DeliveryStream(hub.connection, "nobody.not-a-credential", dispatch)
    with pytest.raises(Unauthenticated):
        await stream.start(timeout=10)
    await stream.stop()


# -- the layer against the services' descriptors ---------------------------------------------------


def snake_case(rpc: str) -> str:
    """``RegisterRemoteA2AAgent`` → ``register_remote_a2a_agent`` (how a typed method is named)."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z0-9])(?=[A-Z][a-z])", "_", rpc).lower()


def public_methods(cls: type) -> dict[str, Callable[..., object]]:
    """The class's public methods, the generated table's it mixes in included."""
    return {
        name: member
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_") and name != "as_identity"
    }


STREAM_TYPES = {"ConnectStream": ConnectStream, "WatchStream": WatchStream}


@pytest.mark.parametrize(
    ("cls", "service"),
    [
        (HubRpc, hub_pb2.DESCRIPTOR.services_by_name["HubService"]),
        (OperatorRpc, operator_pb2.DESCRIPTOR.services_by_name["OperatorService"]),
        (KnowledgeRpc, knowledge_pb2.DESCRIPTOR.services_by_name["KnowledgeService"]),
    ],
    ids=["HubService", "OperatorService", "KnowledgeService"],
)
def test_every_rpc_of_the_service_has_exactly_one_typed_method(cls: type, service: ServiceDescriptor) -> None:
    """One method per RPC (and nothing else), named after it, typed with the RPC's own request and
    response messages, with a docstring; a unary RPC is a coroutine, a streaming one is not (it
    returns the stream: an async iterator of the response type, or a stream object reading it)."""
    methods = public_methods(cls)
    assert sorted(methods) == sorted(snake_case(m.name) for m in service.methods)
    for rpc in service.methods:
        method = methods[snake_case(rpc.name)]
        hints = typing.get_type_hints(method, globalns=vars(inspect.getmodule(method)) | STREAM_TYPES)
        request, response = rpc.input_type.full_name, rpc.output_type.full_name
        assert method.__doc__ and method.__doc__.startswith(f"``{rpc.name}``"), rpc.name
        first = next(iter(p for p in inspect.signature(method).parameters if p != "self"))
        given = hints[first]
        if rpc.client_streaming:
            assert typing.get_origin(given) is AsyncIterator, rpc.name
            (given,) = typing.get_args(given)
        assert given.DESCRIPTOR.full_name == request, rpc.name
        returned = hints["return"]
        if not rpc.server_streaming:
            assert inspect.iscoroutinefunction(method), rpc.name
            assert returned.DESCRIPTOR.full_name == response, rpc.name
            continue
        assert not inspect.iscoroutinefunction(method), rpc.name
        if typing.get_origin(returned) is AsyncIterator:
            (item,) = typing.get_args(returned)
        else:  # a stream object: its frames are the response type
            reader = getattr(returned, "__aiter__", None) or returned.read
            item_hint = typing.get_type_hints(reader, globalns=vars(inspect.getmodule(returned)))["return"]
            item = next(a for a in typing.get_args(item_hint) if a is not type(None))
        assert item.DESCRIPTOR.full_name == response, rpc.name


def test_the_generated_table_is_what_make_proto_writes_now() -> None:
    """agentsdk/_generated_rpc.py is the generator's output for proto/ as it is (``make check-gen`` checks
    the same in CI): an RPC added to a proto reaches the SDK's clients after ``make proto``."""
    written = (ROOT / python_tables.OUTPUT).read_text(encoding="utf-8")
    assert written == python_tables.emit(load(ROOT / "proto"), ROOT)


def _with_hub_service(*methods: Method) -> list[Service]:
    """The services of proto/, HubService's RPCs replaced by ``methods``."""
    hub = Service("HubService", "agentnet.v1.HubService", "agentnet/v1/hub.proto", "", methods)
    return [hub if s.full_name == hub.full_name else s for s in load(ROOT / "proto")]


def _method(name: str, *, client_streaming: bool = False, comment: str = "") -> Method:
    request = MessageRef(f"agentnet.v1.{name}Request", f"{name}Request", "agentnet/v1/hub.proto")
    response = MessageRef(f"agentnet.v1.{name}Response", f"{name}Response", "agentnet/v1/hub.proto")
    return Method(name, request, response, client_streaming, False, comment)


CONNECT = _method("Connect", client_streaming=True)


def test_the_generator_refuses_a_client_stream_nobody_wrote_by_hand() -> None:
    """A new client-streaming RPC has no uniform method: the generator says to write it by hand."""
    services = _with_hub_service(CONNECT, _method("Upload", client_streaming=True))
    with pytest.raises(ValueError, match=r"HubService\.Upload streams from the client: write its method by hand"):
        python_tables.emit_unformatted(services)


def test_the_generator_refuses_a_stale_hand_written_name() -> None:
    """A hand-written RPC the service no longer has is named, not silently ignored."""
    with pytest.raises(ValueError, match=r"has no RPC \['Connect'\]"):
        python_tables.emit_unformatted(_with_hub_service(_method("Ping")))


def test_a_proto_comment_becomes_a_literal_docstring() -> None:
    """Backslashes and triple quotes in a comment stay text, and the RPC's name leads the docstring."""
    comment = 'Ping says \\d+ and """quoted"""\nsecond line ends "quoted"'
    source = python_tables.emit_unformatted(_with_hub_service(CONNECT, _method("Ping", comment=comment)))
    namespace: dict[str, typing.Any] = {}
    exec(compile(source, "generated", "exec"), namespace)
    ping = namespace["HubServiceMethods"].ping
    assert inspect.cleandoc(ping.__doc__) == '``Ping`` says \\d+ and """quoted"""\nsecond line ends "quoted"'


async def test_the_rpcs_the_layer_gained_reach_the_hub(hub: Hub) -> None:
    """A few of the methods the layer gained, each against the running hub: the channel list, a say,
    the context search, the task reads and the operator's reads (HubService.ListAudit and OperatorService)."""
    alice = await hub.register_human(Passport(name="alice", kind="human"))
    await hub.register_human(Passport(name="bob", kind="human"))
    channel = await alice.open(type="conversation", target="bob")
    listed = await alice.rpc.list_channels(hub_pb2.ListChannelsRequest())
    assert [c.channel_id for c in listed.channels] == [channel.channel_id]
    await alice.rpc.say(hub_pb2.SayRequest(channel_id=channel.channel_id, content="find me"))
    found = await alice.rpc.search_context(hub_pb2.SearchContextRequest(query="FIND"))
    assert [e.text for e in found.excerpts] == ["find me"]
    tools = await alice.rpc.list_tools(hub_pb2.ListToolsRequest(channel_id=channel.channel_id))
    assert "say" in {t.name for t in tools.tools}
    with pytest.raises(NotFound):
        await alice.rpc.get_task(hub_pb2.GetTaskRequest(task_id="no-such-task"))
    with pytest.raises(PermissionDenied):
        await alice.rpc.list_audit(hub_pb2.ListAuditRequest())
    operator = HubRpc(hub.connection, hub.operator_token)
    audit = await operator.list_audit(hub_pb2.ListAuditRequest(limit=1000))
    assert "channel_created" in {r.kind for r in audit.records}
    operator_rpc = OperatorRpc(hub.connection, hub.operator_token)
    status = await operator_rpc.get_status(operator_pb2.GetStatusRequest(), timeout=10)
    assert status.identities >= 2
    described = await operator_rpc.describe_channel(
        operator_pb2.OperatorServiceDescribeChannelRequest(channel_id=channel.channel_id)
    )
    assert described.live
    request = operator_pb2.OperatorServiceReadWalRequest(channel_id=channel.channel_id)
    data = [item.envelope.event_data_json async for item in operator_rpc.read_wal(request)]
    assert any("find me" in d for d in data)
    with pytest.raises(PermissionDenied):
        await OperatorRpc(hub.connection, alice.credential).get_status(operator_pb2.GetStatusRequest())


async def test_a_stream_the_reader_stops_is_cancelled_at_the_hub(hub: Hub) -> None:
    """The A2A gateway leaves a ReadWal follow when its A2A client goes: the hub lets the follower go."""
    alice = await hub.register_human(Passport(name="alice", kind="human"))
    await hub.register_human(Passport(name="bob", kind="human"))
    channel = await alice.open(type="conversation", target="bob")
    stream = alice.rpc.read_wal(hub_pb2.ReadWalRequest(channel_id=channel.channel_id, follow=True))
    assert isinstance(stream, AsyncGenerator)
    first = await anext(stream)
    assert first.envelope.channel_id == channel.channel_id
    await assert_eventually(lambda: hub.server.core.channels.watched(channel.channel_id))
    await stream.aclose()
    await assert_eventually(lambda: not hub.server.core.channels.watched(channel.channel_id))
