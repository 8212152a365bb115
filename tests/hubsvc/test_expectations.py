"""Channel expectations fire on a real hub: once per clock, with the action they name, durably.

The hub runs with an injected clock (tests/clock.py): a test moves it past a deadline and
calls ``core.expectations.fire_due()``, which fires what is due and returns once every
firing is committed — no sleeps.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agentnet.v1 import a2a_pb2, envelope_pb2, hub_pb2

from hubsvc.governance.expectations import DEFAULT_EXPECTATIONS, resolve_expectations
from hubsvc.governance.policy import ExpectationSpec, Policy, load_policy
from netkernel.errors import InvalidArgument
from tests.clock import FakeClock
from tests.event_table import event_table
from tests.hubsvc.harness import (
    Participant,
    RunningHub,
    assert_eventually,
    collect,
    data_of,
    list_audit,
    open_channel,
    register,
    running_hub,
)
from tests.procs import ROOT

VIOLATED = "ag2.channel.expectation_violated"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def hub(tmp_path: Path, clock: FakeClock) -> AsyncIterator[RunningHub]:
    async with running_hub(tmp_path / "hub.db", clock=clock) as h:
        yield h


@pytest.fixture
async def people(hub: RunningHub) -> AsyncIterator[list[Participant]]:
    """alice, bob and carol, registered and connected."""
    out = [await register(hub.target, n) for n in ("alice", "bob", "carol")]
    for p in out:
        await p.connect()
    yield out
    for p in out:
        await p.close()


def set_policy(hub: RunningHub, expectations: dict[str, Any]) -> None:
    hub.set_policy(Policy.model_validate({"expectations": expectations}))


async def wal(p: Participant, channel_id: str) -> list[envelope_pb2.Envelope]:
    """What ``p`` may read of the channel's WAL."""
    read = p.stub.ReadWal(hub_pb2.ReadWalRequest(channel_id=channel_id), metadata=p.metadata)
    return [r.envelope for r in await collect(read)]


async def violations(p: Participant, channel_id: str) -> list[dict[str, Any]]:
    return [data_of(e) for e in await wal(p, channel_id) if e.event_type == VIOLATED]


async def fire_due(hub: RunningHub) -> None:
    """Fire what is due on every replica (each fires the channels it holds)."""
    for core in hub.cores:
        await core.expectations.fire_due()


async def advance(hub: RunningHub, clock: FakeClock, seconds: float) -> None:
    clock.offset += seconds
    await fire_due(hub)


async def audit_rows(hub: RunningHub, channel_id: str, count: int) -> list[hub_pb2.AuditRecord]:
    """The channel's expectation audit rows once there are ``count`` (audit commits with the next group)."""

    async def rows() -> list[hub_pb2.AuditRecord]:
        found = await list_audit(hub, kind="expectation_violated", subject_id=channel_id)
        assert len(found) == count, found
        return found

    result: list[hub_pb2.AuditRecord] = await assert_eventually(rows)
    return result


async def test_turn_within_notifies_the_channel_once_naming_the_due_speaker(
    hub: RunningHub, clock: FakeClock, people: list[Participant]
) -> None:
    alice, bob, carol = people
    set_policy(hub, {"discussion": {"turn_within": {"seconds": 60}}})
    cid = await open_channel(alice, "discussion", [bob, carol])
    await alice.say(cid, "first")  # bob is due now
    await advance(hub, clock, 59)
    assert await violations(alice, cid) == []
    await advance(hub, clock, 2)
    for p in people:
        env = await p.next_of(VIOLATED)
        assert env.sender_id == "hub" and not env.HasField("audience")
    (data,) = await violations(carol, cid)
    assert data["expectation"] == "turn_within" and data["action"] == "notify_channel"
    assert data["expected_of"] == [bob.agent_id] and data["seconds"] == 60
    assert "bob" in data["expected"] and "take the turn within 60s" in data["expected"]
    assert data["deadline"] > data["since"]
    await advance(hub, clock, 3600)  # still stalled: the same clock never fires again
    assert len(await violations(carol, cid)) == 1
    (row,) = await audit_rows(hub, cid, 1)
    assert row.actor_id == bob.agent_id
    assert json.loads(row.detail_json)["expectation"] == "turn_within"
    await bob.say(cid, "second")  # carol is due: a new clock
    await advance(hub, clock, 61)
    assert [d["expected_of"] for d in await violations(alice, cid)] == [[bob.agent_id], [carol.agent_id]]


