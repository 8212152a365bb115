"""Channel lifecycle and the four adapters over real gRPC."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from agentnet.v1 import channel_pb2, hub_pb2

from agentsdk import errors
from agentsdk.operator import OperatorClient
from tests.hubsvc.harness import (
    Participant,
    RunningHub,
    collect,
    data_of,
    list_audit,
    open_channel,
    register,
    running_hub,
)


async def test_consulting_one_question_one_reply_then_closed(
    trio: tuple[Participant, Participant, Participant],
) -> None:
    alice, bob, _ = trio
    cid = await open_channel(alice, "consulting", [bob])
    with pytest.raises(errors.NotYourTurn):
        await bob.say(cid, "I answer before being asked")
    q = await alice.say(cid, "What is 2+2?")
    assert (await bob.next(lambda e: e.envelope_id == q.envelope_id)).seq == q.seq
    with pytest.raises(errors.NotYourTurn):
        await alice.say(cid, "a second question")
    await bob.say(cid, "4", causation_id=q.envelope_id)
    closed = await alice.next_of("ag2.channel.closed")
    assert data_of(closed)["reason"] == "consulting_complete"
    with pytest.raises(errors.ChannelClosed) as info:
        await bob.say(cid, "and another thing")
    assert f"channel '{cid}' is closed" in info.value.message
    assert isinstance(info.value, errors.ProtocolError)


async def test_open_lifecycle_pending_until_every_ack(trio: tuple[Participant, Participant, Participant]) -> None:
    alice, bob, carol = trio
    resp = await alice.rpc(
        "OpenChannel", hub_pb2.OpenChannelRequest(type="discussion", targets=[bob.name, carol.name], intent="plan")
    )
    cid = resp.channel.channel_id
    assert resp.channel.state == channel_pb2.CHANNEL_STATE_PENDING
    invite = await bob.next_of("ag2.channel.invite")
    assert data_of(invite)["intent"] == "plan" and list(invite.audience.agent_ids) == [bob.agent_id]
    with pytest.raises(errors.ProtocolError):
        await alice.say(cid, "too early")
    await bob.post(cid, "ag2.channel.invite_ack", {})
    desc = await alice.rpc("DescribeChannel", hub_pb2.DescribeChannelRequest(channel_id=cid))
    assert desc.channel.state == channel_pb2.CHANNEL_STATE_PENDING
    await carol.next_of("ag2.channel.invite")
    await carol.post(cid, "ag2.channel.invite_ack", {})
    opened = await alice.next_of("ag2.channel.opened")
    assert opened.channel_id == cid
    desc = await alice.rpc("DescribeChannel", hub_pb2.DescribeChannelRequest(channel_id=cid))
    assert desc.channel.state == channel_pb2.CHANNEL_STATE_OPENED
    assert list(desc.expected_next) == [alice.agent_id]


async def test_reject_closes_with_invite_rejected(trio: tuple[Participant, Participant, Participant]) -> None:
    alice, bob, _ = trio
    resp = await alice.rpc("OpenChannel", hub_pb2.OpenChannelRequest(type="conversation", targets=[bob.agent_id]))
    await bob.next_of("ag2.channel.invite")
    await bob.post(resp.channel.channel_id, "ag2.channel.invite_reject", {})
    closed = await alice.next_of("ag2.channel.closed")
    assert data_of(closed)["reason"] == "invite_rejected"


async def test_invite_timeout_closes_channel(trio: tuple[Participant, Participant, Participant]) -> None:
    alice, bob, _ = trio
    await alice.rpc(
        "OpenChannel",
        hub_pb2.OpenChannelRequest(type="conversation", targets=[bob.agent_id], invite_ack_timeout_seconds=0.3),
    )
    closed = await alice.next_of("ag2.channel.closed")
    assert data_of(closed)["reason"] == "invite_timeout"


async def test_ttl_expires_channel(trio: tuple[Participant, Participant, Participant]) -> None:
    alice, bob, _ = trio
    cid = await open_channel(alice, "conversation", [bob], ttl_seconds=0.5)
    expired = await bob.next_of("ag2.channel.expired")
    assert expired.channel_id == cid and data_of(expired)["reason"] == "ttl"
    desc = await alice.rpc("DescribeChannel", hub_pb2.DescribeChannelRequest(channel_id=cid))
    assert desc.channel.state == channel_pb2.CHANNEL_STATE_EXPIRED


async def test_a_ttl_end_writes_an_audit_row_of_kind_channel_expired(
    hub: RunningHub, trio: tuple[Participant, Participant, Participant]
) -> None:
    """A TTL end is audited as ``channel_expired`` (reason "ttl"), never as ``channel_closed``; a close
    is ``channel_closed`` (docs/hub.md)."""
    alice, bob, _ = trio
    expiring = await open_channel(alice, "conversation", [bob], ttl_seconds=0.5)
    await bob.next(lambda e: e.channel_id == expiring and e.event_type == "ag2.channel.closed")
    closing = await open_channel(alice, "conversation", [bob])
    await alice.rpc("CloseChannel", hub_pb2.CloseChannelRequest(channel_id=closing, reason="done"))
    await bob.next(lambda e: e.channel_id == closing and e.event_type == "ag2.channel.closed")

    async def ends(channel_id: str) -> list[tuple[str, str]]:
        records = await list_audit(hub, subject_id=channel_id, limit=100)
        return [(r.kind, json.loads(r.detail_json)["reason"]) for r in records if r.kind != "channel_created"]

    assert await ends(expiring) == [("channel_expired", "ttl")]
    assert await ends(closing) == [("channel_closed", "done")]
    assert [r.subject_id for r in await list_audit(hub, kind="channel_expired", limit=100)] == [expiring]


async def test_ttl_end_posts_closed_too(trio: tuple[Participant, Participant, Participant]) -> None:
    """A waiter on ag2.channel.closed sees a TTL end as well: closed follows expired, reason "ttl"."""
    alice, bob, _ = trio
    cid = await open_channel(alice, "conversation", [bob], ttl_seconds=0.5)
    closed = await alice.next_of("ag2.channel.closed")
    assert closed.channel_id == cid and data_of(closed)["reason"] == "ttl"
    read = await collect(alice.stub.ReadWal(hub_pb2.ReadWalRequest(channel_id=cid), metadata=alice.metadata))
    wal = [r.envelope for r in read]
    ends = [(w.event_type, data_of(w)["reason"]) for w in wal if w.sender_id == "hub" and "reason" in data_of(w)]
    assert ends == [("ag2.channel.expired", "ttl"), ("ag2.channel.closed", "ttl")]
    assert wal[-1].event_type == "ag2.channel.closed"
    desc = await alice.rpc("DescribeChannel", hub_pb2.DescribeChannelRequest(channel_id=cid))
    assert desc.channel.state == channel_pb2.CHANNEL_STATE_EXPIRED and desc.channel.close_reason == "ttl"


async def test_close_by_participant_and_seed_message(trio: tuple[Participant, Participant, Participant]) -> None:
    alice, bob, _ = trio
    bob.auto_accept_invites = True
    resp = await alice.rpc(
        "OpenChannel",
        hub_pb2.OpenChannelRequest(
            type="consulting", targets=[bob.name], message="seeded question", wait_until_opened=True
        ),
    )
    assert resp.channel.state == channel_pb2.CHANNEL_STATE_OPENED
    seeded = await bob.next_of("ag2.msg.text")
    assert data_of(seeded) == {"text": "seeded question"} and seeded.sender_id == alice.agent_id
    assert resp.seed_envelope_id == seeded.envelope_id
    closed = await bob.rpc("CloseChannel", hub_pb2.CloseChannelRequest(channel_id=resp.channel.channel_id))
    assert closed.channel.close_reason == "closed_by_agent"
    assert data_of(await alice.next_of("ag2.channel.closed"))["reason"] == "closed_by_agent"


async def test_seed_failure_closes_with_seed_failed(trio: tuple[Participant, Participant, Participant]) -> None:
    alice, bob, _ = trio
    bob.auto_accept_invites = True
    knobs = {
        "transitions": [{"condition": {"type": "always"}, "target": {"type": "round_robin"}}],
        "initial_speaker": bob.agent_id,
    }
    resp = await alice.rpc(
        "OpenChannel",
        hub_pb2.OpenChannelRequest(
            type="workflow",
            targets=[bob.name],
            knobs_json=json.dumps(knobs),
            message="not my turn",
            wait_until_opened=True,
        ),
    )
    assert resp.channel.state == channel_pb2.CHANNEL_STATE_CLOSED
    assert resp.channel.close_reason == "seed_failed"


async def test_conversation_anyone_any_time_and_discussion_round_robin(
    trio: tuple[Participant, Participant, Participant],
) -> None:
    alice, bob, carol = trio
    conv = await open_channel(alice, "conversation", [bob])
    await bob.say(conv, "hi first")
    await bob.say(conv, "hi again")
    await alice.say(conv, "hello")
    disc = await open_channel(alice, "discussion", [bob, carol], knobs={"max_turns": 4})
    with pytest.raises(errors.NotYourTurn) as info:
        await carol.say(disc, "me first")
    assert "alice" in info.value.message
    for speaker in (alice, bob, carol, alice):
        await speaker.say(disc, f"turn of {speaker.name}")
    closed = await carol.next(lambda e: e.event_type == "ag2.channel.closed" and e.channel_id == disc)
    assert data_of(closed)["reason"] == "max_turns"


async def test_workflow_packets_route_and_context_set(trio: tuple[Participant, Participant, Participant]) -> None:
    alice, bob, carol = trio
    knobs = {
        "transitions": [
            {"condition": {"type": "from_speaker", "speaker": "alice"}, "target": {"type": "agent", "agent": "bob"}},
            {"condition": {"type": "tool_called", "tool": "approve"}, "target": {"type": "terminate"}, "priority": -5},
            {"condition": {"type": "always"}, "target": {"type": "round_robin"}},
        ]
    }
    cid = await open_channel(alice, "workflow", [bob, carol], knobs=knobs)
    await alice.say(cid, "kick off")
    with pytest.raises(errors.NotYourTurn):
        await carol.post(cid, "ag2.packet", {"routing": {}, "context_updates": {}, "body": "x"})
    await carol.post(cid, "ag2.context.set", {"set": {"stage": "review"}, "delete": []})
    await bob.post(cid, "ag2.packet", {"routing": {"tool_called": None}, "context_updates": {}, "body": "draft"})
    state = await alice.rpc("DescribeChannel", hub_pb2.DescribeChannelRequest(channel_id=cid))
    assert json.loads(state.adapter_state_json)["context"] == {"stage": "review"}
    assert list(state.expected_next) == [carol.agent_id]
    await carol.post(cid, "ag2.packet", {"routing": {"tool_called": "approve"}, "context_updates": {}, "body": "ok"})
    closed = await alice.next(lambda e: e.event_type == "ag2.channel.closed" and e.channel_id == cid)
    assert data_of(closed)["reason"] == "after_work"


async def test_open_refusals(hub: RunningHub, trio: tuple[Participant, Participant, Participant]) -> None:
    alice, bob, carol = trio
    with pytest.raises(errors.InvalidArgument):
        await alice.rpc("OpenChannel", hub_pb2.OpenChannelRequest(type="consulting", targets=[bob.name, carol.name]))
    with pytest.raises(errors.InvalidArgument) as info:
        await alice.rpc("OpenChannel", hub_pb2.OpenChannelRequest(type="nonsense", targets=[bob.name]))
    assert "consulting" in info.value.message
    with pytest.raises(errors.NotFound):
        await alice.rpc("OpenChannel", hub_pb2.OpenChannelRequest(type="conversation", targets=["nobody"]))
    with pytest.raises(errors.InvalidArgument):
        await alice.rpc("OpenChannel", hub_pb2.OpenChannelRequest(type="conversation", targets=[alice.name]))
    with pytest.raises(errors.InvalidArgument):
        await alice.rpc(
            "OpenChannel", hub_pb2.OpenChannelRequest(type="conversation", targets=[bob.name], knobs_json="[1]")
        )
    listed = await alice.rpc("ListChannels", hub_pb2.ListChannelsRequest(include_ended=True))
    assert listed.channels == []


async def test_non_participant_cannot_post_or_read(trio: tuple[Participant, Participant, Participant]) -> None:
    alice, bob, carol = trio
    cid = await open_channel(alice, "conversation", [bob])
    with pytest.raises(errors.NotParticipant):
        await carol.say(cid, "let me in")
    with pytest.raises(errors.NotParticipant):
        await collect(carol.stub.ReadWal(hub_pb2.ReadWalRequest(channel_id=cid), metadata=carol.metadata))


async def test_read_wal_follow_streams_new_envelopes(trio: tuple[Participant, Participant, Participant]) -> None:
    alice, bob, _ = trio
    cid = await open_channel(alice, "conversation", [bob])
    await alice.say(cid, "one")
    seen: list[str] = []

    async def follow() -> None:
        async for item in bob.stub.ReadWal(hub_pb2.ReadWalRequest(channel_id=cid, follow=True), metadata=bob.metadata):
            seen.append(item.envelope.event_type)

    task = asyncio.create_task(follow())
    await alice.say(cid, "two")
    await alice.rpc("CloseChannel", hub_pb2.CloseChannelRequest(channel_id=cid))
    await asyncio.wait_for(task, 10)
    assert seen[-1] == "ag2.channel.closed" and seen.count("ag2.msg.text") == 2
    assert seen[0] == "ag2.channel.invite"


async def test_read_wal_follow_keeps_the_audience_on_its_live_path(
    trio: tuple[Participant, Participant, Participant],
) -> None:
    alice, bob, carol = trio
    disc = await open_channel(alice, "discussion", [bob, carol])
    seen: list[str] = []
    first = asyncio.Event()

    async def follow() -> None:
        request = hub_pb2.ReadWalRequest(channel_id=disc, follow=True)
        async for item in bob.stub.ReadWal(request, metadata=bob.metadata):
            if item.envelope.event_type == "ag2.msg.text":
                seen.append(data_of(item.envelope)["text"])
            first.set()

    task = asyncio.create_task(follow())
    # The backlog was read before its first item arrived: what is posted now takes the live path.
    await asyncio.wait_for(first.wait(), 10)
    await alice.say(disc, "for carol only", audience=[carol.agent_id])
    await bob.say(disc, "for everyone")  # the next turn
    await alice.rpc("CloseChannel", hub_pb2.CloseChannelRequest(channel_id=disc))
    await asyncio.wait_for(task, 10)
    assert seen == ["for everyone"]


async def test_register_rules(hub: RunningHub) -> None:
    await register(hub.target, "dup")
    with pytest.raises(errors.AlreadyExists):
        await register(hub.target, "dup")
    with pytest.raises(errors.InvalidArgument) as info:
        await register(hub.target, "person", kind=2)
    assert "RegisterHuman" in info.value.message
    with pytest.raises(errors.InvalidArgument):
        await register(hub.target, "bad name!")
    human = await register(hub.target, "person", human=True)
    assert human.record.passport.kind == 2


async def test_open_discussion_refuses_an_unknown_ordering(trio: tuple[Participant, Participant, Participant]) -> None:
    """OpenChannel answers INVALID_ARGUMENT naming the allowed orderings, and creates nothing."""
    alice, bob, carol = trio
    request = hub_pb2.OpenChannelRequest(
        type="discussion", targets=[bob.name, carol.name], knobs_json=json.dumps({"ordering": "free"})
    )
    with pytest.raises(errors.InvalidArgument) as info:
        await alice.rpc("OpenChannel", request)
    assert "'free'" in info.value.message and "'round_robin'" in info.value.message
    listed = await alice.rpc("ListChannels", hub_pb2.ListChannelsRequest(include_ended=True))
    assert not [c for c in listed.channels if c.type == "discussion"]
    ok = hub_pb2.OpenChannelRequest(
        type="discussion", targets=[bob.name, carol.name], knobs_json=json.dumps({"ordering": "round_robin"})
    )
    assert (await alice.rpc("OpenChannel", ok)).channel.state == channel_pb2.CHANNEL_STATE_PENDING


async def test_an_ended_channels_adapter_state_stays_readable(tmp_path: Path) -> None:
    """DescribeChannel (agent and operator) of a CLOSED or EXPIRED channel returns its final adapter state,
    also from a restarted hub (folded again from the stored WAL)."""
    db = tmp_path / "ended.db"
    async with running_hub(db) as hub:
        alice, bob = await register(hub.target, "alice"), await register(hub.target, "bob")
        for p in (alice, bob):
            await p.connect()
        closed = await open_channel(alice, "discussion", [bob], knobs={"max_turns": 2})
        await alice.say(closed, "one")
        await bob.next_of("ag2.msg.text")
        await bob.say(closed, "two")
        await alice.next_of("ag2.channel.closed")
        expired = await open_channel(alice, "conversation", [bob], ttl_seconds=0.5)
        await alice.say(expired, "hi")
        await alice.next(lambda e: e.channel_id == expired and e.event_type == "ag2.channel.closed")
        final = {"turns": 2, "expected_next_speaker": alice.agent_id, "ended": True, "end_reason": "max_turns"}
        for _ in range(2):  # computed at the close, then remembered
            desc = await alice.rpc("DescribeChannel", hub_pb2.DescribeChannelRequest(channel_id=closed))
            assert desc.channel.state == channel_pb2.CHANNEL_STATE_CLOSED
            assert json.loads(desc.adapter_state_json) == final and list(desc.expected_next) == []
        gone = await bob.rpc("DescribeChannel", hub_pb2.DescribeChannelRequest(channel_id=expired))
        assert gone.channel.state == channel_pb2.CHANNEL_STATE_EXPIRED
        expired_state = json.loads(gone.adapter_state_json)
        assert expired_state["turns"] == 1
        for p in (alice, bob):
            await p.close()
    async with running_hub(db) as restarted:
        alice2 = Participant(restarted.target, alice.record, alice.credential)
        desc = await alice2.rpc("DescribeChannel", hub_pb2.DescribeChannelRequest(channel_id=closed))
        assert json.loads(desc.adapter_state_json) == final
        gone = await alice2.rpc("DescribeChannel", hub_pb2.DescribeChannelRequest(channel_id=expired))
        assert json.loads(gone.adapter_state_json) == expired_state
        async with OperatorClient(restarted.target, restarted.operator_token) as operator:
            described = await operator.describe_channel(closed)
            assert not described.live and json.loads(described.adapter_state_json) == final
        await alice2.close()
