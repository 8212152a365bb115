"""Failed and repeated writes on a real hub over a real SQLite file (issue #13, item 2).

* Idempotency is exact for as long as the WAL row exists, not only for the channel's
  last 4096 keys in memory.
* A store write that fails fails only its own caller: the other bundles of its group
  commit, the channel is rebuilt from the store, later bundles of that channel never
  commit with a seq gap (the fence), and no retry is told ``duplicate: true`` for an
  envelope that was never written.
* Memory never runs ahead of the store: registrations, channels and tasks change in
  memory only once their write committed.

Genuine store failures come from SQLite triggers the tests add to the hub's database
file (``RAISE(ABORT)`` for one chosen row), so nothing is mocked.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from agentnet.v1 import hub_pb2, identity_pb2, task_pb2

from agentsdk.errors import AlreadyExists, Unavailable
from netkernel.envelope import Envelope, text_envelope
from netkernel.errors import RateLimited
from tests.hubsvc.harness import (
    EV_TEXT,
    Participant,
    RunningHub,
    assert_eventually,
    make_envelope,
    open_channel,
    register,
    running_hub,
)
from tests.hubsvc.test_rate_limits import rate_policy

pytestmark = pytest.mark.sqlite_only("genuine write failures come from triggers added to the SQLite file")


def sql(db: Path, statement: str) -> None:
    """Run one statement on the hub's database file from a second connection (schema changes included)."""
    con = sqlite3.connect(db, timeout=10)
    try:
        con.execute(statement)
        con.commit()
    finally:
        con.close()


def fail_inserts(db: Path, name: str, table: str, when: str) -> None:
    """Make every insert into ``table`` matching ``when`` fail (a genuine SQLite error in the hub's writer)."""
    sql(db, f"CREATE TRIGGER {name} BEFORE INSERT ON {table} WHEN {when} BEGIN SELECT RAISE(ABORT, '{name}'); END")


def wal_seqs(db: Path, channel_id: str) -> list[int]:
    """The seqs the store holds for a channel, read from the database file."""
    con = sqlite3.connect(db, timeout=10)
    try:
        return [r[0] for r in con.execute("SELECT seq FROM wal WHERE channel_id = ? ORDER BY seq", [channel_id])]
    finally:
        con.close()


def contiguous(seqs: list[int]) -> bool:
    return seqs == list(range(1, len(seqs) + 1))


async def four_connected(hub: RunningHub) -> tuple[Participant, Participant, Participant, Participant]:
    """alice, bob, carol and dave, registered and connected."""
    people = [await register(hub.target, name) for name in ("alice", "bob", "carol", "dave")]
    for p in people:
        await p.connect()
    return people[0], people[1], people[2], people[3]


async def post_keyed(p: Participant, channel_id: str, text: str, key: str) -> hub_pb2.PostEnvelopeResponse:
    env = make_envelope(channel_id, EV_TEXT, {"text": text}, idempotency_key=key)
    return await p.rpc("PostEnvelope", hub_pb2.PostEnvelopeRequest(envelope=env))


async def test_a_stale_idempotent_retry_is_exact_and_breaks_no_other_write(tmp_path: Path) -> None:
    """The issue's scenario: a retry of a key older than the last 4096, racing other agents' writes."""
    db = tmp_path / "hub.db"
    async with running_hub(db) as hub:
        alice, bob, carol, dave = await four_connected(hub)
        busy = await open_channel(alice, "conversation", [bob])
        other = await open_channel(carol, "conversation", [dave])
        first = await alice.post(busy, EV_TEXT, {"text": "k0"}, idempotency_key="k0")
        await asyncio.gather(
            *(alice.post(busy, EV_TEXT, {"text": f"k{i}"}, idempotency_key=f"k{i}") for i in range(1, 4200))
        )
        window = hub.holder(busy).core.live_channel(busy).idempotent
        assert (alice.agent_id, "k0") not in window  # "k0" is out of the memory window

        retry, others, late_register = await asyncio.gather(
            post_keyed(alice, busy, "k0", "k0"),
            asyncio.gather(*(carol.say(other, f"c{i}") for i in range(20))),
            register(hub.target, "erin"),
        )
        assert retry.duplicate and retry.envelope.envelope_id == first.envelope_id
        assert retry.envelope.seq == first.seq
        assert len(others) == 20 and late_register.agent_id
        assert contiguous(wal_seqs(db, busy)) and contiguous(wal_seqs(db, other))
        after = await alice.say(busy, "next")
        assert after.seq == (wal_seqs(db, busy))[-1]
        for p in (alice, bob, carol, dave):
            await p.close()

    async with running_hub(db) as hub:  # a restart: the same answers, from the store alone
        assert "erin" in {e.name for e in hub.core.registry.entries()}
        alice = Participant(hub.target, alice.record, alice.credential)
        again = await post_keyed(alice, busy, "k0", "k0")
        assert again.duplicate and again.envelope.envelope_id == first.envelope_id
        fresh = await post_keyed(alice, busy, "new", "k-new")
        assert not fresh.duplicate and contiguous(wal_seqs(db, busy))
        await alice.close()