async def test_no_firing_when_the_expected_thing_happens_in_time(
    hub: RunningHub, clock: FakeClock, people: list[Participant]
) -> None:
    alice, bob, carol = people
    set_policy(hub, {"*": {"turn_within": {"seconds": 60}, "max_silence": {"seconds": 100}}})
    cid = await open_channel(alice, "discussion", [bob, carol])
    for p in people:
        await advance(hub, clock, 50)
        await p.say(cid, f"{p.name} in time")
    await advance(hub, clock, 50)
    assert await violations(alice, cid) == []


async def test_warn_reaches_only_the_violator(hub: RunningHub, clock: FakeClock, people: list[Participant]) -> None:
    alice, bob, _ = people
    cid = await open_channel(
        alice, "consulting", [bob], knobs={"expectations": {"reply_within": {"seconds": 30, "action": "warn"}}}
    )
    await alice.say(cid, "what is a WAL?")
    await advance(hub, clock, 31)
    warned = await bob.next_of(VIOLATED)
    assert list(warned.audience.agent_ids) == [bob.agent_id]
    assert data_of(warned)["expectation"] == "reply_within"
    assert await violations(alice, cid) == []  # not in the asker's view of the WAL
    marker = await alice.rpc("CanSend", hub_pb2.CanSendRequest(channel_id=cid, event_type="ag2.msg.text"))
    assert list(marker.expected_next) == [bob.agent_id]  # the channel stays open
    await audit_rows(hub, cid, 1)


async def test_max_silence_warn_names_no_one_and_tells_the_channel(
    hub: RunningHub, clock: FakeClock, people: list[Participant]
) -> None:
    """max_silence is channel-wide (AG2's violator_ids=[]) also where someone is due: a warn has no
    violator to address, so the whole channel gets it, and a hide hides no one."""
    alice, bob, carol = people
    cid = await open_channel(
        alice, "discussion", [bob, carol], knobs={"expectations": {"max_silence": {"seconds": 30, "action": "warn"}}}
    )
    await advance(hub, clock, 31)
    for p in people:
        warned = await p.next_of(VIOLATED)
        assert not warned.HasField("audience")  # broadcast
        assert data_of(warned)["expectation"] == "max_silence" and data_of(warned)["expected_of"] == []
    (row,) = await audit_rows(hub, cid, 1)
    assert row.actor_id == ""


async def test_audit_action_records_but_shows_no_one(
    hub: RunningHub, clock: FakeClock, people: list[Participant]
) -> None:
    alice, bob, carol = people
    set_policy(hub, {"workflow": {"turn_within": {"seconds": 10, "action": "audit"}}})
    knobs = {"transitions": [{"condition": {"type": "always"}, "target": {"type": "round_robin"}}]}
    cid = await open_channel(alice, "workflow", [bob, carol], knobs=knobs)
    await advance(hub, clock, 11)
    (row,) = await audit_rows(hub, cid, 1)
    assert row.actor_id == alice.agent_id and json.loads(row.detail_json)["action"] == "audit"
    for p in people:
        assert await violations(p, cid) == []
    await advance(hub, clock, 100)
    await audit_rows(hub, cid, 1)  # recorded in the WAL, so it does not fire again


