"""Envelope fields honoured on delivery, and resumable delivery with cursors."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc
import pytest
from agentnet.v1 import connect_pb2, envelope_pb2, hub_pb2, hub_pb2_grpc

from agentsdk import errors
from hubsvc.core.options import HubOptions
from tests.clock import FakeClock
from tests.hubsvc.harness import (
    Participant,
    RunningHub,
    assert_eventually,
    collect,
    conversation,
    data_of,
    make_envelope,
    open_channel,
    register,
    running_hub,
)


async def test_audience_filters_delivery_and_wal_reads(trio: tuple[Participant, Participant, Participant]) -> None:
    alice, bob, carol = trio
    cid = await open_channel(alice, "conversation", [bob])
    disc = await open_channel(alice, "discussion", [bob, carol])
    await alice.say(disc, "only for bob", audience=[bob.agent_id])
    await alice.post(disc, "myapp.note", {"n": 1})
    got = await bob.next(lambda e: e.channel_id == disc and e.event_type == "ag2.msg.text")
    assert data_of(got) == {"text": "only for bob"}
    custom = await carol.next(lambda e: e.channel_id == disc and e.event_type.startswith("myapp"))
    assert data_of(custom) == {"n": 1}  # custom types reach their audience unchanged
    assert all(e.event_type != "ag2.msg.text" for e in carol.drain())
    wal = await collect(carol.stub.ReadWal(hub_pb2.ReadWalRequest(channel_id=disc), metadata=carol.metadata))
    assert all(item.envelope.event_type != "ag2.msg.text" for item in wal)
    with pytest.raises(errors.InvalidArgument) as info:
        await alice.say(cid, "to a stranger", audience=[carol.agent_id])
    assert "non-participants" in info.value.message


async def test_custom_event_types_do_not_advance_turns(trio: tuple[Participant, Participant, Participant]) -> None:
    alice, bob, carol = trio
    disc = await open_channel(alice, "discussion", [bob, carol])
    await bob.post(disc, "myapp.review_request", {"doc": "d1"})
    desc = await alice.rpc("DescribeChannel", hub_pb2.DescribeChannelRequest(channel_id=disc))
    assert list(desc.expected_next) == [alice.agent_id]


async def test_spoofed_sender_refused_and_sender_stamped(trio: tuple[Participant, Participant, Participant]) -> None:
    alice, bob, _ = trio
    cid = await open_channel(alice, "conversation", [bob])
    with pytest.raises(errors.PermissionDenied) as info:
        await alice.say(cid, "I am bob", sender_id=bob.agent_id)
    assert "sender_id" in info.value.message
    wire = await alice.say(cid, "I am alice", sender_id=alice.agent_id)
    assert wire.sender_id == alice.agent_id
    plain = await alice.say(cid, "no sender given")
    assert plain.sender_id == alice.agent_id and plain.seq == wire.seq + 1


async def test_idempotency_key_returns_original(trio: tuple[Participant, Participant, Participant]) -> None:
    alice, bob, _ = trio
    cid = await open_channel(alice, "conversation", [bob])
    first = await alice.say(cid, "once", idempotency_key="k1")
    again = await alice.say(cid, "once", idempotency_key="k1")
    assert again.envelope_id == first.envelope_id and again.seq == first.seq
    unary = await alice.rpc(
        "PostEnvelope",
        hub_pb2.PostEnvelopeRequest(
            envelope=make_envelope(cid, "ag2.msg.text", {"text": "once"}, idempotency_key="k1")
        ),
    )
    assert unary.duplicate and unary.envelope.envelope_id == first.envelope_id
    texts = [e for e in await bob_texts(bob, cid) if e == "once"]
    assert texts == ["once"]


async def collect_wal(p: Participant, cid: str) -> list[envelope_pb2.Envelope]:
    """The channel's WAL as ``p`` may read it."""
    request = hub_pb2.ReadWalRequest(channel_id=cid)
    return [item.envelope for item in await collect(p.stub.ReadWal(request, metadata=p.metadata))]


async def bob_texts(p: Participant, cid: str) -> list[str]:
    wal = await collect(p.stub.ReadWal(hub_pb2.ReadWalRequest(channel_id=cid), metadata=p.metadata))
    return [data_of(i.envelope)["text"] for i in wal if i.envelope.event_type == "ag2.msg.text"]


