"""``create_channel`` answers once the channel is open, as AG2's hub answers it: AG2 programs in separate
processes send right after ``open()`` (one send, or 512 in flight at once) and every envelope lands."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from hubsvc.core.options import HubOptions
from tests.ag2gateway.conftest import Ag2Error, Net, open_net
from tests.ag2gateway.test_channels import TOKEN, texts
from tests.eventually import assert_eventually

NO_INBOX_CAP = {"limits": {"inbox": {"max_pending": 0}}}
"""AG2's ``Rule(limits=LimitsBlock(inbox=InboxBlock(max_pending=0)))``: 0 turns the inbox cap off."""
OPENING = ["ag2.channel.invite", "ag2.channel.invite.ack", "ag2.channel.opened"]
"""What the WAL holds of a two-party channel before its first message (read by the invitee: the invite
is addressed to it alone, and a reader sees what it may see)."""


def event_types(wal: list[dict[str, Any]]) -> list[str]:
    """The event types of a WAL, in admission order."""
    return [e["event_type"] for e in wal]


async def test_a_send_right_after_open_lands_every_time(net: Net) -> None:
    bob_process = await net.another_process()
    await bob_process("human", name="bob", token=TOKEN.format("bob"))
    await net.ag2("human", name="alice", token=TOKEN.format("alice"))
    for round_ in range(10):  # each open is answered open: never "not open yet", whatever the timing
        out = await net.ag2("open_send", who="alice", type="conversation", targets=["bob"], texts=[f"hi {round_}"])
        assert out["state"] == "active"
        wal = await bob_process("call", name="read_wal", args=[out["channel_id"]])
        assert event_types(wal) == [*OPENING, "ag2.msg.text"]
        assert wal[-1]["envelope_id"] == out["envelope_ids"][0]

    async def bob_got_all() -> bool:
        assert texts(await bob_process("received", who="bob")) == [f"hi {r}" for r in range(10)]
        return True

    await assert_eventually(bob_got_all, timeout=30)


async def test_512_sends_in_flight_right_after_open_all_land_once(net: Net) -> None:
    bob_process = await net.another_process()
    bob = await bob_process("human", name="bob", token=TOKEN.format("bob"), rule=NO_INBOX_CAP)
    alice = await net.ag2("human", name="alice", token=TOKEN.format("alice"))
    sent = [f"m{i:03d}" for i in range(512)]
    out = await net.ag2("open_send", who="alice", type="conversation", targets=["bob"], texts=sent)
    assert out["state"] == "active" and len(set(out["envelope_ids"])) == 512

    wal = await bob_process("call", name="read_wal", args=[out["channel_id"]])
    assert event_types(wal) == [*OPENING, *["ag2.msg.text"] * 512]
    assert [e["sender_id"] for e in wal[3:]] == [alice["agent_id"]] * 512
    assert sorted(e["event_data"]["text"] for e in wal[3:]) == sent
    assert sorted(e["envelope_id"] for e in wal[3:]) == sorted(out["envelope_ids"])
    assert [e["envelope_id"] for e in wal] == sorted(e["envelope_id"] for e in wal)  # ids sort in WAL order

    async def bob_got_each_once_in_wal_order() -> bool:
        received = [e for e in await bob_process("received", who="bob") if e["event_type"] == "ag2.msg.text"]
        assert [e["envelope_id"] for e in received] == [e["envelope_id"] for e in wal[3:]]
        return True

    await assert_eventually(bob_got_each_once_in_wal_order, timeout=60)
    assert wal[0]["audience"] == [bob["agent_id"]]  # the invite went to bob alone


async def test_an_invitee_that_never_acks_fails_the_open_as_ag2s_ack_timeout(tmp_path: Path) -> None:
    async with open_net(tmp_path, HubOptions(invite_ack_timeout=1.0)) as net:
        bob_process = await net.another_process()
        await bob_process("human", name="bob", token=TOKEN.format("bob"), auto_ack=False)
        alice = await net.ag2("human", name="alice", token=TOKEN.format("alice"))
        with pytest.raises(Ag2Error, match=r"ProtocolError: .*ack timeout.*invite_timeout"):
            await net.ag2("open", who="alice", type="consulting", targets=["bob"])
        mine = {"agent_id": alice["agent_id"], "include_terminal": True}
        [channel] = await net.ag2("call", name="list_channels", kwargs=mine)
        assert (channel["state"], channel["close_reason"]) == ("closed", "invite_timeout")


async def test_an_invitee_that_rejects_fails_the_open_and_the_channel_is_closed(net: Net) -> None:
    bob_process = await net.another_process()
    bob = await bob_process("human", name="bob", token=TOKEN.format("bob"), auto_ack=False)
    alice = await net.ag2("human", name="alice", token=TOKEN.format("alice"))
    opening = asyncio.ensure_future(net.ag2("open", who="alice", type="conversation", targets=["bob"]))

    async def invited() -> str:
        invites = [e for e in await bob_process("received", who="bob") if e["event_type"] == "ag2.channel.invite"]
        assert len(invites) == 1, invites
        return str(invites[0]["channel_id"])

    channel_id = await assert_eventually(invited, timeout=30)
    assert not opening.done()  # create_channel has not answered: the invite is not answered yet
    reject = {
        "channel_id": channel_id,
        "sender_id": bob["agent_id"],
        "audience": None,
        "event_type": "ag2.channel.invite.reject",
        "event_data": {"channel_id": channel_id, "reason": "busy"},
    }
    await bob_process("rpc", name="post_envelope", params={"envelope": reject})
    with pytest.raises(Ag2Error, match=r"ProtocolError: .*rejected.*invite_rejected"):
        await opening
    mine = {"agent_id": alice["agent_id"], "include_terminal": True}
    [channel] = await net.ag2("call", name="list_channels", kwargs=mine)
    assert channel["channel_id"] == channel_id
    assert (channel["state"], channel["close_reason"]) == ("closed", "invite_rejected")


async def test_more_opens_at_once_than_request_slots_to_invitees_on_the_same_connection_all_open(net: Net) -> None:
    # Each open waits for its invitee's ack, and the acks come over the same connection: an open
    # waiting for its ack must not hold a slot the ack needs (64 ops at once per connection).
    await net.ag2("human", name="bob", token=TOKEN.format("bob"), rule=NO_INBOX_CAP)
    await net.ag2("human", name="alice", token=TOKEN.format("alice"))
    states = await net.ag2("open_many", who="alice", type="conversation", targets=["bob"], count=300)
    assert states == ["active"] * 300
