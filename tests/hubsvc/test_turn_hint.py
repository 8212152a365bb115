"""Delivery.can_send: a live substantive delivery says whether its recipient may post now (CanSend's answer)."""

from __future__ import annotations

import pytest
from agentnet.v1 import connect_pb2, hub_pb2

from tests.hubsvc.harness import UNSET_CAN_SEND, Participant, RunningHub, open_channel, register


async def next_delivery(p: Participant, event_type: str) -> connect_pb2.Delivery:
    while True:
        delivery = await p.inbox.get()
        if delivery.envelope.event_type == event_type:
            return delivery


async def can_send(p: Participant, channel_id: str) -> bool:
    response = await p.rpc("CanSend", hub_pb2.CanSendRequest(channel_id=channel_id))
    return bool(response.allowed)


@pytest.mark.clients_on_one_replica(UNSET_CAN_SEND)
async def test_discussion_deliveries_name_the_next_speaker(
    hub: RunningHub, trio: tuple[Participant, Participant, Participant]
) -> None:
    alice, bob, carol = trio
    channel_id = await open_channel(alice, "discussion", [bob, carol])
    await alice.say(channel_id, "first")  # round robin: bob speaks next, then carol
    to_bob, to_carol = await next_delivery(bob, "ag2.msg.text"), await next_delivery(carol, "ag2.msg.text")
    assert to_bob.HasField("can_send") and to_bob.can_send is True
    assert to_carol.HasField("can_send") and to_carol.can_send is False
    assert [await can_send(bob, channel_id), await can_send(carol, channel_id)] == [True, False]  # the same answer
    await bob.say(channel_id, "second")
    assert (await next_delivery(carol, "ag2.msg.text")).can_send is True
    assert (await next_delivery(alice, "ag2.msg.text")).can_send is False


async def test_other_event_types_and_replays_leave_it_unset(hub: RunningHub) -> None:
    alice, bob = await register(hub.target, "alice"), await register(hub.target, "bob")
    await alice.connect()
    await bob.connect()
    channel_id = await open_channel(alice, "conversation", [bob])
    await alice.post(channel_id, "myapp.note", {"n": 1})
    assert not (await next_delivery(bob, "myapp.note")).HasField("can_send")
    await bob.disconnect()
    bob.auto_ack = False
    said = await alice.say(channel_id, "while you were away")
    await bob.connect(cursors={channel_id: said.seq - 1})
    replayed = await next_delivery(bob, "ag2.msg.text")
    assert replayed.replay and not replayed.HasField("can_send")
    for p in (alice, bob):
        await p.close()