async def test_idempotent_retry_after_a_restart_returns_the_original(tmp_path: Path) -> None:
    db = tmp_path / "hub.db"
    request = hub_pb2.PostEnvelopeRequest()
    async with running_hub(db) as hub:
        alice, bob, cid = await conversation(hub.target)
        request.envelope.CopyFrom(make_envelope(cid, "ag2.msg.text", {"text": "once"}, idempotency_key="k-restart"))
        first = await alice.rpc("PostEnvelope", request)
        assert not first.duplicate
        before = await collect(bob.stub.ReadWal(hub_pb2.ReadWalRequest(channel_id=cid), metadata=bob.metadata))
        await alice.close()
        await bob.close()
    async with running_hub(db) as hub:  # a new process's view: nothing of the old hub's memory survives
        alice2 = Participant(hub.target, alice.record, alice.credential)
        bob2 = Participant(hub.target, bob.record, bob.credential)
        again = await alice2.rpc("PostEnvelope", request)
        assert again.duplicate
        assert (again.envelope.envelope_id, again.envelope.seq) == (first.envelope.envelope_id, first.envelope.seq)
        after = await collect(bob2.stub.ReadWal(hub_pb2.ReadWalRequest(channel_id=cid), metadata=bob2.metadata))
        assert [i.envelope.envelope_id for i in after] == [i.envelope.envelope_id for i in before]  # no new row
        await alice2.close()
        await bob2.close()


async def test_priority_orders_a_backlog(conv: tuple[Participant, Participant, str]) -> None:
    alice, bob, cid = conv
    await bob.disconnect()
    for prio, text in ((2, "n1"), (1, "b1"), (3, "u1"), (2, "n2"), (3, "u2")):
        await alice.say(cid, text, priority=prio)
    bob.inbox = asyncio.Queue()
    await bob.connect(max_in_flight=1)
    got = [data_of(await bob.next_of("ag2.msg.text"))["text"] for _ in range(5)]
    assert got == ["u1", "u2", "n1", "n2", "b1"]


async def test_envelope_ttl_stops_stale_delivery(tmp_path: Path) -> None:
    clock = FakeClock()
    async with running_hub(tmp_path / "hub.db", clock=clock) as hub:
        alice, bob, cid = await conversation(hub.target)
        await bob.disconnect()
        await alice.say(cid, "stale soon", ttl_seconds=1)
        await alice.say(cid, "fresh")
        clock.offset += 1.2  # the first envelope's second passes while bob is away
        bob.inbox = asyncio.Queue()
        await bob.connect()
        got = data_of(await bob.next_of("ag2.msg.text"))
        assert got == {"text": "fresh"}
        assert len(bob.expired) == 1 and bob.expired[0].event_data_json == ""  # the slot, without its content
        assert bob.expired[0].sender_id == ""  # as envelope.proto and docs/hub.md say
        with pytest.raises(errors.InvalidArgument):
            await alice.say(cid, "bad ttl", ttl_seconds=-1)
        await alice.close()
        await bob.close()


async def test_causation_kept_and_depth_limit(tmp_path: object) -> None:
    from pathlib import Path

    async with running_hub(Path(str(tmp_path)) / "hub.db", HubOptions(max_depth=2)) as hub:
        alice, bob, cid = await conversation(hub.target)
        q = await alice.say(cid, "deep", depth=2)
        reply = await bob.say(cid, "reply", causation_id=q.envelope_id)
        assert reply.causation_id == q.envelope_id and reply.depth == 2  # reply path inherits depth
        with pytest.raises(errors.DepthExceeded):
            await alice.say(cid, "too deep", depth=3)
        await alice.close()
        await bob.close()


async def test_a_reply_in_another_channel_keeps_the_depth_of_what_it_answers(tmp_path: Path) -> None:
    # The seed's reply path: an envelope answering a delegated question carries its depth, also
    # when it is posted into another channel, so a chain cannot reset its depth by changing channel.
    async with running_hub(tmp_path / "hub.db", HubOptions(max_depth=1)) as hub:
        alice, bob, carol = [await register(hub.target, n) for n in ("alice", "bob", "carol")]
        for p in (alice, bob, carol):
            await p.connect()
        bob.auto_accept_invites = True
        side = await open_channel(bob, "conversation", [carol])
        delegating = asyncio.create_task(
            alice.rpc("Delegate", hub_pb2.DelegateRequest(target="bob", prompt="q?", timeout_seconds=10))
        )
        question = await bob.next(lambda e: e.event_type == "ag2.msg.text" and e.sender_id == alice.agent_id)
        assert question.depth == 1
        elsewhere = await bob.say(side, "asking carol about it", causation_id=question.envelope_id)
        assert elsewhere.depth == 1
        can = await carol.rpc("CanSend", hub_pb2.CanSendRequest(channel_id=side, causation_id=question.envelope_id))
        assert can.allowed  # depth 1 is within --max-depth 1
        with pytest.raises(errors.DepthExceeded):  # one more hop from there is over the limit
            await carol.rpc(
                "Delegate",
                hub_pb2.DelegateRequest(target="alice", prompt="deeper?", causation_id=elsewhere.envelope_id),
            )
        await bob.say(question.channel_id, "answer", causation_id=question.envelope_id)
        assert (await delegating).text == "answer"
        for p in (alice, bob, carol):
            await p.close()