async def test_max_silence_auto_closes_the_channel(
    hub: RunningHub, clock: FakeClock, people: list[Participant]
) -> None:
    alice, bob, _ = people
    set_policy(hub, {"conversation": {"max_silence": {"seconds": 120, "action": "auto_close"}}})
    cid = await open_channel(alice, "conversation", [bob])
    await advance(hub, clock, 100)
    await bob.say(cid, "still here")
    await advance(hub, clock, 100)  # 100 s after bob's envelope: not silent long enough
    assert await violations(alice, cid) == []
    await advance(hub, clock, 21)
    notice = await alice.next_of(VIOLATED)
    assert data_of(notice)["expected_of"] == []  # channel-wide, as AG2: the channel went silent, no one in particular
    assert data_of(notice)["expected"].startswith("the channel: post within 120s of the last participant envelope")
    closed = await alice.next_of("ag2.channel.closed")
    assert data_of(closed) == {"reason": "expectation_max_silence", "expectation": "max_silence", "expected_of": []}
    assert set(data_of(closed)) <= event_table()["ag2.channel.closed"].keys
    meta = await alice.rpc("DescribeChannel", hub_pb2.DescribeChannelRequest(channel_id=cid))
    assert meta.channel.close_reason == "expectation_max_silence"
    (row,) = await audit_rows(hub, cid, 1)  # max_silence is channel-wide: one row, not one per participant
    assert row.actor_id == "" and row.subject_id == cid
    detail = json.loads(row.detail_json)
    assert detail["expectation"] == "max_silence" and "expected_of" not in detail
    assert len(await violations(alice, cid)) == 1  # and one envelope


async def test_acks_within_notifies_about_the_invitee_that_did_not_ack(
    hub: RunningHub, clock: FakeClock, people: list[Participant]
) -> None:
    alice, bob, carol = people
    set_policy(hub, {"*": {"acks_within": {"seconds": 5}}})
    resp = await alice.rpc(
        "OpenChannel",
        hub_pb2.OpenChannelRequest(
            type="discussion", targets=[bob.agent_id, carol.agent_id], knobs_json="{}", invite_ack_timeout_seconds=600
        ),
    )
    cid = resp.channel.channel_id
    await bob.next_of("ag2.channel.invite")
    await bob.post(cid, "ag2.channel.invite_ack", {})
    await advance(hub, clock, 6)
    notice = await alice.next_of(VIOLATED)
    assert data_of(notice)["expected_of"] == [carol.agent_id]
    assert data_of(notice)["since_seq"] == 0
    await advance(hub, clock, 60)
    assert len(await violations(alice, cid)) == 1
    await carol.post(cid, "ag2.channel.invite_ack", {})  # a late ack still opens the channel
    await alice.next_of("ag2.channel.opened")


async def test_hide_leaves_the_violator_out_of_discovery_until_it_posts_or_the_channel_ends(
    hub: RunningHub, clock: FakeClock, people: list[Participant]
) -> None:
    alice, bob, carol = people
    hide = {"expectations": {"turn_within": {"seconds": 30, "action": "hide"}}}
    cid = await open_channel(alice, "discussion", [bob, carol], knobs=hide)
    await alice.say(cid, "question")

    async def listed() -> set[str]:
        """Who discovery lists, the same through every participant's replica (divided store kinds: the
        channel's holder serves alice, the others bob and carol)."""
        seen = []
        for who in people:
            found = await who.rpc("ListAgents", hub_pb2.ListAgentsRequest())
            seen.append({a.name for a in found.agents})
        assert seen[1:] == seen[:-1], f"replicas disagree: {seen}"
        return seen[0]

    assert {"bob", "carol"} <= await listed()
    await advance(hub, clock, 31)
    hidden = await bob.next_of(VIOLATED)
    assert list(hidden.audience.agent_ids) == [bob.agent_id]
    assert "hidden from discovery" in data_of(hidden)["expected"]
    assert "bob" not in await listed()
    await bob.post(cid, "myapp.still_thinking", {})  # any envelope in the channel brings it back
    assert "bob" in await listed()
    await advance(hub, clock, 3600)  # bob's clock already fired; no new turn started
    assert "bob" in await listed()
    await bob.say(cid, "answer")  # carol is due now
    await advance(hub, clock, 31)
    assert "carol" not in await listed()
    await alice.rpc("CloseChannel", hub_pb2.CloseChannelRequest(channel_id=cid))
    assert "carol" in await listed()  # the channel ended: nothing hides her any more


