"""OperatorService: the operator's reads see everything, pages are bounded, and only the operator
token opens them (an agent credential is refused without saying anything about what was asked)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from agentnet.v1 import a2a_pb2, channel_pb2, hub_pb2, operator_pb2, task_pb2

from agentsdk.operator import OperatorClient
from hubsvc.core.options import HubOptions
from netkernel.errors import InvalidArgument, NotFound, PermissionDenied, Unauthenticated
from tests.hubsvc.harness import (
    EV_TEXT,
    Participant,
    RunningHub,
    assert_eventually,
    data_of,
    open_channel,
    register,
    running_hub,
)
from tests.hubsvc.test_a2a import a2a_agent, answering, invoke
from tests.hubsvc.test_replicas import Replicas, on, on_redis, replicas

__all__ = ["on_redis", "replicas"]  # the replica fixtures, used by the last test

OPENED = channel_pb2.CHANNEL_STATE_OPENED
CLOSED = channel_pb2.CHANNEL_STATE_CLOSED


@pytest.fixture
async def operator(hub: RunningHub) -> AsyncIterator[OperatorClient]:
    async with OperatorClient(hub.target, hub.operator_token) as client:
        yield client


async def every_status(hub: RunningHub) -> list[operator_pb2.GetStatusResponse]:
    """The status of every replica of ``hub`` (of the hub alone)."""
    out = []
    for server in hub.replicas:
        async with OperatorClient(server.target, hub.operator_token) as client:
            out.append(await client.status())
    return out


async def test_status_counts_what_the_hub_holds(
    hub: RunningHub, hub_store: str, operator: OperatorClient, conv: tuple[Participant, Participant, str]
) -> None:
    await register(hub.target, "carol")  # registered, never connected
    status = await operator.status()
    assert status.store_kind == ("redis" if hub_store.startswith("redis") else hub_store)  # Cluster kinds too
    assert status.version
    assert "@" not in status.store_address and status.store_address
    assert (status.identities, status.online) == (3, 2)
    # Streams, held channels and the inboxes they hold: each replica counts its own.
    statuses = await every_status(hub)
    assert sum(s.connected_streams for s in statuses) == 2
    assert [(c.state, c.count) for s in statuses for c in s.live_channels] == [(OPENED, 1)]
    assert status.running_tasks == 0
    assert bool(status.replica_id) == hub_store.startswith("redis")
    assert status.uptime_seconds >= 0
    # What a dashboard reads besides: the store answers, what waits for answers, the channel types.
    assert status.store_healthy and status.store_error == "" and 0 <= status.store_probe_seconds < 2
    assert list(status.channel_types) == ["consulting", "conversation", "discussion", "workflow"]
    assert [(s.pending_inbox_total, s.max_pending_inbox) for s in statuses] == [(0, 0)] * len(statuses)
    alice, bob, channel_id = conv
    await alice.say(channel_id, "one")
    await alice.say(channel_id, "two")
    await bob.say(channel_id, "answered")
    statuses = await every_status(hub)
    assert sum(s.pending_inbox_total for s in statuses) == 1  # bob's answer waits for alice
    assert max(s.max_pending_inbox for s in statuses) == 1


async def test_agents_page_by_name_and_filter_online(
    hub: RunningHub, operator: OperatorClient, conv: tuple[Participant, Participant, str]
) -> None:
    await register(hub.target, "carol")
    first = await operator.list_agents(page_size=2)
    assert [a.name for a in first.agents] == ["alice", "bob"] and first.next_page_token
    second = await operator.list_agents(page_size=2, page_token=first.next_page_token)
    assert [a.name for a in second.agents] == ["carol"] and second.next_page_token == ""
    assert [a.name for a in await operator.agents(online_only=True)] == ["alice", "bob"]
    alice, _, _ = conv
    assert (await operator.describe_agent("alice")).agent_id == alice.agent_id
    with pytest.raises(NotFound):
        await operator.describe_agent("nobody")


async def test_channels_newest_first_by_state_and_type_with_whose_turn(
    hub: RunningHub, operator: OperatorClient, conv: tuple[Participant, Participant, str]
) -> None:
    alice, bob, first = conv
    second_resp = await alice.rpc(
        "OpenChannel", hub_pb2.OpenChannelRequest(type="consulting", targets=[bob.agent_id], message="a question?")
    )
    second = second_resp.channel.channel_id
    third_resp = await alice.rpc("OpenChannel", hub_pb2.OpenChannelRequest(type="conversation", targets=[bob.agent_id]))
    third = third_resp.channel.channel_id
    await alice.rpc("CloseChannel", hub_pb2.CloseChannelRequest(channel_id=third, reason="done"))

    assert [c.channel_id for c in await operator.channels()] == [third, second, first]
    page = await operator.list_channels(page_size=1)
    assert [c.channel_id for c in page.channels] == [third]
    rest = await operator.list_channels(page_size=1, page_token=page.next_page_token)
    assert [c.channel_id for c in rest.channels] == [second]
    assert [c.channel_id for c in await operator.channels(states=[CLOSED])] == [third]
    assert [c.channel_id for c in await operator.channels(type="conversation")] == [third, first]
    one = await operator.list_channels(states=[channel_pb2.CHANNEL_STATE_PENDING, OPENED], type="conversation")
    assert ([c.channel_id for c in one.channels], one.next_page_token) == ([first], "")

    await bob.next(lambda e: e.event_type == "ag2.channel.invite" and e.channel_id == second)
    await bob.post(second, "ag2.channel.invite_ack", {})
    await assert_eventually(lambda: _state(operator, second, OPENED))
    described = await operator.describe_channel(second)
    assert described.live and list(described.expected_next) == [bob.agent_id]  # the consultant answers
    assert json.loads(described.adapter_state_json) is not None
    ended = await operator.describe_channel(third)
    assert not ended.live and ended.channel.close_reason == "done" and not ended.expected_next
    with pytest.raises(NotFound):
        await operator.describe_channel("no-such-channel")


async def _state(operator: OperatorClient, channel_id: str, state: int) -> bool:
    return (await operator.describe_channel(channel_id)).channel.state == state


async def test_read_wal_sees_every_envelope_and_follows(
    hub: RunningHub, operator: OperatorClient, conv: tuple[Participant, Participant, str]
) -> None:
    alice, bob, channel_id = conv
    carol = await register(hub.target, "carol")
    await alice.post(channel_id, EV_TEXT, {"text": "for bob only"}, audience=[bob.agent_id])
    seen = [e async for e in operator.read_wal(channel_id)]
    assert [data_of(e).get("text") for e in seen if e.event_type == EV_TEXT] == ["for bob only"]

    got: list[str] = []

    async def follow() -> None:
        async for env in operator.read_wal(channel_id, from_seq=seen[-1].seq + 1, follow=True):
            got.append(data_of(env).get("text", env.event_type))

    follower = asyncio.create_task(follow())
    try:
        await assert_eventually(lambda: hub.core.channels.watched(channel_id))
        await bob.say(channel_id, "live")
        await assert_eventually(lambda: got == ["live"])
    finally:
        follower.cancel()
    with pytest.raises(NotFound):
        [e async for e in operator.read_wal("no-such-channel")]
    # An agent that is not a member still cannot read it (its own view is the HubService ReadWal).
    async with OperatorClient(hub.target, carol.credential) as as_carol:
        with pytest.raises(PermissionDenied):
            [e async for e in as_carol.read_wal(channel_id)]


async def test_tasks_newest_first_and_one_by_id(
    hub: RunningHub, operator: OperatorClient, conv: tuple[Participant, Participant, str]
) -> None:
    alice, _, channel_id = conv
    ids = []
    for title in ("first", "second", "third"):
        started = await alice.rpc(
            "ReportTask",
            hub_pb2.ReportTaskRequest(kind=task_pb2.TASK_EVENT_KIND_STARTED, title=title, channel_id=channel_id),
        )
        ids.append(started.task.task_id)
    await alice.rpc("ReportTask", hub_pb2.ReportTaskRequest(task_id=ids[0], kind=task_pb2.TASK_EVENT_KIND_COMPLETED))
    assert [t.title for t in await operator.tasks()] == ["third", "second"]
    page = await operator.list_tasks(include_ended=True, page_size=2)
    assert [t.title for t in page.tasks] == ["third", "second"]
    rest = await operator.list_tasks(include_ended=True, page_size=2, page_token=page.next_page_token)
    assert ([t.title for t in rest.tasks], rest.next_page_token) == (["first"], "")
    assert (await operator.get_task(ids[0])).state == task_pb2.TASK_STATE_COMPLETED
    assert (await operator.status()).running_tasks == 2
    with pytest.raises(NotFound):
        await operator.get_task("no-such-task")


async def test_executions_by_root_session_and_one_executions_subtree(hub: RunningHub, operator: OperatorClient) -> None:
    a = await a2a_agent(hub.target, "a")
    b = await a2a_agent(hub.target, "b")
    c = await a2a_agent(hub.target, "c")

    async def b_loop() -> None:
        question = await b.next(lambda e: e.event_type == EV_TEXT)
        execution_id = data_of(question)["a2a"]["execution_id"]
        token = await b.rpc("RefreshCallToken", hub_pb2.RefreshCallTokenRequest(execution_id=execution_id))
        answer = await b.rpc("InvokeAgent", invoke(c, "and you?", call_token=token.call_token))
        await b.say(question.channel_id, f"C said: {answer.result}")

    b_task = asyncio.create_task(b_loop())
    async with answering(c, lambda _d: ("leaf", None)):
        await a.rpc("InvokeAgent", invoke(b, "ask C", root_session_id="session-9"))
    await b_task
    tree = await operator.list_executions(root_session_id="session-9")
    pairs = [(e.caller_id, e.target_id) for e in tree.executions]
    assert pairs == [(a.agent_id, b.agent_id), (b.agent_id, c.agent_id)] and not tree.truncated
    top, nested = tree.executions
    assert nested.parent_execution_id == top.execution_id
    assert all(e.status == a2a_pb2.INVOCATION_STATUS_COMPLETED for e in tree.executions)
    sub = await operator.list_executions(execution_id=nested.execution_id)
    assert [e.execution_id for e in sub.executions] == [nested.execution_id]
    whole = await operator.list_executions(execution_id=top.execution_id, limit=1)
    assert ([e.execution_id for e in whole.executions], whole.truncated) == ([top.execution_id], True)
    with pytest.raises(NotFound):
        await operator.list_executions(execution_id="no-such-execution")
    with pytest.raises(InvalidArgument):
        await operator.list_executions()
    for p in (a, b, c):
        await p.close()


async def test_follow_audit_sends_the_log_then_new_records(hub: RunningHub, operator: OperatorClient) -> None:
    await register(hub.target, "alice")
    records: list[hub_pb2.AuditRecord] = []

    async def follow() -> None:
        async for record in operator.follow_audit(kind="agent_registered"):
            records.append(record)

    follower = asyncio.create_task(follow())
    try:
        await assert_eventually(lambda: [json.loads(r.detail_json)["name"] for r in records] == ["alice"])
        await register(hub.target, "bob")
        await assert_eventually(lambda: [json.loads(r.detail_json)["name"] for r in records] == ["alice", "bob"])
    finally:
        follower.cancel()
    later = [r async for r in _first(operator.follow_audit(kind="agent_registered", after_id=records[0].audit_id))]
    assert [r.audit_id for r in later] == [records[1].audit_id]


async def test_names_are_looked_up_whole_on_a_hub_with_small_pages(tmp_path: Path) -> None:
    async with (
        running_hub(tmp_path / "hub.db", HubOptions(max_operator_page=2)) as small,
        OperatorClient(small.target, small.operator_token) as client,
    ):
        agents = [await register(small.target, f"named{i}") for i in range(5)]
        names = await client.names([a.agent_id for a in agents] + ["unknown-id"])
        assert names == {a.agent_id: f"named{i}" for i, a in enumerate(agents)}


async def test_follow_audit_is_woken_by_the_append_not_the_poll(tmp_path: Path) -> None:
    """A record this hub commits reaches a FollowAudit stream at once: with the store poll set to a
    minute (the hub's maximum), a new registration still arrives within the test's wait."""
    async with (
        running_hub(tmp_path / "hub.db", HubOptions(audit_poll_interval=60.0)) as slow_poll,
        OperatorClient(slow_poll.target, slow_poll.operator_token) as client,
        grpc.aio.insecure_channel(slow_poll.target) as here,
    ):
        records: list[hub_pb2.AuditRecord] = []

        async def follow() -> None:
            async for record in client.follow_audit(kind="agent_registered"):
                records.append(record)

        follower = asyncio.create_task(follow())
        try:  # registered through this replica (the followed one), whatever the harness spreads
            await register(slow_poll.target, "alice", via=here)
            await assert_eventually(lambda: [json.loads(r.detail_json)["name"] for r in records] == ["alice"])
            await register(slow_poll.target, "bob", via=here)
            await assert_eventually(lambda: [json.loads(r.detail_json)["name"] for r in records] == ["alice", "bob"])
        finally:
            follower.cancel()


async def _first(stream: AsyncIterator[hub_pb2.AuditRecord]) -> AsyncIterator[hub_pb2.AuditRecord]:
    async for item in stream:
        yield item
        return


async def test_an_agent_credential_or_no_token_opens_nothing(
    hub: RunningHub, conv: tuple[Participant, Participant, str]
) -> None:
    alice, _, channel_id = conv
    calls = {
        "status": lambda c: c.status(),
        "agents": lambda c: c.list_agents(),
        "describe_agent": lambda c: c.describe_agent("bob"),
        "channels": lambda c: c.list_channels(),
        "describe_channel": lambda c: c.describe_channel(channel_id),
        "tasks": lambda c: c.list_tasks(),
        "task": lambda c: c.get_task("nothing"),
        "executions": lambda c: c.list_executions(root_session_id="any"),
        "wal": lambda c: _drain(c.read_wal(channel_id)),
        "audit": lambda c: _drain(c.follow_audit()),
    }
    for secret, refusal in ((alice.credential, PermissionDenied), ("", Unauthenticated), ("guess", Unauthenticated)):
        async with OperatorClient(hub.target, secret) as client:
            for name, run in calls.items():
                with pytest.raises(refusal) as refused:
                    await run(client)
                assert channel_id not in refused.value.message, name
                assert "bob" not in refused.value.message, name


async def _drain(stream: AsyncIterator[object]) -> None:
    async for _ in stream:
        pass


async def test_page_sizes_and_tokens_are_checked(hub: RunningHub, operator: OperatorClient) -> None:
    limit = hub.core.options.max_operator_page
    for bad in (-1, limit + 1):
        with pytest.raises(InvalidArgument) as refused:
            await operator.list_agents(page_size=bad)
        assert refused.value.metadata["limit"] == str(limit)
        with pytest.raises(InvalidArgument):
            await operator.list_channels(page_size=bad)
        with pytest.raises(InvalidArgument):
            await operator.list_tasks(page_size=bad)
        with pytest.raises(InvalidArgument):
            await operator.list_executions(root_session_id="r", limit=bad)
    for token in ("not-a-token", (await _agents_token(hub, operator))):
        with pytest.raises(InvalidArgument):
            await operator.list_channels(page_token=token)  # an agents token is not a channels token
    with pytest.raises(InvalidArgument):
        await operator.list_channels(states=[channel_pb2.CHANNEL_STATE_UNSPECIFIED])
    assert (await operator.list_agents(page_size=limit)).agents is not None


async def _agents_token(hub: RunningHub, operator: OperatorClient) -> str:
    for name in ("x1", "x2"):
        await register(hub.target, name)
    return (await operator.list_agents(page_size=1)).next_page_token


async def _view(operator: OperatorClient, channel_id: str) -> tuple[object, ...]:
    """What an operator sees of the network through one replica (the per-replica fields left out)."""
    status = await operator.status()
    described = await operator.describe_channel(channel_id)
    return (
        status.identities,
        status.online,
        [(c.state, c.count) for c in status.live_channels],
        [(a.name, a.online) for a in await operator.agents()],
        [c.channel_id for c in await operator.channels()],
        (described.channel.last_seq, list(described.expected_next), described.adapter_state_json),
        [e.envelope_id async for e in operator.read_wal(channel_id)],
        [r.audit_id for r in await operator.list_audit()],
    )


async def test_every_replica_gives_the_same_answers_but_its_own_streams(replicas: Replicas) -> None:
    a = await replicas.start()
    b = await replicas.start()
    alice = await register(a.target, "alice")
    bob = on(b, await register(a.target, "bob"))
    await alice.connect()
    await bob.connect()  # through b
    channel_id = await open_channel(alice, "conversation", [bob])
    await alice.say(channel_id, "hello from a")
    await bob.say(channel_id, "hello from b")
    async with OperatorClient(a.target, a.operator_token) as via_a, OperatorClient(b.target, b.operator_token) as via_b:
        seen_a = await _view(via_a, channel_id)
        await assert_eventually(lambda: _same(via_b, channel_id, seen_a))
        assert seen_a[:3] == (2, 2, [(OPENED, 1)])
        status_a, status_b = await via_a.status(), await via_b.status()
        assert (status_a.connected_streams, status_b.connected_streams) == (1, 1)  # each counts its own
        assert status_a.replica_id and status_b.replica_id and status_a.replica_id != status_b.replica_id
    await alice.close()
    await bob.close()


async def _same(operator: OperatorClient, channel_id: str, expected: tuple[object, ...]) -> bool:
    return await _view(operator, channel_id) == expected


async def test_a_page_token_after_the_longest_name_is_accepted(hub: RunningHub, operator: OperatorClient) -> None:
    longest = "a" * 64  # the longest passport name; the token carries the last name of its page
    await register(hub.target, longest)
    await register(hub.target, "b")
    first = await operator.list_agents(page_size=1)
    assert [a.name for a in first.agents] == [longest]
    second = await operator.list_agents(page_size=1, page_token=first.next_page_token)
    assert [a.name for a in second.agents] == ["b"]


async def test_a_page_token_after_the_longest_task_id_is_accepted(
    hub: RunningHub, operator: OperatorClient, conv: tuple[Participant, Participant, str]
) -> None:
    alice, _, _ = conv
    longest = "t" * hub.core.options.max_id_bytes  # the token carries the last task id of its page
    for task_id in ("a-task", longest):  # the longest is the newest: the first page's last
        await alice.rpc("ReportTask", hub_pb2.ReportTaskRequest(task_id=task_id, kind=task_pb2.TASK_EVENT_KIND_STARTED))
    first = await operator.list_tasks(page_size=1)
    assert [t.task_id for t in first.tasks] == [longest]
    second = await operator.list_tasks(page_size=1, page_token=first.next_page_token)
    assert [t.task_id for t in second.tasks] == ["a-task"]