async def test_reconnect_resumes_from_cursor_without_loss_or_repeat(conv: tuple[Participant, Participant, str]) -> None:
    alice, bob, cid = conv
    for i in range(5):
        await alice.say(cid, f"m{i}")
    first = [data_of(await bob.next_of("ag2.msg.text"))["text"] for _ in range(5)]
    await bob.sync()  # the acks sent so far reached the hub
    await bob.disconnect()
    for i in range(5, 10):
        await alice.say(cid, f"m{i}")
    bob.inbox = asyncio.Queue()
    welcome = await bob.connect()
    assert welcome.cursors[cid] >= 6
    second = [data_of(await bob.next_of("ag2.msg.text"))["text"] for _ in range(5)]
    assert first + second == [f"m{i}" for i in range(10)]
    marker = await alice.post(cid, "myapp.marker", {})  # delivered after any repeat would be
    assert [e for e in await bob.until(marker.envelope_id) if e.event_type == "ag2.msg.text"] == []


async def test_acked_cursors_are_stored_by_the_flush_loop(tmp_path: Path) -> None:
    """Acks move the stored cursor within the flush interval, while the stream stays open."""
    db = tmp_path / "hub.db"
    async with running_hub(db, HubOptions(cursor_flush_interval=0.02)) as hub:
        alice, bob, cid = await conversation(hub.target)

        async def stored(last: int) -> bool:
            """The store holds bob's cursor of the channel at ``last``."""
            return (await hub.core.store.load_cursors(bob.agent_id)).get(cid) == last

        for round_ in range(2):  # the second round checks a session is flushed again after its first flush
            said = [await alice.say(cid, f"m{round_}.{i}") for i in range(3)]
            for _ in said:
                await bob.next_of("ag2.msg.text")
            last = said[-1].seq
            await assert_eventually(lambda last=last: stored(last))
        await alice.close()
        await bob.close()


async def test_unacked_envelopes_are_redelivered(conv: tuple[Participant, Participant, str]) -> None:
    alice, bob, cid = conv
    bob.auto_ack = False
    await alice.say(cid, "not acked")
    got = await bob.next_of("ag2.msg.text")
    await bob.disconnect()
    bob.inbox = asyncio.Queue()
    await bob.connect()
    again = await bob.next_of("ag2.msg.text")
    assert again.envelope_id == got.envelope_id


async def test_client_cursor_in_hello_wins(conv: tuple[Participant, Participant, str]) -> None:
    alice, bob, cid = conv
    sent = [await alice.say(cid, f"m{i}") for i in range(3)]
    for _ in range(3):
        await bob.next_of("ag2.msg.text")
    await bob.disconnect()
    bob.inbox = asyncio.Queue()
    await bob.connect(cursors={cid: sent[0].seq})
    again = [data_of(await bob.next_of("ag2.msg.text"))["text"] for _ in range(2)]
    assert again == ["m1", "m2"]


async def test_hello_cursors_are_clamped_to_the_wal_and_remembered(conv: tuple[Participant, Participant, str]) -> None:
    alice, bob, cid = conv
    bob.auto_ack = False  # nothing reaches the hub's cursors through acks
    sent = [await alice.say(cid, f"m{i}") for i in range(3)]
    for _ in range(3):
        await bob.next_of("ag2.msg.text")
    await bob.disconnect()
    # A cursor beyond the WAL is clamped to the last seq, so later envelopes are not hidden.
    welcome = await bob.connect(cursors={cid: 10_000})
    assert welcome.cursors[cid] == sent[-1].seq
    await alice.say(cid, "m3")
    assert data_of(await bob.next_of("ag2.msg.text"))["text"] == "m3"
    await bob.disconnect()
    # The Hello cursor was stored like an ack: a client without cursors resumes after m2, not from 0.
    bob.inbox = asyncio.Queue()
    welcome = await bob.connect()
    assert welcome.cursors[cid] >= sent[-1].seq
    assert data_of(await bob.next_of("ag2.msg.text"))["text"] == "m3"


async def test_bad_credentials_and_hello(hub: RunningHub) -> None:
    alice = await register(hub.target, "alice")
    alice.credential = alice.agent_id + ".wrong"
    alice.metadata = (("authorization", f"Bearer {alice.credential}"),)
    with pytest.raises(errors.Unauthenticated):
        await alice.rpc("ListAgents", hub_pb2.ListAgentsRequest())
    with pytest.raises(errors.Unauthenticated):
        await alice.connect()
    alice.metadata = ()
    with pytest.raises(errors.Unauthenticated) as info:
        await alice.rpc("ListAgents", hub_pb2.ListAgentsRequest())
    assert "Bearer" in info.value.message
    await alice.close()


