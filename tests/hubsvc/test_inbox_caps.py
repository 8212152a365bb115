"""Inbox caps: INBOX_FULL when what waits for a recipient's answer reaches its cap (docs/governance.md
"Inbox caps"): the messages of its live channels posted since its last answer there; protocol envelopes
never count, acknowledging a delivery does not answer it."""

from __future__ import annotations

from pathlib import Path

import pytest
from agentnet.v1 import hub_pb2

from hubsvc.governance.inbox_share import PUBLISH_SECONDS, REFRESH_SECONDS
from hubsvc.governance.policy import InboxRule, PeerSelector, Policy, Rule, RuleEntry
from netkernel.errors import InboxFull
from tests.eventually import assert_eventually
from tests.hubsvc import harness
from tests.hubsvc.harness import (
    Participant,
    RunningHub,
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


def pending(hub: RunningHub, p: Participant) -> int:
    """What waits for ``p``, over every replica (each holder counts its own channels)."""
    return sum(core.inboxes.pending(p.agent_id) for core in hub.cores)


async def test_cap_refuses_until_the_recipient_answers(hub: RunningHub) -> None:
    alice, bob, channel_id = await conversation(hub.target)
    try:
        await settled(bob)
        assert pending(hub, bob) == 0  # the invite and the opening are protocol: they never count
        hub.set_policy(inbox_policy("bob", 2))
        await alice.say(channel_id, "one")
        await alice.say(channel_id, "two")
        await settled(bob)
        assert pending(hub, bob) == 2  # bob acked both: read is not answered
        ch = hub.holder(channel_id).core.live_channel(channel_id)
        assert ch is not None
        before = ch.last_seq

        with pytest.raises(InboxFull) as refused:
            await alice.say(channel_id, "three")
        assert refused.value.metadata["recipient"] == bob.agent_id
        assert refused.value.metadata["rule"] == "bob-inbox"
        assert refused.value.metadata["limit"] == "2"
        assert "wait for its answer" in refused.value.message
        assert ch.last_seq == before  # nothing written

        # A custom event from bob is not an answer; bob posting is never blocked by his own inbox.
        await bob.post(channel_id, "myapp.typing", {})
        assert pending(hub, bob) == 2
        await bob.say(channel_id, "one and two, answered")
        assert pending(hub, bob) == 0
        assert pending(hub, alice) == 2  # bob's note and his answer wait for alice's
        await alice.say(channel_id, "three, now that bob answered")
        assert (pending(hub, alice), pending(hub, bob)) == (0, 1)
        # The hub's own envelopes are never refused: closing works with bob's inbox full,
        # and a channel that ended no longer holds his inbox.
        await alice.say(channel_id, "four")
        await hub.holder(channel_id).core.close_channel(alice.agent_id, channel_id, "done")
        assert pending(hub, bob) == 0
    finally:
        await alice.close()
        await bob.close()


async def test_audience_and_event_type_decide_what_counts(hub: RunningHub) -> None:
    alice, bob, carol = [await register(hub.target, n) for n in ("alice", "bob", "carol")]
    for p in (alice, bob, carol):
        await p.connect()
    try:
        channel_id = await open_channel(alice, "discussion", [bob, carol])
        await settled(bob)
        hub.set_policy(inbox_policy("bob", 1))
        await alice.post(channel_id, "myapp.note", {"n": 1}, audience=[bob.agent_id])  # custom types count
        # bob is full: a note for carol only still passes, a broadcast does not.
        await alice.post(channel_id, "myapp.note", {"n": 2}, audience=[carol.agent_id])
        with pytest.raises(InboxFull) as refused:
            await alice.post(channel_id, "myapp.note", {"n": 3})
        assert refused.value.metadata["recipient"] == bob.agent_id
        # Protocol envelopes neither count nor are refused: a context change passes a full inbox.
        await alice.post(channel_id, "ag2.context.set", {"set": {"k": 1}})
        assert pending(hub, bob) == 1
    finally:
        for p in (alice, bob, carol):
            await p.close()


async def test_offline_recipient_and_restart(tmp_path: Path) -> None:
    db = tmp_path / "hub.db"
    async with running_hub(db) as hub:
        alice, bob, channel_id = await conversation(hub.target)
        await settled(bob)
        hub.set_policy(inbox_policy("bob", 3))
        await alice.say(channel_id, "m0")
        await bob.say(channel_id, "answering m0")
        sent = [await alice.say(channel_id, f"m{i}") for i in range(1, 3)]
        await bob.until(sent[-1].envelope_id)
        await settled(bob)
        await bob.disconnect()  # offline from here: what alice posts waits for him
        assert pending(hub, bob) == 2
        await alice.say(channel_id, "m3 while bob is away")
        with pytest.raises(InboxFull):
            await alice.say(channel_id, "m4")
        await alice.close()
        await bob.channel.close()

    async with running_hub(db) as hub:
        # Rebuilt from the WAL alone: m1, m2, m3 still wait for bob's answer (acks do not matter).
        assert pending(hub, bob) == 3
        hub.set_policy(inbox_policy("bob", 3))
        alice = Participant(hub.target, alice.record, alice.credential)
        bob = Participant(hub.target, bob.record, bob.credential)
        await alice.connect()
        with pytest.raises(InboxFull):
            await alice.say(channel_id, "m4")
        await bob.connect()  # auto-acks the replay: still unanswered
        await settled(bob)
        assert pending(hub, bob) == 3
        await bob.say(channel_id, "back, and answering")
        assert pending(hub, bob) == 0
        await alice.say(channel_id, "m4, bob is back")
        await alice.close()
        await bob.close()


async def test_seed_of_a_new_channel_is_refused_when_the_target_is_full(hub: RunningHub) -> None:
    alice, bob, channel_id = await conversation(hub.target)
    try:
        await settled(bob)
        hub.set_policy(inbox_policy("bob", 1))
        await alice.say(channel_id, "fills bob's inbox")
        live = {c.channel_id for c in hub.live_channels()}
        with pytest.raises(InboxFull):
            await alice.rpc(
                "OpenChannel", hub_pb2.OpenChannelRequest(type="consulting", targets=[bob.name], message="hi")
            )
        assert {c.channel_id for c in hub.live_channels()} == live
        # Without a seed, the invite (a hub envelope) is never refused, and does not count.
        await alice.rpc("OpenChannel", hub_pb2.OpenChannelRequest(type="consulting", targets=[bob.name]))
        assert pending(hub, bob) == 1
    finally:
        await alice.close()
        await bob.close()


async def test_invite_answers_pass_a_full_inbox(hub: RunningHub) -> None:
    alice, bob, channel_id = await conversation(hub.target)
    try:
        await settled(alice)
        hub.set_policy(inbox_policy("alice", 1))
        await bob.say(channel_id, "fills alice's inbox")
        opened = await alice.rpc("OpenChannel", hub_pb2.OpenChannelRequest(type="conversation", targets=[bob.name]))
        second = opened.channel.channel_id
        await bob.next(lambda e: e.event_type == "ag2.channel.invite" and e.channel_id == second)
        await bob.post(second, "ag2.channel.invite_ack", {})  # visible to alice, and still admitted
        assert pending(hub, alice) == 1
        with pytest.raises(InboxFull):
            await bob.say(second, "but a message is not")
        # alice answering in the first channel frees her inbox for the second.
        await alice.say(channel_id, "answered")
        await bob.say(second, "now it passes")
    finally:
        await alice.close()
        await bob.close()


async def test_a_hello_with_cursors_ahead_does_not_answer(hub: RunningHub) -> None:
    alice, bob, channel_id = await conversation(hub.target)
    try:
        await settled(bob)
        await bob.disconnect()
        last = [await alice.say(channel_id, f"m{i}") for i in range(2)][-1]
        assert pending(hub, bob) == 2
        # bob read them elsewhere (e.g. the WAL) and says so in his Hello: read, still unanswered.
        await bob.connect(cursors={channel_id: last.seq})
        assert pending(hub, bob) == 2
        await bob.say(channel_id, "answered")
        assert pending(hub, bob) == 0
    finally:
        await alice.close()
        await bob.close()


async def test_the_cap_counts_what_waits_on_every_replica(hub: RunningHub) -> None:
    """bob waits on two channels; on the divided store kinds they are held by two replicas (each held
    where its opener talks), and the cap counts both, within the documented refresh window."""
    alice, bob, carol = [await register(hub.target, name) for name in ("alice", "bob", "carol")]
    for p in (alice, bob, carol):
        await p.connect()
    try:
        hub.set_policy(inbox_policy("bob", 2))
        with_alice = await open_channel(alice, "conversation", [bob])
        with_carol = await open_channel(carol, "conversation", [bob])
        apart = harness.STORE.spread  # the openers talk to different replicas: so are the channels held
        if apart:
            assert hub.holder(with_alice) is not hub.holder(with_carol)
        await alice.say(with_alice, "one")
        await carol.say(with_carol, "two")
        assert pending(hub, bob) == 2
        if apart:  # carol's holder publishes bob's count; alice's holder reads it once its copy is stale
            shared = hub.holder(with_alice).core.shared_inboxes
            assert shared is not None

            async def read_elsewhere() -> bool:
                await shared.refresh([bob.agent_id])  # what admission does before each post
                return hub.holder(with_alice).core.inboxes.elsewhere.get(bob.agent_id) == 1

            await assert_eventually(read_elsewhere, timeout=PUBLISH_SECONDS + REFRESH_SECONDS + 5)
        with pytest.raises(InboxFull) as refused:
            await alice.say(with_alice, "three")
        assert refused.value.metadata["limit"] == "2"
        assert "2 envelopes wait" in refused.value.message
        await bob.say(with_carol, "two, answered")  # frees a place: on carol's holder
        await assert_eventually(lambda: alice.say(with_alice, "three, now"))
        assert pending(hub, bob) == 2
    finally:
        for p in (alice, bob, carol):
            await p.close()
