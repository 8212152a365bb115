"""The typed RPC layer (agentsdk.rpc.HubRpc) against a real hub: typed messages in and out,
the hub's domain exceptions on failure, for unary, server-streaming and Connect calls."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from agentnet.v1 import envelope_pb2, hub_pb2

from agentsdk.network import EV_TEXT, Hub, Passport
from agentsdk.network.delivery import DeliveryStream
from agentsdk.rpc import HubRpc
from netkernel.errors import NotParticipant, Unauthenticated


@pytest.fixture
async def hub() -> AsyncIterator[Hub]:
    async with Hub.open() as h:
        yield h


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
    async def dispatch(envelope: envelope_pb2.Envelope) -> None:
        raise AssertionError("nothing is delivered to an unknown credential")

    stream = DeliveryStream(hub.connection, "nobody.not-a-credential", dispatch)
    with pytest.raises(Unauthenticated):
        await stream.start(timeout=10)
    await stream.stop()