async def test_a_failing_write_fails_alone_and_the_channel_never_gets_a_gap(hub: RunningHub) -> None:
    """One bundle fails in a shared group: only its caller sees it; later bundles of its channel are fenced."""
    alice, bob, carol, dave = await four_connected(hub)
    db = hub.db
    doomed = await open_channel(alice, "conversation", [bob])
    other = await open_channel(carol, "conversation", [dave])
    before = wal_seqs(db, doomed)
    fail_inserts(hub.db, "boom", "wal", "NEW.text = 'boom'")

    core = hub.core

    def text(channel_id: str, sender: str, body: str, key: str | None = None) -> Envelope:
        env = text_envelope(channel_id, sender, body)
        env.idempotency_key = key
        return env

    # Admitted back to back without yielding, so the store takes them as one group.
    boom = await core.admit(alice.agent_id, text(doomed, alice.agent_id, "boom", "kb"))
    retry = await core.admit(alice.agent_id, text(doomed, alice.agent_id, "boom", "kb"))
    behind = await core.admit(bob.agent_id, text(doomed, bob.agent_id, "behind"))
    bystander = await core.admit(carol.agent_id, text(other, carol.agent_id, "unrelated"))
    registering = asyncio.ensure_future(
        core.register(identity_pb2.Passport(name="frank"), identity_pb2.Resume(), None, None, human=False)
    )
    assert retry[2] and retry[1].envelope_id == boom[1].envelope_id  # a retry of the in-flight post...
    results = await asyncio.gather(boom[0], retry[0], behind[0], bystander[0], registering, return_exceptions=True)
    assert isinstance(results[0], Unavailable)
    assert isinstance(results[1], Unavailable)  # ...shares its failure: never "duplicate" of an unwritten post
    assert isinstance(results[2], Unavailable)  # fenced: it would have left a gap at the failed seq
    assert results[3] is None and not isinstance(results[4], BaseException)
    assert "frank" in {e.name for e in core.registry.entries()}

    async def rebuilt() -> bool:
        ch = core.live_channel(doomed)
        return ch is not None and not ch.stale and ch.last_seq == before[-1]

    await assert_eventually(rebuilt)
    sql(hub.db, "DROP TRIGGER boom")
    written = await alice.say(doomed, "boom")
    assert written.seq == before[-1] + 1 and contiguous(wal_seqs(db, doomed))
    resent = await post_keyed(alice, doomed, "boom", "kb")  # the failed key was never used
    assert not resent.duplicate and resent.envelope.seq == written.seq + 1
    assert contiguous(wal_seqs(db, other))
    for p in (alice, bob, carol, dave):
        await p.close()


async def test_a_failed_registration_leaves_the_name_free(hub: RunningHub) -> None:
    fail_inserts(hub.db, "no_doomed", "agents", "NEW.name = 'doomed'")
    with pytest.raises(Unavailable):
        await register(hub.target, "doomed")
    assert "doomed" not in {e.name for e in hub.core.registry.entries()}
    sql(hub.db, "DROP TRIGGER no_doomed")
    doomed = await register(hub.target, "doomed")
    with pytest.raises(AlreadyExists):
        await register(hub.target, "doomed")
    await doomed.close()