async def test_a_hidden_agent_is_left_out_of_a2a_discovery_through_every_replica(
    hub: RunningHub, clock: FakeClock, people: list[Participant]
) -> None:
    """DiscoverAgents leaves a hidden agent out as ListAgents does, through whichever replica is asked
    (divided store kinds: alice's replica holds the channel, bob's and carol's do not)."""
    alice, bob, carol = people
    await bob.rpc("SetA2ASettings", hub_pb2.SetA2ASettingsRequest(a2a=a2a_pb2.A2ASettings(enabled=True)))
    hide = {"expectations": {"turn_within": {"seconds": 30, "action": "hide"}}}
    cid = await open_channel(alice, "discussion", [bob, carol], knobs=hide)
    await alice.say(cid, "question")

    async def discovered() -> list[list[str]]:
        """What DiscoverAgents answers each participant (each through its own replica)."""
        found = [await who.rpc("DiscoverAgents", hub_pb2.DiscoverAgentsRequest()) for who in people]
        return [[a.name for a in f.agents] for f in found]

    assert await discovered() == [["bob"]] * 3
    await advance(hub, clock, 31)
    await bob.next_of(VIOLATED)
    assert await discovered() == [[]] * 3
    await bob.post(cid, "myapp.still_thinking", {})
    assert await discovered() == [["bob"]] * 3


async def test_per_channel_override_and_null(hub: RunningHub, clock: FakeClock, people: list[Participant]) -> None:
    alice, bob, carol = people
    set_policy(hub, {"*": {"max_silence": {"seconds": 10}}, "discussion": {"turn_within": {"seconds": 20}}})
    quiet = await open_channel(alice, "discussion", [bob, carol], knobs={"expectations": {"max_silence": None}})
    slow = await open_channel(
        alice, "discussion", [bob, carol], knobs={"expectations": {"turn_within": {"seconds": 1000}}}
    )
    meta = await alice.rpc("DescribeChannel", hub_pb2.DescribeChannelRequest(channel_id=slow))
    assert json.loads(meta.channel.knobs_json)["expectations"] == {
        "max_silence": {"seconds": 10.0, "action": "notify_channel"},
        "turn_within": {"seconds": 1000.0, "action": "notify_channel"},
    }
    await advance(hub, clock, 21)
    assert [d["expectation"] for d in await violations(alice, quiet)] == ["turn_within"]
    assert [d["expectation"] for d in await violations(alice, slow)] == ["max_silence"]


@pytest.mark.parametrize(
    ("knobs", "problem"),
    [
        ({"expectations": {"reply_within": {"seconds": -1}}}, "knobs_json.expectations.reply_within.seconds"),
        ({"expectations": {"reply_within": {"seconds": 5, "action": "shout"}}}, "action"),
        ({"expectations": {"reply_in": {"seconds": 5}}}, "reply_in"),
        ({"expectations": {"reply_within": {"seconds": 5, "extra": 1}}}, "extra"),
        ({"expectations": ["reply_within"]}, "knobs_json.expectations"),
    ],
)
async def test_a_bad_expectations_knob_is_refused_naming_the_problem(
    hub: RunningHub, people: list[Participant], knobs: dict[str, Any], problem: str
) -> None:
    alice, bob, _ = people
    request = hub_pb2.OpenChannelRequest(type="consulting", targets=[bob.agent_id], knobs_json=json.dumps(knobs))
    with pytest.raises(InvalidArgument, match=problem):
        await alice.rpc("OpenChannel", request)


async def test_an_expectation_that_does_not_apply_to_the_type_is_refused(
    hub: RunningHub, people: list[Participant]
) -> None:
    alice, bob, _ = people
    knobs = json.dumps({"expectations": {"turn_within": {"seconds": 5}}})
    request = hub_pb2.OpenChannelRequest(type="conversation", targets=[bob.agent_id], knobs_json=knobs)
    with pytest.raises(InvalidArgument, match="turn_within does not apply to conversation"):
        await alice.rpc("OpenChannel", request)


