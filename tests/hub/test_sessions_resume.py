"""One stream per identity (a newer Connect supersedes the older one: SUPERSEDED, not a retryable
UNAVAILABLE) and the pending turns a Welcome lists (docs/hub.md "One stream per identity",
"Pending turns")."""

from __future__ import annotations

import grpc
import pytest
from agentnet.v1 import connect_pb2, hub_pb2
from grpc_status import rpc_status

from netkernel.errors import InvalidArgument, Superseded, error_from_rpc
from tests.hub.harness import (
    EV_TEXT,
    RunningHub,
    assert_eventually,
    conversation,
    open_channel,
    register,
)


def turns(welcome: connect_pb2.Welcome) -> list[tuple[str, int, str]]:
    return [(t.channel_id, t.seq, t.envelope_id) for t in welcome.pending_turns]


async def test_a_newer_stream_supersedes_the_older_one(hub: RunningHub) -> None:
    alice, bob, channel_id = await conversation(hub.target)
    try:
        first = bob.welcome
        assert first is not None
        second = type(bob)(hub.target, bob.record, bob.credential)  # the same identity, another process
        newer = await second.connect()
        await assert_eventually(lambda: bob.stream_error is not None)
        err = bob.stream_error
        assert err is not None and err.code() == grpc.StatusCode.FAILED_PRECONDITION
        error = error_from_rpc(err)
        assert isinstance(error, Superseded) and error.reason == "SUPERSEDED"
        assert error.metadata == {"cause": "replaced", "superseded_by": newer.session_id}
        assert "replaced by a newer Connect stream" in error.message and "Do not reconnect" in error.message
        status = rpc_status.from_call(err)
        assert status is not None and status.details  # the ErrorInfo travels in the trailers
        # The newer stream receives the deliveries.
        sent = await alice.say(channel_id, "to whoever holds bob now")
        got = await second.next_of(EV_TEXT)
        assert got.envelope_id == sent.envelope_id
        await second.close()
    finally:
        await alice.close()
        await bob.close()


async def test_welcome_lists_the_turns_the_channels_await(hub: RunningHub) -> None:
    alice = await register(hub.target, "alice")
    bob = await register(hub.target, "bob")
    carol = await register(hub.target, "carol")
    for p in (alice, bob, carol):
        await p.connect()
    try:
        consulting = await open_channel(alice, "consulting", [bob])
        chat = await open_channel(alice, "conversation", [bob])
        discussion = await open_channel(alice, "discussion", [bob, carol])
        question = await alice.say(consulting, "what is 2 + 2?")
        await alice.say(chat, "a conversation expects no one in particular")
        opening = await alice.say(discussion, "bob speaks next in the round")
        assert (await bob.next_of(EV_TEXT)).envelope_id in {question.envelope_id, opening.envelope_id}
        await bob.sync()
        await bob.disconnect()  # bob's acks reached the hub: nothing of this is replayed

        welcome = await bob.connect()
        assert welcome.cursors[consulting] >= question.seq
        assert sorted(turns(welcome)) == sorted(
            [(consulting, question.seq, question.envelope_id), (discussion, opening.seq, opening.envelope_id)]
        )
        assert not welcome.pending_turns_truncated
        assert turns(await carol_welcome(carol)) == []  # not carol's turn; alice spoke last herself
        assert turns(await carol_welcome(alice)) == []

        # Answered: no longer pending.
        await bob.say(discussion, "my turn, taken", causation_id=opening.envelope_id)
        await bob.disconnect()
        again = await bob.connect()
        assert turns(again) == [(consulting, question.seq, question.envelope_id)]
    finally:
        for p in (alice, bob, carol):
            await p.close()


async def carol_welcome(p: object) -> connect_pb2.Welcome:
    """Reconnect ``p`` (a harness participant) and return its Welcome."""
    from tests.hub.harness import Participant

    assert isinstance(p, Participant)
    await p.disconnect()
    return await p.connect()


async def test_a_pending_turn_above_the_cursor_is_also_replayed(hub: RunningHub) -> None:
    alice = await register(hub.target, "alice")
    bob = await register(hub.target, "bob")
    await alice.connect()
    await bob.connect()
    try:
        channel_id = await open_channel(alice, "consulting", [bob])
        await bob.sync()
        bob.auto_ack = False
        await bob.disconnect()
        question = await alice.say(channel_id, "still there?")
        welcome = await bob.connect()
        assert turns(welcome) == [(channel_id, question.seq, question.envelope_id)]
        assert welcome.cursors[channel_id] < question.seq  # so it comes as a replay too: answer it once
        replayed = await bob.next_of(EV_TEXT)
        assert replayed.envelope_id == question.envelope_id
    finally:
        await alice.close()
        await bob.close()


async def test_list_pending_turns_pages_by_channel(hub: RunningHub) -> None:
    alice = await register(hub.target, "alice")
    bob = await register(hub.target, "bob")
    await alice.connect()
    await bob.connect()
    try:
        channels = [await open_channel(alice, "consulting", [bob]) for _ in range(3)]
        asked = {c: await alice.say(c, f"question in {c}") for c in channels}
        first = await bob.rpc("ListPendingTurns", hub_pb2.ListPendingTurnsRequest(limit=2))
        assert len(first.turns) == 2 and first.next_page_token
        rest = await bob.rpc(
            "ListPendingTurns", hub_pb2.ListPendingTurnsRequest(limit=2, page_token=first.next_page_token)
        )
        assert len(rest.turns) == 1 and rest.next_page_token == ""
        listed = [(t.channel_id, t.seq, t.envelope_id) for t in [*first.turns, *rest.turns]]
        assert listed == sorted((c, e.seq, e.envelope_id) for c, e in asked.items())
        assert (await alice.rpc("ListPendingTurns", hub_pb2.ListPendingTurnsRequest())).turns == []
        with pytest.raises(InvalidArgument) as refused:
            await bob.rpc("ListPendingTurns", hub_pb2.ListPendingTurnsRequest(limit=1001))
        assert refused.value.metadata["field"] == "limit"
        with pytest.raises(InvalidArgument):
            await bob.rpc("ListPendingTurns", hub_pb2.ListPendingTurnsRequest(page_token="not-a-token"))
    finally:
        await alice.close()
        await bob.close()
