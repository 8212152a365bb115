"""Inbox caps: INBOX_FULL when a recipient's pending envelopes reach its cap (docs/governance.md "Inbox caps")."""

from __future__ import annotations

from pathlib import Path

import pytest
from agentnet.v1 import hub_pb2

from hubsvc.governance.policy import InboxRule, PeerSelector, Policy, Rule, RuleEntry
from netkernel.errors import InboxFull
from tests.hub.harness import (
    EV_TEXT,
    Participant,
    RunningHub,
    assert_eventually,
    conversation,
    open_channel,
    register,
    running_hub,
)


def inbox_policy(name: str, max_pending: int) -> Policy:
    """A policy capping the inbox of ``name`` (rule id ``<name>-inbox``)."""
    entry = RuleEntry(
        id=f"{name}-inbox", match=PeerSelector(names=(name,)), rule=Rule(inbox=InboxRule(max_pending=max_pending))
    )
    return Policy(rules=(entry,))


async def settled(p: Participant) -> None:
    """Everything delivered to ``p`` so far was acked and the hub handled the acks."""
    await p.sync()


async def test_cap_refuses_and_frees_up_after_acks(hub: RunningHub) -> None:
    alice, bob, channel_id = await conversation(hub.target)
    try:
        await settled(bob)
        assert hub.core.inboxes.pending(bob.agent_id) == 0
        bob.auto_ack = False
        hub.core.governance.replace(inbox_policy("bob", 2))
        await alice.say(channel_id, "one")
        await alice.say(channel_id, "two")
        assert hub.core.inboxes.pending(bob.agent_id) == 2
        ch = hub.core.live_channel(channel_id)
        assert ch is not None
        before = ch.last_seq

        with pytest.raises(InboxFull) as refused:
            await alice.say(channel_id, "three")
        assert refused.value.metadata["recipient"] == bob.agent_id
        assert refused.value.metadata["rule"] == "bob-inbox"
        assert refused.value.metadata["limit"] == "2"
        assert ch.last_seq == before  # nothing written

        first = await bob.next_of(EV_TEXT)
        bob.ack(channel_id, first.seq)
        await settled(bob)
        assert hub.core.inboxes.pending(bob.agent_id) == 1
        await alice.say(channel_id, "three, now that bob caught up")
        # bob posting into the channel is never blocked by his own inbox.
        await bob.say(channel_id, "me too")
        # The hub's own envelopes are never refused: closing works with bob's inbox full,
        # and a channel that ended no longer holds his inbox.
        await hub.core.close_channel(alice.agent_id, channel_id, "done")
        assert hub.core.inboxes.pending(bob.agent_id) == 0
    finally:
        await alice.close()
        await bob.close()


async def test_audience_decides_who_is_a_recipient(hub: RunningHub) -> None:
    alice, bob, carol = [await register(hub.target, n) for n in ("alice", "bob", "carol")]
    for p in (alice, bob, carol):
        await p.connect()
    try:
        channel_id = await open_channel(alice, "discussion", [bob, carol])
        await settled(bob)
        bob.auto_ack = False
        hub.core.governance.replace(inbox_policy("bob", 1))
        await alice.post(channel_id, "myapp.note", {"n": 1}, audience=[bob.agent_id])
        # bob is full: a note for carol only still passes, a broadcast does not.
        await alice.post(channel_id, "myapp.note", {"n": 2}, audience=[carol.agent_id])
        with pytest.raises(InboxFull) as refused:
            await alice.post(channel_id, "myapp.note", {"n": 3})
        assert refused.value.metadata["recipient"] == bob.agent_id
    finally:
        for p in (alice, bob, carol):
            await p.close()