async def test_a_firing_before_a_restart_does_not_fire_again_and_one_missed_while_down_fires_once(
    tmp_path: Path, clock: FakeClock
) -> None:
    db = tmp_path / "hub.db"
    policy = {"consulting": {"reply_within": {"seconds": 30}}, "discussion": {"turn_within": {"seconds": 30}}}
    async with running_hub(db, clock=clock) as hub:
        set_policy(hub, policy)
        alice, bob, carol = [await register(hub.target, n) for n in ("alice", "bob", "carol")]
        for p in (alice, bob, carol):
            await p.connect()
        fired = await open_channel(alice, "consulting", [bob])
        await alice.say(fired, "question")
        await advance(hub, clock, 31)
        assert len(await violations(alice, fired)) == 1
        missed = await open_channel(alice, "discussion", [bob, carol])
        await alice.say(missed, "your turn, bob")
        for p in (alice, bob, carol):
            await p.close()
    clock.offset += 600  # bob's turn in `missed` passes while the hub is down
    async with running_hub(db, clock=clock) as hub:  # no policy now: channels keep what they were opened with
        await fire_due(hub)
        alice = Participant(hub.target, alice.record, alice.credential)
        try:
            assert [len(await violations(alice, c)) for c in (fired, missed)] == [1, 1]
            (late,) = await violations(alice, missed)
            assert late["expected_of"] == [bob.agent_id]
            await advance(hub, clock, 600)
            assert [len(await violations(alice, c)) for c in (fired, missed)] == [1, 1]
            rows = await audit_rows(hub, missed, 1)
            assert rows[0].actor_id == bob.agent_id
        finally:
            await alice.close()
    async with running_hub(db, clock=clock) as hub:  # and once more: nothing refires
        await fire_due(hub)
        await audit_rows(hub, missed, 1)
        await audit_rows(hub, fired, 1)


async def test_a_hidden_agent_stays_hidden_across_a_restart(tmp_path: Path, clock: FakeClock) -> None:
    db = tmp_path / "hub.db"
    async with running_hub(db, clock=clock) as hub:
        alice, bob = [await register(hub.target, n) for n in ("alice", "bob")]
        for p in (alice, bob):
            await p.connect()
        hide = {"expectations": {"reply_within": {"seconds": 30, "action": "hide"}}}
        cid = await open_channel(alice, "consulting", [bob], knobs=hide)
        await alice.say(cid, "question")
        await advance(hub, clock, 31)
        for p in (alice, bob):
            await p.close()
    async with running_hub(db, clock=clock) as hub:
        alice = Participant(hub.target, alice.record, alice.credential)
        bob = Participant(hub.target, bob.record, bob.credential)
        try:
            found = await alice.rpc("ListAgents", hub_pb2.ListAgentsRequest())
            assert [a.name for a in found.agents] == ["alice"]
            await bob.connect()
            await bob.say(cid, "the answer")
            found = await alice.rpc("ListAgents", hub_pb2.ListAgentsRequest())
            assert [a.name for a in found.agents] == ["alice", "bob"]
        finally:
            await alice.close()
            await bob.close()


def expectations_doc() -> tuple[str, list[str]]:
    """The first ```yaml block and the ```json blocks of docs/governance.md "Expectations"."""
    section = (ROOT / "docs" / "governance.md").read_text().split("\n## Expectations\n", 1)[1].split("\n## ", 1)[0]
    (policy,) = re.findall(r"```yaml\n(.*?)```", section, re.DOTALL)
    return policy, re.findall(r"```json\n(.*?)```", section, re.DOTALL)


async def test_the_governance_doc_examples_hold(
    hub: RunningHub, clock: FakeClock, people: list[Participant], tmp_path: Path
) -> None:
    """The policy, the channel override, the resolved knobs and the event the doc shows are what the hub does."""
    policy_yaml, (event_json, knobs_json, resolved_json) = expectations_doc()
    path = tmp_path / "policy.yaml"
    path.write_text(policy_yaml)
    policy = load_policy(path)
    assert policy.expectations["discussion"]["max_silence"] is None
    hub.set_policy(policy)
    alice, bob, carol = people
    cid = await open_channel(alice, "consulting", [bob], knobs=json.loads(knobs_json))
    meta = await alice.rpc("DescribeChannel", hub_pb2.DescribeChannelRequest(channel_id=cid))
    knobs = json.loads(meta.channel.knobs_json)
    assert knobs == json.loads(resolved_json)
    discussion = await open_channel(alice, "discussion", [bob, carol])  # the policy alone: turn_within, hide
    meta = await alice.rpc("DescribeChannel", hub_pb2.DescribeChannelRequest(channel_id=discussion))
    assert json.loads(meta.channel.knobs_json)["expectations"] == {"turn_within": {"seconds": 120.0, "action": "hide"}}
    await alice.say(cid, "question")
    await advance(hub, clock, 61)
    notice = await alice.next(lambda e: e.event_type == VIOLATED and e.channel_id == cid)
    documented = json.loads(event_json)
    assert set(data_of(notice)) == set(documented) <= event_table()[VIOLATED].keys
    assert {k: type(v) for k, v in data_of(notice).items()} == {k: type(v) for k, v in documented.items()}
    closed = await alice.next(lambda e: e.event_type == "ag2.channel.closed" and e.channel_id == cid)
    assert data_of(closed)["reason"] == "expectation_reply_within"


