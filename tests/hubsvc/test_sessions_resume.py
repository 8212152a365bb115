"""One stream per identity (a newer Connect supersedes the older one: SUPERSEDED, not a retryable
UNAVAILABLE) and the pending turns a Welcome lists (docs/hub.md "One stream per identity",
"Pending turns")."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from agentnet.v1 import connect_pb2, hub_pb2
from grpc_status import rpc_status

from netkernel.errors import InvalidArgument, Superseded, error_from_rpc
from tests.hubsvc.harness import (
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
    from tests.hubsvc.harness import Participant

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


@pytest.mark.sqlite_only("the cap is the session layer's, not the store's; 2,002 posts are slow enough once")
async def test_more_than_1000_pending_turns_welcome_holds_the_cap_says_truncated_and_the_sdk_resumes_the_rest(
    hub: RunningHub,
) -> None:
    """1,001 consulting questions await bob: his Welcome lists exactly MAX_PENDING_TURNS (1,000) and
    says it is truncated; the SDK, resuming bob, pages ListPendingTurns for the rest and runs its
    handler on every one of the 1,001, once each."""
    from agentsdk import Agent, OpenAIConfig
    from agentsdk.network import EV_TEXT as SDK_TEXT
    from agentsdk.network import Envelope, HubClient
    from hubsvc.core.sessions import MAX_PENDING_TURNS

    count = MAX_PENDING_TURNS + 1
    alice = await register(hub.target, "alice")
    bob = await register(hub.target, "bob")
    bob.auto_accept_invites = True
    await alice.connect()
    await bob.connect()
    gate = asyncio.Semaphore(32)

    async def ask(i: int) -> tuple[str, str]:
        async with gate:
            request = hub_pb2.OpenChannelRequest(
                type="consulting", targets=[bob.agent_id], wait_until_opened=True, message=f"question {i}"
            )
            opened = await alice.rpc("OpenChannel", request)
            return opened.channel.channel_id, opened.seed_envelope_id

    asked = dict(await asyncio.gather(*(ask(i) for i in range(count))))
    questions = set(asked.values())
    assert len(questions) == count and "" not in questions

    async def all_acked() -> bool:  # bob read every question: none is replayed, each is only pending
        await bob.sync()
        cursors = await hub.core.store.load_cursors(bob.agent_id)
        return all(cursors.get(c, 0) >= hub.holder(c).core.live_channel(c).last_seq for c in asked)  # type: ignore[union-attr]

    await assert_eventually(all_acked, timeout=60)
    await bob.disconnect()

    welcome = await bob.connect()
    assert len(welcome.pending_turns) == MAX_PENDING_TURNS  # exactly the cap
    assert welcome.pending_turns_truncated
    assert {t.envelope_id for t in welcome.pending_turns} < questions
    assert all(welcome.cursors[c] >= t.seq for t in welcome.pending_turns for c in [t.channel_id])
    await bob.sync()
    await bob.disconnect()

    handled: list[str] = []

    async def record(env: Envelope) -> None:
        if env.event_type == SDK_TEXT:
            handled.append(env.envelope_id)  # no answer: the test only counts the turns run

    config = OpenAIConfig(model="unused", base_url="http://127.0.0.1:9/v1", api_key="unused")
    async with HubClient.connect(hub.target) as sdk:
        resumed = await sdk.resume_agent(Agent("bob", prompt="-", config=config), bob.credential, on_envelope=record)
        await assert_eventually(lambda: len(handled) >= count, timeout=60)
        assert sorted(handled) == sorted(questions)  # every one, once each
        await resumed.disconnect()
    await alice.close()
    await bob.close()