async def test_offline_recipient_and_restart(tmp_path: Path) -> None:
    db = tmp_path / "hub.db"
    async with running_hub(db) as hub:
        alice, bob, channel_id = await conversation(hub.target)
        await settled(bob)
        bob.auto_ack = False
        hub.core.governance.replace(inbox_policy("bob", 3))
        sent = [await alice.say(channel_id, f"m{i}") for i in range(3)]
        first = await bob.next_of(EV_TEXT)
        assert first.envelope_id == sent[0].envelope_id
        bob.ack(channel_id, first.seq)
        await settled(bob)
        await bob.disconnect()  # offline from here: what alice posts waits for him
        assert hub.core.inboxes.pending(bob.agent_id) == 2
        await alice.say(channel_id, "m3 while bob is away")
        with pytest.raises(InboxFull):
            await alice.say(channel_id, "m4")
        await alice.close()
        await bob.channel.close()

    async with running_hub(db) as hub:
        # Rebuilt from the stored cursor and the WAL: m1, m2, m3 still wait for bob.
        assert hub.core.inboxes.pending(bob.agent_id) == 3
        hub.core.governance.replace(inbox_policy("bob", 3))
        alice = Participant(hub.target, alice.record, alice.credential)
        bob = Participant(hub.target, bob.record, bob.credential)
        await alice.connect()
        with pytest.raises(InboxFull):
            await alice.say(channel_id, "m4")
        await bob.connect()  # auto-acks the replay
        await assert_eventually(lambda: hub.core.inboxes.pending(bob.agent_id) == 0)
        await alice.say(channel_id, "m4, bob is back")
        await alice.close()
        await bob.close()


async def test_seed_of_a_new_channel_is_refused_when_the_target_is_full(hub: RunningHub) -> None:
    alice, bob, channel_id = await conversation(hub.target)
    try:
        await settled(bob)
        bob.auto_ack = False
        hub.core.governance.replace(inbox_policy("bob", 1))
        await alice.say(channel_id, "fills bob's inbox")
        live = {c.channel_id for c in hub.core.channels.live()}
        with pytest.raises(InboxFull):
            await alice.rpc(
                "OpenChannel", hub_pb2.OpenChannelRequest(type="consulting", targets=[bob.name], message="hi")
            )
        assert {c.channel_id for c in hub.core.channels.live()} == live
        # Without a seed, the invite (a hub envelope) is never refused.
        await alice.rpc("OpenChannel", hub_pb2.OpenChannelRequest(type="consulting", targets=[bob.name]))
        assert hub.core.inboxes.pending(bob.agent_id) == 2
    finally:
        await alice.close()
        await bob.close()


async def test_invite_answers_pass_a_full_inbox(hub: RunningHub) -> None:
    alice, bob, channel_id = await conversation(hub.target)
    try:
        await settled(alice)
        alice.auto_ack = False
        hub.core.governance.replace(inbox_policy("alice", 1))
        await bob.say(channel_id, "fills alice's inbox")
        opened = await alice.rpc("OpenChannel", hub_pb2.OpenChannelRequest(type="conversation", targets=[bob.name]))
        second = opened.channel.channel_id
        await bob.next(lambda e: e.event_type == "ag2.channel.invite" and e.channel_id == second)
        await bob.post(second, "ag2.channel.invite_ack", {})  # visible to alice, and still admitted
        with pytest.raises(InboxFull):
            await bob.say(second, "but a message is not")
    finally:
        await alice.close()
        await bob.close()


async def test_a_hello_with_cursors_ahead_empties_the_inbox(hub: RunningHub) -> None:
    alice, bob, channel_id = await conversation(hub.target)
    try:
        await settled(bob)
        await bob.disconnect()
        last = [await alice.say(channel_id, f"m{i}") for i in range(2)][-1]
        assert hub.core.inboxes.pending(bob.agent_id) == 2
        # bob processed them elsewhere (e.g. read the WAL) and says so in his Hello.
        await bob.connect(cursors={channel_id: last.seq})
        assert hub.core.inboxes.pending(bob.agent_id) == 0
    finally:
        await alice.close()
        await bob.close()