async def _connect_status(hub: RunningHub, first: Any, metadata: tuple[tuple[str, str], ...] = ()) -> Any:
    """The first response of a raw Connect stream opened with ``first`` (or the domain error it ends with)."""
    async with grpc.aio.insecure_channel(hub.target) as channel:
        call = hub_pb2_grpc.HubServiceStub(channel).Connect(iter([first]), metadata=metadata)
        try:
            async for response in call:
                return response
        except grpc.aio.AioRpcError as err:
            raise errors.error_from_rpc(err) from None
    return None


async def test_connect_authenticates_its_hello_under_the_error_boundary(hub: RunningHub) -> None:
    alice = await register(hub.target, "alice")
    with pytest.raises(errors.ProtocolError) as info:
        await _connect_status(hub, connect_pb2.ConnectRequest(ping=connect_pb2.Ping(nonce=1)))
    assert "Hello" in info.value.message
    with pytest.raises(errors.Unauthenticated) as unauth:
        await _connect_status(hub, connect_pb2.ConnectRequest(hello=connect_pb2.Hello()))
    assert "Hello.credential is empty" in unauth.value.message
    # Without Hello.credential, the bearer metadata authenticates the stream.
    welcome = await _connect_status(hub, connect_pb2.ConnectRequest(hello=connect_pb2.Hello()), alice.metadata)
    assert welcome.welcome.agent_id == alice.agent_id
    await alice.close()


async def test_malformed_envelopes_refused_cleanly(trio: tuple[Participant, Participant, Participant]) -> None:
    alice, bob, _ = trio
    cid = await open_channel(alice, "conversation", [bob])
    with pytest.raises(errors.InvalidArgument):
        await alice.post(cid, "")
    with pytest.raises(errors.NotFound):
        await alice.say("no-such-channel", "x")
    from agentnet.v1 import connect_pb2, envelope_pb2

    request_id = "raw"
    fut = asyncio.get_running_loop().create_future()
    alice.results[request_id] = fut
    bad = envelope_pb2.Envelope(channel_id=cid, event_type="ag2.msg.text", event_data_json="[1,2]")
    alice._outbox.put_nowait(connect_pb2.ConnectRequest(post=connect_pb2.Post(request_id=request_id, envelope=bad)))
    result = await asyncio.wait_for(fut, 5)
    assert result.error.reason == "INVALID_ARGUMENT" and "JSON object" in result.error.message
    ok = await alice.say(cid, "still fine")
    assert ok.seq > 0


async def test_prev_seq_chain_lets_clients_keep_exact_cursors(
    trio: tuple[Participant, Participant, Participant],
) -> None:
    alice, bob, carol = trio
    disc = await open_channel(alice, "discussion", [bob, carol])
    await alice.say(disc, "for carol only", audience=[carol.agent_id])
    await alice.post(disc, "myapp.ping", {}, priority=3)
    await alice.post(disc, "myapp.bg", {}, priority=1)
    await bob.say(disc, "bob's turn")
    last = await carol.say(disc, "for all")
    visible = {e.seq for e in await collect_wal(bob, disc) if e.sender_id != bob.agent_id}  # his own are not sent back
    assert max(visible) == last.seq and len(visible) < last.seq  # carol's invite and private text are hidden

    def bob_saw_everything_visible() -> bool:  # the priorities reorder arrivals: wait for the set
        return {seq for cid, _, seq in bob.chain if cid == disc} == visible

    await assert_eventually(bob_saw_everything_visible)
    # bob's chain skips what he may not see and covers every seq he saw, whatever the arrival order.
    links = {seq: prev for cid, prev, seq in bob.chain if cid == disc}
    cursor = 0
    while cursor in {prev for prev in links.values()}:
        cursor = next(seq for seq, prev in links.items() if prev == cursor)
    assert cursor == max(links)
    assert len(links) == len(set(links.values()))
    bob.drain()
    await bob.disconnect()
    await alice.say(disc, "while bob is away")  # alice's turn again
    bob.inbox = asyncio.Queue()
    welcome = await bob.connect(cursors={disc: cursor})
    assert welcome.cursors[disc] == cursor
    again = await bob.next(lambda e: e.channel_id == disc and e.event_type == "ag2.msg.text")
    assert data_of(again) == {"text": "while bob is away"}
    assert bob.chain[-1][1] == cursor  # the first replayed delivery chains onto the resume cursor