@pytest.mark.parametrize(
    ("expectations", "problem"),
    [
        ({"discusion": {"max_silence": {"seconds": 5}}}, "unknown channel type 'discusion'"),
        ({"conversation": {"turn_within": {"seconds": 5}}}, "turn_within does not apply to conversation"),
        ({"*": {"max_silence": {"seconds": 0}}}, "greater than 0"),
        ({"*": {"max_silence": {"seconds": 5, "action": "shout"}}}, "action"),
    ],
)
def test_a_policy_with_a_bad_expectation_is_refused_naming_it(
    tmp_path: Path, expectations: dict[str, Any], problem: str
) -> None:
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"expectations": expectations}))
    with pytest.raises(ValueError, match=problem):
        load_policy(path)


def test_a_star_entry_that_does_not_apply_to_a_type_is_skipped_for_it() -> None:
    policy = Policy.model_validate({"expectations": {"*": {"turn_within": {"seconds": 5}}}})
    assert resolve_expectations(policy, "conversation", None) == DEFAULT_EXPECTATIONS["conversation"]
    assert resolve_expectations(policy, "discussion", None)["turn_within"].seconds == 5


def test_the_built_in_defaults_apply_unless_the_policy_or_the_knob_turns_them_off() -> None:
    """AG2's adapters' defaults: consulting reply_within 600 s auto_close, conversation max_silence 3600 s audit."""
    consulting = resolve_expectations(Policy(), "consulting", None)
    assert consulting == {"reply_within": ExpectationSpec(seconds=600, action="auto_close")}
    assert resolve_expectations(Policy(), "conversation", None) == {
        "max_silence": ExpectationSpec(seconds=3600, action="audit")
    }
    off = Policy.model_validate({"expectations": {"consulting": {"reply_within": None}}})
    assert resolve_expectations(off, "consulting", None) == {}
    assert resolve_expectations(Policy(), "consulting", {"reply_within": None}) == {}
    assert resolve_expectations(Policy(), "consulting", {"reply_within": {"seconds": 30}})["reply_within"].seconds == 30


async def test_posts_do_not_grow_the_timer_heap(hub: RunningHub, clock: FakeClock, people: list[Participant]) -> None:
    """A channel holds about one timer entry whatever its traffic (not one per post, no periodic scan)."""
    alice, bob, _ = people
    set_policy(hub, {"conversation": {"max_silence": {"seconds": 60}}})
    channels = [await open_channel(alice, "conversation", [bob]) for _ in range(3)]
    for i in range(50):
        await alice.say(channels[i % 3], f"message {i}")
    assert len(hub.core.expectations._heap) <= 3 * 2
    for cid in channels:
        await alice.rpc("CloseChannel", hub_pb2.CloseChannelRequest(channel_id=cid))
    await advance(hub, clock, 61)
    assert hub.core.expectations._heap == []


async def test_with_no_policy_an_unanswered_consulting_question_closes_after_ten_minutes(
    hub: RunningHub, clock: FakeClock, people: list[Participant]
) -> None:
    """The built-in default (AG2's consulting adapter): reply_within 600 s, auto_close."""
    alice, bob, _ = people
    cid = await open_channel(alice, "consulting", [bob])
    meta = await alice.rpc("DescribeChannel", hub_pb2.DescribeChannelRequest(channel_id=cid))
    assert json.loads(meta.channel.knobs_json)["expectations"] == {
        "reply_within": {"seconds": 600.0, "action": "auto_close"}
    }
    await alice.say(cid, "question")
    await advance(hub, clock, 599)
    assert await violations(alice, cid) == []
    await advance(hub, clock, 2)
    closed = await alice.next(lambda e: e.event_type == "ag2.channel.closed" and e.channel_id == cid)
    assert data_of(closed)["reason"] == "expectation_reply_within"
