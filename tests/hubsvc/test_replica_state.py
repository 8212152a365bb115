"""Two hub replicas on one store: identities, tasks, A2A executions and call tokens.

Both hubs of a test open the same store (the same Redis keys; on SQLite, the same file),
as replicas of one deployment do. What one replica changes, the other learns through
``HubCore.apply_remote`` (which the change feed calls); call tokens and running executions
are read from the store by any replica, and a task expires once however many replicas sweep it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from agentnet.v1 import channel_pb2, hub_pb2, identity_pb2, task_pb2

from agentsdk.errors import AlreadyExists, FailedPrecondition, NotFound, PermissionDenied, Unauthenticated
from hubsvc.core.options import HubOptions
from hubsvc.core.util import audit_row, hash_secret
from hubsvc.storage import TASK_LIVE, AgentRow, ExecutionRow, TaskRow, Writes
from netkernel.errors import LostRace, RuleDenied
from tests.clock import FakeClock
from tests.hubsvc import harness
from tests.hubsvc.harness import (
    EV_TEXT,
    Participant,
    RunningHub,
    assert_eventually,
    conversation,
    data_of,
    list_audit,
    register,
    running_hub,
)
from tests.hubsvc.test_a2a import COMPLETED, a2a_agent, answering, invoke

QUIET = HubOptions(sweep_interval=3600.0)
"""No background expiry sweep: the tests sweep when they choose."""


def on(hub: RunningHub, who: Participant) -> Participant:
    """The same identity, calling through another replica."""
    return Participant(hub.target, who.record, who.credential)


async def flushed(hub: RunningHub) -> None:
    """Wait until every write this replica queued so far (audit records too) is committed."""
    await hub.core.store.commit(Writes(audit=[audit_row("test_marker", "", "", {}, 0.0)]))


async def ended(hub: RunningHub, execution_id: str) -> bool:
    """Whether the store holds ``execution_id`` as ended (sweeping once for calls of dead replicas)."""
    await hub.core.executions.fail_orphans()
    row = await hub.core.store.get_execution(execution_id)
    return row is not None and not row.running


async def test_a_call_token_issued_by_one_replica_verifies_on_another(tmp_path: Path) -> None:
    db = tmp_path / "hub.db"
    async with running_hub(db) as hub_a:
        a = await a2a_agent(hub_a.target, "a")
        b = await a2a_agent(hub_a.target, "b")
        async with running_hub(db) as hub_b:  # started after A's registrations: it loads them
            await in_call_tree_across_replicas(hub_a, hub_b, a, b)


async def in_call_tree_across_replicas(hub_a: RunningHub, hub_b: RunningHub, a: Participant, b: Participant) -> None:
    """a (on A) calls b (on A), which calls c (on B) with tokens issued and exchanged on both replicas."""
    c = await a2a_agent(hub_b.target, "c")  # connected to B: B's channel to it stays on B
    b_via_b = on(hub_b, b)
    seen: dict[str, str] = {}

    async def b_loop() -> None:
        question = await b.next(lambda e: e.event_type == EV_TEXT)
        execution_id = data_of(question)["a2a"]["execution_id"]
        # B issues a token for an execution A runs (read from the stored row) ...
        from_b = await b_via_b.rpc("RefreshCallToken", hub_pb2.RefreshCallTokenRequest(execution_id=execution_id))
        # ... A exchanges it (not in A's memory: found in the store) ...
        from_a = await b.rpc("RefreshCallToken", hub_pb2.RefreshCallTokenRequest(call_token=from_b.call_token))
        # ... and B accepts A's token as the parent of a nested call.
        answer = await b_via_b.rpc("InvokeAgent", invoke(c, "and you?", call_token=from_a.call_token))
        seen.update(execution_id=execution_id, token=from_a.call_token, child=answer.execution_id)
        await b.say(question.channel_id, f"C said: {answer.result}")

    b_task = asyncio.create_task(b_loop())
    async with answering(c, lambda _d: ("leaf", None)):
        top = await a.rpc("InvokeAgent", invoke(b, "ask C", root_session_id="s1"))
    await b_task
    assert (top.status, top.result) == (COMPLETED, "C said: leaf")
    tree = (await c.rpc("ListExecutions", hub_pb2.ListExecutionsRequest(root_session_id="s1"))).executions
    assert [(e.caller_id, e.target_id) for e in tree] == [(a.agent_id, b.agent_id), (b.agent_id, c.agent_id)]
    assert tree[1].parent_execution_id == top.execution_id == seen["execution_id"]
    # The call ended: its tokens are gone from the store and verify on neither replica.
    secret = seen["token"].partition(".")[2]
    assert await hub_b.core.store.get_call_token(hash_secret(secret)) is None
    for who in (b, b_via_b):
        with pytest.raises(Unauthenticated, match="unknown call token"):
            await who.rpc("RefreshCallToken", hub_pb2.RefreshCallTokenRequest(call_token=seen["token"]))
        with pytest.raises(FailedPrecondition, match="is not running"):
            await who.rpc("RefreshCallToken", hub_pb2.RefreshCallTokenRequest(execution_id=seen["execution_id"]))
    for p in (a, b, c, b_via_b):
        await p.close()


async def test_an_identity_registered_changed_and_removed_on_one_replica_is_seen_on_another(tmp_path: Path) -> None:
    db = tmp_path / "hub.db"
    async with running_hub(db) as hub_a, running_hub(db) as hub_b:
        x = await register(hub_a.target, "xavier")
        registry_b = hub_b.core.registry
        # On Redis the change feed applies A's commits on B by itself; apply_remote is what it
        # calls, called here directly (idempotent), so the test does not wait on the feed.
        await hub_b.core.apply_remote(agents=[x.agent_id])
        assert registry_b.resolve("xavier").agent_id == x.agent_id
        assert hub_b.core.authenticate(x.credential) == x.agent_id
        x_via_b = on(hub_b, x)
        await x_via_b.connect()  # online on B: presence is B's own and survives a reload
        await x.rpc("SetSkill", hub_pb2.SetSkillRequest(skill_md="# I sort things"))
        await hub_b.core.apply_remote(agents=[x.agent_id])
        record = registry_b.get(x.agent_id).record
        assert (record.skill_md, record.online) == ("# I sort things", True)

        await x.rpc("Unregister", hub_pb2.UnregisterRequest())
        await hub_b.core.apply_remote(agents=[x.agent_id])
        assert x.agent_id not in registry_b
        with pytest.raises(NotFound):
            registry_b.resolve("xavier")
        with pytest.raises(Unauthenticated):
            await x_via_b.rpc("ListAgents", hub_pb2.ListAgentsRequest())
        # The name is free on B too.
        again = await register(hub_b.target, "xavier")
        assert again.agent_id != x.agent_id
        for p in (x, x_via_b, again):
            await p.close()


@pytest.mark.clients_on_one_replica("the replica that has not learnt of carol must be the one asked")
async def test_an_identity_registered_elsewhere_a_moment_ago_is_found_by_every_call_naming_it(
    tmp_path: Path,
) -> None:
    """Another replica registered carol and this one has not learnt of her yet: a call naming her
    (by name or id) reads the store before it answers NOT_FOUND, so it answers as a replica that
    knew her would."""
    async with running_hub(tmp_path / "hub.db") as hub:
        if hub.core.store.feed is None:
            pytest.skip("replicas on one SQLite file have no change feed: nothing is learnt late")
        alice, bob, _ = await conversation(hub.target)
        # Written to the shared store under this replica's own name, so no change feed tells it: the race, every time.
        record = identity_pb2.AgentRecord(agent_id="carol-id", passport=identity_pb2.Passport(name="carol"))
        row = AgentRow("carol-id", "carol", hash_secret("carol-secret"), record.SerializeToString())
        await hub.core.store.commit(Writes(agents=[row]))
        assert "carol-id" not in hub.core.registry  # the stale view
        described = await alice.rpc("DescribeAgent", hub_pb2.DescribeAgentRequest(name="carol"))
        assert described.agent.agent_id == "carol-id"
        quoted = await alice.rpc("QuoteContext", hub_pb2.QuoteContextRequest(speaker="carol"))
        assert list(quoted.excerpts) == []  # she said nothing yet
        with pytest.raises(PermissionDenied, match="does not accept A2A calls"):  # not NOT_FOUND
            await alice.rpc("InvokeAgent", invoke("carol"))
        with pytest.raises(NotFound):  # nobody anywhere
            await alice.rpc("DescribeAgent", hub_pb2.DescribeAgentRequest(name="nobody"))
        await alice.close()
        await bob.close()


@pytest.mark.clients_on_one_replica("the replica whose copy of vip lags must be the one asked")
async def test_an_open_refused_by_a_rule_lifted_elsewhere_a_moment_ago_is_decided_on_the_stored_rule(
    tmp_path: Path,
) -> None:
    async with running_hub(tmp_path / "hub.db") as hub:
        if hub.core.store.feed is None:
            pytest.skip("replicas on one SQLite file have no change feed: nothing is learnt late")
        vip = await register(hub.target, "vip")
        closed = json.dumps({"access": {"inbound_from": {"names": ["nobody"]}}})
        await vip.rpc("SetRule", hub_pb2.SetRuleRequest(rule_json=closed))
        stranger = await register(hub.target, "stranger")
        await vip.connect()
        request = hub_pb2.OpenChannelRequest(type="conversation", targets=[vip.agent_id])
        with pytest.raises(RuleDenied, match="'vip' does not accept invitations from you"):
            await stranger.rpc("OpenChannel", request)
        # Another replica lifts vip's rule, and this one has not learnt it yet (written to the shared store
        # under this replica's own name, so no change feed tells it: the race, every time).
        entry = hub.core.registry.get(vip.agent_id)
        lifted = identity_pb2.AgentRecord()
        lifted.CopyFrom(entry.record)
        lifted.rule_json = ""
        await hub.core.store.commit(
            Writes(agents=[AgentRow(vip.agent_id, "vip", entry.cred_hash, lifted.SerializeToString())])
        )
        assert hub.core.registry.get(vip.agent_id).record.rule_json  # the stale view: still the rule
        opened = await stranger.rpc("OpenChannel", request)  # decided on the stored rule
        invite = await vip.next(lambda e: e.event_type == "ag2.channel.invite")
        assert invite.channel_id == opened.channel.channel_id
        await stranger.close()
        await vip.close()


async def test_a_name_registered_on_one_replica_is_taken_on_another(tmp_path: Path) -> None:
    db = tmp_path / "hub.db"
    async with running_hub(db) as hub_a, running_hub(db) as hub_b:
        first = await register(hub_a.target, "yara")
        with pytest.raises(AlreadyExists, match="'yara' is already registered"):
            await register(hub_b.target, "yara")  # B did not know yet; the store refused its write
        assert hub_b.core.registry.resolve("yara").agent_id == first.agent_id  # and now B knows
        await first.close()


async def test_a_task_changed_on_one_replica_is_seen_on_another(tmp_path: Path) -> None:
    db = tmp_path / "hub.db"
    async with running_hub(db) as hub_a, running_hub(db) as hub_b:
        owner = await register(hub_a.target, "owner")
        await hub_b.core.apply_remote(agents=[owner.agent_id])
        owner_via_b = on(hub_b, owner)
        started = (
            await owner.rpc("ReportTask", hub_pb2.ReportTaskRequest(kind=task_pb2.TASK_EVENT_KIND_STARTED, title="t"))
        ).task
        task_id = started.task_id
        await hub_b.core.apply_remote(tasks=[task_id])
        assert [t.task_id for t in hub_b.core.tasks.live()] == [task_id]
        waiting = asyncio.create_task(
            owner_via_b.rpc("WaitTask", hub_pb2.WaitTaskRequest(task_id=task_id, timeout_seconds=30))
        )
        report = hub_pb2.ReportTaskRequest(task_id=task_id, kind=task_pb2.TASK_EVENT_KIND_COMPLETED, payload_json="1")
        await owner.rpc("ReportTask", report)
        await hub_b.core.apply_remote(tasks=[task_id])
        woken = await waiting
        assert (woken.task.state, woken.timed_out) == (task_pb2.TASK_STATE_COMPLETED, False)
        assert hub_b.core.tasks.live() == []
        # B's view is current: reporting again through B is refused as on A.
        with pytest.raises(FailedPrecondition, match="already ended"):
            await owner_via_b.rpc("ReportTask", report)
        await owner.close()
        await owner_via_b.close()


async def test_a_replica_with_a_stale_view_cannot_rewrite_an_ended_task(tmp_path: Path) -> None:
    db = tmp_path / "hub.db"
    async with running_hub(db) as hub_a:
        owner = await register(hub_a.target, "owner")
        start = hub_pb2.ReportTaskRequest(kind=task_pb2.TASK_EVENT_KIND_STARTED, title="t")
        task_id = (await owner.rpc("ReportTask", start)).task.task_id
        async with running_hub(db) as hub_b:  # loads the running task
            await stale_report_refused(hub_a, hub_b, owner, task_id)


async def test_cancel_task_losing_the_race_to_another_replica_ending_the_task_returns_the_ended_task(
    tmp_path: Path,
) -> None:
    """This replica still shows the task running when another one completes it: a CancelTask here
    loses the store's race and answers the task as it ended (a no-op, as cancelling an ended task
    is), neither an error nor a running task marked cancel-requested."""
    async with running_hub(tmp_path / "hub.db") as hub:
        owner = await register(hub.target, "owner")
        start = hub_pb2.ReportTaskRequest(kind=task_pb2.TASK_EVENT_KIND_STARTED, title="t")
        task = (await owner.rpc("ReportTask", start)).task
        # Another replica completes it, and this one has not learnt it yet (written to the shared
        # store under this replica's own name, so no change feed tells it: the race, every time).
        done = task_pb2.TaskMetadata()
        done.CopyFrom(task)
        done.state = task_pb2.TASK_STATE_COMPLETED
        row = TaskRow(task.task_id, owner.agent_id, "", True, done.SerializeToString(), TASK_LIVE)
        await hub.core.store.commit(Writes(tasks=[row]))
        assert [t.task_id for t in hub.core.tasks.live()] == [task.task_id]  # the stale view
        cancelled = await owner.rpc("CancelTask", hub_pb2.CancelTaskRequest(task_id=task.task_id, reason="stop"))
        assert cancelled.task.state == task_pb2.TASK_STATE_COMPLETED
        assert not cancelled.task.cancel_requested and cancelled.envelope_id == ""
        stored = await hub.core.store.get_task(task.task_id)
        assert stored is not None and task_pb2.TaskMetadata.FromString(stored.record).state == done.state
        await owner.close()


async def test_a_close_on_a_stale_view_keeps_the_end_another_replica_gave_a_task(tmp_path: Path) -> None:
    async with running_hub(tmp_path / "hub.db") as hub:
        alice, bob, channel_id = await conversation(hub.target)
        start = hub_pb2.ReportTaskRequest(kind=task_pb2.TASK_EVENT_KIND_STARTED, title="t", channel_id=channel_id)
        task = (await alice.rpc("ReportTask", start)).task
        # Another replica completes the task, and this one has not learnt it yet (written to the
        # shared store under this replica's own name, so no change feed tells it).
        done = task_pb2.TaskMetadata()
        done.CopyFrom(task)
        done.state = task_pb2.TASK_STATE_COMPLETED
        row = TaskRow(task.task_id, alice.agent_id, channel_id, True, done.SerializeToString(), TASK_LIVE)
        await hub.core.store.commit(Writes(tasks=[row]))
        assert [t.task_id for t in hub.core.tasks.live()] == [task.task_id]  # the stale view
        closed = await alice.rpc("CloseChannel", hub_pb2.CloseChannelRequest(channel_id=channel_id))
        assert closed.channel.state == channel_pb2.CHANNEL_STATE_CLOSED  # the close is not failed by the task
        stored = await hub.core.store.get_task(task.task_id)
        assert stored is not None and task_pb2.TaskMetadata.FromString(stored.record).state == done.state
        await hub.core.apply_remote(tasks=[task.task_id])  # what the change feed does once it tells
        got = await alice.rpc("GetTask", hub_pb2.GetTaskRequest(task_id=task.task_id))
        assert got.task.state == task_pb2.TASK_STATE_COMPLETED
        await alice.close()
        await bob.close()


async def stale_report_refused(hub_a: RunningHub, hub_b: RunningHub, owner: Participant, task_id: str) -> None:
    """B, not told that A's owner completed the task, refuses the owner's report through B."""
    done = hub_pb2.ReportTaskRequest(task_id=task_id, kind=task_pb2.TASK_EVENT_KIND_COMPLETED)
    await owner.rpc("ReportTask", done)
    # B was not told yet: its memory still has the task running, but the store refuses the
    # write and B answers as A would, having learnt the stored state.
    owner_via_b = on(hub_b, owner)
    progress = hub_pb2.ReportTaskRequest(task_id=task_id, kind=task_pb2.TASK_EVENT_KIND_PROGRESS)
    with pytest.raises(FailedPrecondition, match="already ended"):
        await owner_via_b.rpc("ReportTask", progress)
    assert hub_b.core.tasks.live() == []
    assert (await hub_a.core.store.get_task(task_id)).terminal  # type: ignore[union-attr]
    # Nor may a second start of the same id succeed on another replica.
    with pytest.raises(FailedPrecondition, match="already started"):
        await owner_via_b.rpc(
            "ReportTask", hub_pb2.ReportTaskRequest(task_id=task_id, kind=task_pb2.TASK_EVENT_KIND_STARTED)
        )
    await owner.close()
    await owner_via_b.close()


async def start_task(owner: Participant) -> str:
    """Start a task of ``owner`` that expires 5 s later (by the hubs' clock); its id."""
    start = hub_pb2.ReportTaskRequest(kind=task_pb2.TASK_EVENT_KIND_STARTED, title="t", ttl_seconds=5)
    response: hub_pb2.ReportTaskResponse = await owner.rpc("ReportTask", start)
    return response.task.task_id


async def test_two_replicas_sweeping_one_expired_task_commit_one_expiry(tmp_path: Path) -> None:
    db = tmp_path / "hub.db"
    clock = FakeClock()
    sweeping = HubOptions(sweep_interval=0.01)
    async with running_hub(db, sweeping, clock=clock) as hub_a:
        owner = await register(hub_a.target, "owner")
        task_id = await start_task(owner)
        async with running_hub(db, sweeping, clock=clock) as hub_b:  # loads the running task
            assert [t.task_id for t in hub_b.core.tasks.live()] == [task_id]
            clock.offset += 10  # both sweepers now find it due
            for hub in (hub_a, hub_b):
                await assert_eventually(lambda hub=hub: hub.core.tasks.live() == [])  # type: ignore[misc]
                assert (await hub.core.tasks.get(task_id)).state == task_pb2.TASK_STATE_EXPIRED
                await flushed(hub)
            terminated = await list_audit(hub_a, kind="task_terminated", subject_id=task_id)
            assert [r.detail_json for r in terminated] == ['{"state": "TASK_STATE_EXPIRED"}']
        await owner.close()


@asynccontextmanager
async def a_task_due_on_two_replicas(tmp_path: Path) -> AsyncIterator[tuple[RunningHub, RunningHub, Participant, str]]:
    """Two replicas without background sweeps, sharing a clock, both knowing a task ``owner`` started through
    the first, whose TTL has passed: (replica a, replica b, owner, task id)."""
    db = tmp_path / "hub.db"
    clock = FakeClock()
    async with running_hub(db, QUIET, clock=clock) as hub_a, running_hub(db, QUIET, clock=clock) as hub_b:
        owner = await register(hub_a.target, "owner")
        task_id = await start_task(owner)
        await hub_b.core.apply_remote(agents=[owner.agent_id], tasks=[task_id])
        clock.offset += 10
        yield hub_a, hub_b, owner, task_id


async def test_concurrent_sweeps_of_two_replicas_expire_a_task_once(tmp_path: Path) -> None:
    async with a_task_due_on_two_replicas(tmp_path) as (hub_a, hub_b, owner, task_id):
        expired = await asyncio.gather(hub_a.core.tasks.expire(), hub_b.core.tasks.expire())
        assert sorted(len(e) for e in expired) == [0, 1]  # one replica's write won, the other learnt it
        for hub in (hub_a, hub_b):
            assert hub.core.tasks.live() == []
            assert (await hub.core.tasks.get(task_id)).state == task_pb2.TASK_STATE_EXPIRED
            await flushed(hub)
        assert len(await list_audit(hub_a, kind="task_terminated", subject_id=task_id)) == 1
        await owner.close()


async def test_a_task_completed_on_one_replica_is_not_expired_by_another(tmp_path: Path) -> None:
    async with a_task_due_on_two_replicas(tmp_path) as (_, hub_b, owner, task_id):
        await owner.rpc(
            "ReportTask", hub_pb2.ReportTaskRequest(task_id=task_id, kind=task_pb2.TASK_EVENT_KIND_COMPLETED)
        )
        assert await hub_b.core.tasks.expire() == []  # B's stale sweep is refused by the store
        assert (await hub_b.core.tasks.get(task_id)).state == task_pb2.TASK_STATE_COMPLETED
        row = await hub_b.core.store.get_task(task_id)
        assert row is not None and task_pb2.TaskMetadata.FromString(row.record).state == task_pb2.TASK_STATE_COMPLETED
        await owner.close()


async def test_an_execution_another_replica_ended_stops_verifying_its_tokens(tmp_path: Path, hub_store: str) -> None:
    if harness.STORE.divided:
        pytest.skip("the stall made here (a refresh above the TTL) is refused with --partitions: refresh < TTL")
    db = tmp_path / "hub.db"
    # On Redis, A's liveness key lapses right after it starts (no refresh): to the other
    # replicas A looks dead, as after a stall longer than its TTL, while it still serves.
    stalled = HubOptions(replica_ttl=0.2, replica_refresh=3600.0)
    async with running_hub(db, stalled) as hub_a:
        a = await a2a_agent(hub_a.target, "a")
        b = await a2a_agent(hub_a.target, "b")
        call = asyncio.create_task(a.rpc("InvokeAgent", invoke(b, "hold on")))
        question = await b.next(lambda e: e.event_type == EV_TEXT)
        execution_id = data_of(question)["a2a"]["execution_id"]
        token = await b.rpc("RefreshCallToken", hub_pb2.RefreshCallTokenRequest(execution_id=execution_id))
        # Alone on SQLite, a hub that starts fails every execution it finds running (the process
        # that ran it is assumed gone); on Redis, a replica fails those whose owner is not alive.
        async with running_hub(db, QUIET) as hub_b:
            if hub_store.startswith("redis"):  # B's sweep (or this one) fails it once A's key has lapsed
                await assert_eventually(lambda: ended(hub_b, execution_id))
            await hub_a.core.apply_remote(executions=[execution_id])  # what the change feed does on Redis
            assert await hub_a.core.call_tokens.lookup(token.call_token) is None
            with pytest.raises(Unauthenticated, match="unknown call token"):
                await b.rpc("RefreshCallToken", hub_pb2.RefreshCallTokenRequest(call_token=token.call_token))
            with pytest.raises(FailedPrecondition, match="is not running"):
                await b.rpc("RefreshCallToken", hub_pb2.RefreshCallTokenRequest(execution_id=execution_id))
        await b.say(question.channel_id, "done")
        assert (await call).status == COMPLETED  # the caller still gets the real outcome
        await a.close()
        await b.close()


async def test_an_execution_is_ended_conditionally_once(tmp_path: Path) -> None:
    """An end written with ``expect_running`` commits only while the stored execution runs (how
    replicas fail a dead replica's call once)."""
    async with running_hub(tmp_path / "hub.db", QUIET) as hub:
        store = hub.core.store
        record = b"\x0a\x02e1"  # any bytes: the store keeps the record opaque
        await store.commit(Writes(executions=[ExecutionRow("e1", "r1", "x", "y", True, 1.0, record, "gone")]))
        ended = ExecutionRow("e1", "r1", "x", "y", False, 1.0, record, expect_running=True)
        await store.commit(Writes(executions=[ended]))
        with pytest.raises(LostRace):
            await store.commit(Writes(executions=[ended], audit=[audit_row("second", "", "", {}, 0.0)]))
        row = await store.get_execution("e1")
        assert row is not None and not row.running
        assert [r for r in await list_audit(hub) if r.kind == "second"] == []  # the refused bundle wrote nothing