async def test_a_channel_whose_creation_fails_is_not_left_in_memory(hub: RunningHub) -> None:
    alice = await register(hub.target, "alice")
    bob = await register(hub.target, "bob")
    await bob.connect()
    fail_inserts(hub.db, "no_channels", "channels", "1")
    with pytest.raises(Unavailable):
        await alice.rpc("OpenChannel", hub_pb2.OpenChannelRequest(type="conversation", targets=["bob"]))
    await assert_eventually(lambda: not list(hub.live_channels()))
    listed = await bob.rpc("ListChannels", hub_pb2.ListChannelsRequest(include_ended=True))
    assert not listed.channels and bob.drain() == []
    await alice.close()
    await bob.close()


async def test_a_failed_task_report_changes_nothing(hub: RunningHub) -> None:
    alice = await register(hub.target, "alice")
    started = await alice.rpc("ReportTask", hub_pb2.ReportTaskRequest(kind=task_pb2.TASK_EVENT_KIND_STARTED, title="t"))
    task_id = started.task.task_id
    fail_inserts(hub.db, "no_end", "tasks", "NEW.terminal = 1")
    with pytest.raises(Unavailable):
        await alice.rpc(
            "ReportTask", hub_pb2.ReportTaskRequest(task_id=task_id, kind=task_pb2.TASK_EVENT_KIND_COMPLETED)
        )
    task = (await alice.rpc("GetTask", hub_pb2.GetTaskRequest(task_id=task_id))).task
    assert task.state == task_pb2.TASK_STATE_RUNNING
    await alice.close()


async def test_a_post_whose_write_failed_gets_its_rate_token_back(hub: RunningHub) -> None:
    """UNAVAILABLE with nothing written takes no token: the client's retry with the same key pays the one."""
    alice, bob = await register(hub.target, "alice"), await register(hub.target, "bob")
    for p in (alice, bob):
        await p.connect()
    channel_id = await open_channel(alice, "conversation", [bob])
    hub.set_policy(rate_policy("alice", per_second=0.001, burst=3))
    fail_inserts(hub.db, "boom", "wal", "NEW.text = 'boom'")
    for _ in range(4):  # more failed writes than alice has tokens: each is UNAVAILABLE, never RATE_LIMITED
        with pytest.raises(Unavailable) as failed:
            await post_keyed(alice, channel_id, "boom", "kb")
        assert failed.value.metadata["cause"] == "store_write_failed"
    sql(hub.db, "DROP TRIGGER boom")
    assert not (await post_keyed(alice, channel_id, "boom", "kb")).duplicate  # the retry is stored: one token
    await alice.say(channel_id, "two")
    await alice.say(channel_id, "three")
    with pytest.raises(RateLimited):
        await alice.say(channel_id, "four")
    for p in (alice, bob):
        await p.close()


async def test_inbox_counts_after_a_failed_write_and_a_rebuild_are_not_doubled(hub: RunningHub) -> None:
    """The rebuild after a failed write recounts the channel's inboxes from its WAL *instead of* what
    was counted (reset first): counted twice, a recipient would be refused with INBOX_FULL early."""
    from hubsvc.governance.policy import InboxRule, PeerSelector, Policy, Rule, RuleEntry
    from netkernel.errors import InboxFull

    alice, bob, carol, dave = await four_connected(hub)
    core = hub.core
    channel_id = await open_channel(alice, "conversation", [bob])
    cap = RuleEntry(id="bob-inbox", match=PeerSelector(names=("bob",)), rule=Rule(inbox=InboxRule(max_pending=3)))
    core.governance.replace(Policy(rules=(cap,)))
    await alice.say(channel_id, "one")
    await alice.say(channel_id, "two")
    assert core.inboxes.pending(bob.agent_id) == 2
    fail_inserts(hub.db, "inbox_boom", "wal", "NEW.text = 'boom'")
    with pytest.raises(Unavailable):
        await alice.say(channel_id, "boom")

    async def rebuilt() -> bool:
        ch = core.live_channel(channel_id)
        return ch is not None and not ch.stale and ch.last_seq == wal_seqs(hub.db, channel_id)[-1]

    await assert_eventually(rebuilt)
    sql(hub.db, "DROP TRIGGER inbox_boom")
    assert core.inboxes.pending(bob.agent_id) == 2  # one and two, once each
    await alice.say(channel_id, "three")  # within the cap of 3
    with pytest.raises(InboxFull):
        await alice.say(channel_id, "four")  # now the cap is reached
    for p in (alice, bob, carol, dave):
        await p.close()
