"""FindReply: whether a participant already answered an envelope, from the store's index (both stores)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from agentnet.v1 import envelope_pb2, hub_pb2

from agentsdk import errors
from hubsvc.storage.sqlite import SqliteHubStore
from tests.hubsvc.harness import Participant, RunningHub, conversation, data_of, open_channel, running_hub


async def find(who: Participant, channel_id: str, causation_id: str, sender: str = "") -> hub_pb2.FindReplyResponse:
    request = hub_pb2.FindReplyRequest(channel_id=channel_id, causation_id=causation_id, sender=sender)
    response: hub_pb2.FindReplyResponse = await who.rpc("FindReply", request)
    return response


async def answered_in_a_stopped_hub(
    db: Path,
) -> tuple[Participant, str, envelope_pb2.Envelope, envelope_pb2.Envelope]:
    """Run a hub on ``db`` in which bob answers alice's question, then stop it: (bob, the channel id,
    the question, bob's reply)."""
    async with running_hub(db) as hub:
        alice, bob, cid = await conversation(hub.target)
        question = await alice.say(cid, "question")
        reply = await bob.say(cid, "answer", causation_id=question.envelope_id)
        await alice.close()
        await bob.close()
    return bob, cid, question, reply


async def assert_found_after_restart(
    db: Path, bob: Participant, cid: str, question: envelope_pb2.Envelope, reply: envelope_pb2.Envelope
) -> None:
    """A hub started again on ``db`` finds bob's ``reply`` to ``question``."""
    async with running_hub(db) as hub:
        bob_again = Participant(hub.target, bob.record, bob.credential)
        found = await find(bob_again, cid, question.envelope_id)
        assert found.envelope.envelope_id == reply.envelope_id
        await bob_again.close()


async def test_find_reply_returns_the_first_reply_of_the_sender(
    trio: tuple[Participant, Participant, Participant],
) -> None:
    alice, bob, carol = trio
    cid = await open_channel(alice, "discussion", [bob, carol])
    question = await alice.say(cid, "question")
    assert not (await find(bob, cid, question.envelope_id)).HasField("envelope")  # not answered yet
    reply = await bob.say(cid, "first answer", causation_id=question.envelope_id)
    await carol.say(cid, "carol's answer", causation_id=question.envelope_id)
    await alice.say(cid, "unrelated")  # round robin: alice again
    await bob.say(cid, "second answer", causation_id=question.envelope_id)
    found = await find(bob, cid, question.envelope_id)
    assert found.envelope.envelope_id == reply.envelope_id and data_of(found.envelope) == {"text": "first answer"}
    # Someone else's reply, by name or id; the caller's own reply is none.
    assert (await find(alice, cid, question.envelope_id, "carol")).envelope.sender_id == carol.agent_id
    assert (await find(alice, cid, question.envelope_id, bob.agent_id)).envelope.envelope_id == reply.envelope_id
    assert not (await find(alice, cid, question.envelope_id)).HasField("envelope")


async def test_find_reply_hides_replies_addressed_to_others(
    trio: tuple[Participant, Participant, Participant],
) -> None:
    alice, bob, carol = trio
    cid = await open_channel(alice, "discussion", [bob, carol])
    question = await alice.say(cid, "question")
    await bob.say(cid, "just for alice", causation_id=question.envelope_id, audience=[alice.agent_id])
    assert (await find(alice, cid, question.envelope_id, "bob")).HasField("envelope")
    assert (await find(bob, cid, question.envelope_id)).HasField("envelope")  # a sender reads its own
    assert not (await find(carol, cid, question.envelope_id, "bob")).HasField("envelope")


async def test_find_reply_refusals(hub: RunningHub, trio: tuple[Participant, Participant, Participant]) -> None:
    alice, bob, carol = trio
    cid = await open_channel(alice, "conversation", [bob])
    question = await alice.say(cid, "question")
    with pytest.raises(errors.InvalidArgument, match="causation_id"):
        await find(bob, cid, "")
    with pytest.raises(errors.InvalidArgument, match="channel_id"):
        await find(bob, "", question.envelope_id)
    with pytest.raises(errors.NotParticipant):
        await find(carol, cid, question.envelope_id)
    with pytest.raises(errors.NotFound):
        await find(bob, "no-such-channel", question.envelope_id)
    with pytest.raises(errors.NotFound):
        await find(bob, cid, question.envelope_id, "nobody")


async def test_find_reply_survives_a_hub_restart(tmp_path: Path) -> None:
    db = tmp_path / "hub.db"
    bob, cid, question, reply = await answered_in_a_stopped_hub(db)
    await assert_found_after_restart(db, bob, cid, question, reply)


@pytest.mark.sqlite_only("an SQLite file written before the causation_id column")
async def test_an_older_sqlite_file_gets_its_replies_indexed(tmp_path: Path) -> None:
    db = tmp_path / "hub.db"
    bob, cid, question, reply = await answered_in_a_stopped_hub(db)
    # Make the file look as it did before FindReply: no causation_id column, no index.
    with sqlite3.connect(db) as conn:
        conn.execute("DROP INDEX wal_reply")
        conn.execute("ALTER TABLE wal DROP COLUMN causation_id")
    store = SqliteHubStore(db)
    await store.open()
    try:
        data = await store.find_reply(cid, bob.record.agent_id, question.envelope_id)
        assert data is not None and reply.envelope_id.encode() in data
    finally:
        await store.close()
    await assert_found_after_restart(db, bob, cid, question, reply)
