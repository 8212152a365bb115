"""Identity RPCs, skills, tasks, context, the tools RPCs and the audit log."""

from __future__ import annotations

import asyncio
import json

import grpc
import pytest
from agentnet.v1 import hub_pb2, hub_pb2_grpc, identity_pb2, task_pb2

from agentsdk import errors
from hubsvc.adapters import ADAPTERS
from netkernel.channel_types import CHANNEL_TYPES
from tests.hubsvc.harness import (
    Participant,
    RunningHub,
    assert_eventually,
    call,
    conversation,
    data_of,
    list_audit,
    open_channel,
    register,
)

SKILL = """---
title: Research Assistant
expertise: [policy, finance]
---

# Researcher
"""


async def test_list_and_describe_agents_with_skills(hub: RunningHub) -> None:
    alice = await register(hub.target, "alice", capabilities=["research"], description="policy analyst")
    await register(hub.target, "zed", capabilities=["code"])
    await register(hub.target, "hum", human=True)
    remote = await register(hub.target, "remo", kind=identity_pb2.PASSPORT_KIND_REMOTE_AGENT)
    by_kind = await alice.rpc("ListAgents", hub_pb2.ListAgentsRequest(kind=identity_pb2.PASSPORT_KIND_HUMAN))
    assert [a.name for a in by_kind.agents] == ["hum"]
    assert [a.name for a in (await alice.rpc("ListAgents", hub_pb2.ListAgentsRequest(capability="CODE"))).agents] == [
        "zed"
    ]
    assert [a.name for a in (await alice.rpc("ListAgents", hub_pb2.ListAgentsRequest(query="POLICY"))).agents] == [
        "alice"
    ]
    limited = await alice.rpc("ListAgents", hub_pb2.ListAgentsRequest(limit=2, exclude_self=True))
    assert [a.name for a in limited.agents] == ["hum", "remo"]
    with pytest.raises(errors.InvalidArgument):
        await alice.rpc("ListAgents", hub_pb2.ListAgentsRequest(sort_by="age"))
    described = await alice.rpc("DescribeAgent", hub_pb2.DescribeAgentRequest(name="zed"))
    assert described.agent.skill_is_fallback and "code" in described.agent.skill_md
    updated = await remote.rpc("SetSkill", hub_pb2.SetSkillRequest(skill_md=SKILL))
    assert updated.agent.skill_md == SKILL and not updated.agent.skill_is_fallback
    again = await alice.rpc("DescribeAgent", hub_pb2.DescribeAgentRequest(agent_id=remote.agent_id))
    assert again.agent.skill_md == SKILL
    resumed = await alice.rpc("SetResume", hub_pb2.SetResumeRequest(resume=identity_pb2.Resume(summary="new summary")))
    assert "new summary" in resumed.agent.skill_md  # the fallback skill follows the resume
    audit = await list_audit(hub, kind="skill_set")
    assert [r.subject_id for r in audit] == [remote.agent_id]
    kinds = {r.kind for r in await list_audit(hub)}
    assert {"agent_registered", "skill_set", "resume_set"} <= kinds
    with pytest.raises(errors.NotFound):
        await alice.rpc("DescribeAgent", hub_pb2.DescribeAgentRequest(name="ghost"))


async def test_unregister_closes_channels_and_frees_name(hub: RunningHub) -> None:
    alice, bob, cid = await conversation(hub.target)
    resp = await bob.rpc("Unregister", hub_pb2.UnregisterRequest())
    assert list(resp.closed_channel_ids) == [cid]
    assert data_of(await alice.next_of("ag2.channel.closed"))["reason"] == "participant_left"
    with pytest.raises(errors.Unauthenticated):
        await bob.rpc("ListAgents", hub_pb2.ListAgentsRequest())
    # bob's stream ends for good: the credential is revoked, so no client reconnects with it.
    await assert_eventually(lambda: bob.stream_error is not None)
    assert bob.stream_error is not None
    ended = errors.error_from_rpc(bob.stream_error)
    assert isinstance(ended, errors.Unauthenticated) and ended.metadata["cause"] == "unregistered", ended
    await register(hub.target, "bob")
    await alice.close()
    await bob.close()


async def test_task_lifecycle_wait_and_cancel(
    hub: RunningHub, trio: tuple[Participant, Participant, Participant]
) -> None:
    alice, bob, carol = trio
    cid = await open_channel(alice, "conversation", [bob])
    started = await alice.rpc(
        "ReportTask", hub_pb2.ReportTaskRequest(kind=task_pb2.TASK_EVENT_KIND_STARTED, title="crunch", channel_id=cid)
    )
    tid = started.task.task_id
    assert started.task.state == task_pb2.TASK_STATE_RUNNING
    with pytest.raises(errors.PermissionDenied):
        await bob.rpc("ReportTask", hub_pb2.ReportTaskRequest(task_id=tid, kind=task_pb2.TASK_EVENT_KIND_COMPLETED))
    await alice.rpc(
        "ReportTask",
        hub_pb2.ReportTaskRequest(task_id=tid, kind=task_pb2.TASK_EVENT_KIND_PROGRESS, payload_json='{"p": 50}'),
    )
    waiter = asyncio.create_task(bob.rpc("WaitTask", hub_pb2.WaitTaskRequest(task_id=tid, timeout_seconds=10)))
    cancel = await bob.rpc("CancelTask", hub_pb2.CancelTaskRequest(task_id=tid, reason="no longer needed"))
    assert cancel.task.cancel_requested and cancel.envelope_id
    request = await alice.next_of("ag2.task.cancel_request")
    assert data_of(request) == {"task_id": tid, "reason": "no longer needed"}
    with pytest.raises(errors.PermissionDenied):
        await carol.rpc("CancelTask", hub_pb2.CancelTaskRequest(task_id=tid))
    await alice.rpc(
        "ReportTask",
        hub_pb2.ReportTaskRequest(task_id=tid, kind=task_pb2.TASK_EVENT_KIND_COMPLETED, payload_json='"done"'),
    )
    waited = await waiter
    assert waited.task.state == task_pb2.TASK_STATE_COMPLETED and not waited.timed_out
    assert waited.task.result_json == '"done"' and json.loads(waited.task.progress_json) == {"p": 50}
    with pytest.raises(errors.FailedPrecondition):
        await alice.rpc("ReportTask", hub_pb2.ReportTaskRequest(task_id=tid, kind=task_pb2.TASK_EVENT_KIND_FAILED))
    # Cancelling a task that ended is a no-op (as in AG2): the task comes back unchanged, nothing is posted.
    for who in (bob, alice):
        again = await who.rpc("CancelTask", hub_pb2.CancelTaskRequest(task_id=tid, reason="too late"))
        assert again.task.state == task_pb2.TASK_STATE_COMPLETED and again.envelope_id == ""
        assert again.task.cancel_reason == "no longer needed"
    own = await alice.rpc("ListTasks", hub_pb2.ListTasksRequest(include_ended=True))
    assert [t.task_id for t in own.tasks] == [tid]
    assert (await bob.rpc("ListTasks", hub_pb2.ListTasksRequest())).tasks == []
    assert [
        t.task_id
        for t in (
            await bob.rpc("ListTasks", hub_pb2.ListTasksRequest(scope=hub_pb2.TASK_SCOPE_ALL, include_ended=True))
        ).tasks
    ] == [tid]

    async def terminated() -> list[str]:
        return [r.subject_id for r in await list_audit(hub, kind="task_terminated")]

    assert await assert_eventually(terminated) == [tid]


async def test_wait_times_out_and_channel_close_cancels_tasks(
    trio: tuple[Participant, Participant, Participant],
) -> None:
    alice, bob, _ = trio
    cid = await open_channel(alice, "conversation", [bob])
    tid = (
        await alice.rpc("ReportTask", hub_pb2.ReportTaskRequest(kind=task_pb2.TASK_EVENT_KIND_STARTED, channel_id=cid))
    ).task.task_id
    waited = await bob.rpc("WaitTask", hub_pb2.WaitTaskRequest(task_id=tid, timeout_seconds=0.2))
    assert waited.timed_out and waited.task.state == task_pb2.TASK_STATE_RUNNING
    await alice.rpc("CloseChannel", hub_pb2.CloseChannelRequest(channel_id=cid))
    task = (await alice.rpc("GetTask", hub_pb2.GetTaskRequest(task_id=tid))).task
    assert task.state == task_pb2.TASK_STATE_CANCELLED and "closed_by_agent" in task.error


async def test_quote_context_keeps_the_audience(trio: tuple[Participant, Participant, Participant]) -> None:
    alice, bob, carol = trio
    disc = await open_channel(alice, "discussion", [bob, carol])
    await alice.say(disc, "for everyone")
    await bob.say(disc, "bob's turn")
    await carol.say(disc, "carol's turn")
    await alice.say(disc, "for carol only", audience=[carol.agent_id])
    for channel_id in (disc, ""):  # one channel, and all of the caller's channels
        request = hub_pb2.QuoteContextRequest(speaker="alice", recent_n=5, channel_id=channel_id)
        quoted = await bob.rpc("QuoteContext", request)
        assert [e.text for e in quoted.excerpts] == ["for everyone"]
        quoted = await carol.rpc("QuoteContext", request)
        assert [e.text for e in quoted.excerpts] == ["for everyone", "for carol only"]


async def test_context_search_and_quote(trio: tuple[Participant, Participant, Participant]) -> None:
    alice, bob, carol = trio
    cid = await open_channel(alice, "conversation", [bob])
    await alice.say(cid, "The Q3 Exposure is high")
    await bob.say(cid, "noted 100%")
    await bob.say(cid, "second from bob")
    await alice.say(cid, "secret exposure note", audience=[alice.agent_id])
    found = await bob.rpc("SearchContext", hub_pb2.SearchContextRequest(query="EXPOSURE"))
    assert [e.text for e in found.excerpts] == ["The Q3 Exposure is high"]
    assert (await bob.rpc("SearchContext", hub_pb2.SearchContextRequest(query="100%"))).excerpts[0].sender_name == "bob"
    quoted = await alice.rpc("QuoteContext", hub_pb2.QuoteContextRequest(speaker="bob", recent_n=2, channel_id=cid))
    assert [e.text for e in quoted.excerpts] == ["noted 100%", "second from bob"]
    with pytest.raises(errors.NotParticipant):
        await carol.rpc("SearchContext", hub_pb2.SearchContextRequest(query="x", channel_id=cid))


async def test_list_tools_follows_the_say_table(trio: tuple[Participant, Participant, Participant]) -> None:
    alice, bob, carol = trio
    plugin_only = await alice.rpc("ListTools", hub_pb2.ListToolsRequest())
    assert [t.name for t in plugin_only.tools] == ["peers", "channels", "tasks", "context", "delegate"]
    schema = json.loads(plugin_only.tools[0].parameters_json_schema)
    assert schema["properties"]["action"]["enum"] == ["find", "describe"]
    cid = await open_channel(alice, "consulting", [bob])
    names = lambda resp: [t.name for t in resp.tools]  # noqa: E731
    assert "say" in names(await alice.rpc("ListTools", hub_pb2.ListToolsRequest(channel_id=cid)))
    assert "say" not in names(await bob.rpc("ListTools", hub_pb2.ListToolsRequest(channel_id=cid)))
    await alice.say(cid, "question")
    assert "say" in names(await bob.rpc("ListTools", hub_pb2.ListToolsRequest(channel_id=cid, exclude_plugin=True)))
    assert names(await alice.rpc("ListTools", hub_pb2.ListToolsRequest(channel_id=cid, exclude_plugin=True))) == []
    disc = await open_channel(alice, "discussion", [bob, carol])
    assert "say" not in names(await carol.rpc("ListTools", hub_pb2.ListToolsRequest(channel_id=disc)))
    wf = await open_channel(
        alice, "workflow", [bob], knobs={"transitions": [{"condition": {"type": "always"}, "target": {"type": "stay"}}]}
    )
    assert "say" not in names(await alice.rpc("ListTools", hub_pb2.ListToolsRequest(channel_id=wf)))


async def test_list_tools_refuses_a_non_participant_as_every_channel_rpc_does(
    trio: tuple[Participant, Participant, Participant],
) -> None:
    alice, bob, carol = trio
    cid = await open_channel(alice, "conversation", [bob])
    with pytest.raises(errors.NotParticipant, match="only its participants may list its tools") as info:
        await carol.rpc("ListTools", hub_pb2.ListToolsRequest(channel_id=cid))
    assert info.value.metadata == {"channel_id": cid}
    with pytest.raises(errors.NotParticipant, match="only its participants may post") as posted:
        await carol.say(cid, "let me in")
    assert posted.value.metadata == {"channel_id": cid}


async def test_the_channels_tool_offers_exactly_the_channel_types(
    trio: tuple[Participant, Participant, Participant],
) -> None:
    tools = (await trio[0].rpc("ListTools", hub_pb2.ListToolsRequest())).tools
    schema = json.loads(next(t for t in tools if t.name == "channels").parameters_json_schema)
    typed = next(s for s in schema["properties"]["type"]["anyOf"] if "enum" in s)
    assert typed == {"enum": list(CHANNEL_TYPES), "type": "string"}
    assert tuple(ADAPTERS) == CHANNEL_TYPES


async def test_call_tool_peers_channels_context_say(trio: tuple[Participant, Participant, Participant]) -> None:
    alice, bob, _ = trio

    async def tool(p: Participant, name: str, args: dict[str, object], **kw: str) -> object:
        resp = await p.rpc("CallTool", hub_pb2.CallToolRequest(name=name, arguments_json=json.dumps(args), **kw))
        return json.loads(resp.result_json)

    peers = await tool(alice, "peers", {"action": "find"})
    assert sorted(p["name"] for p in peers["peers"]) == ["bob", "carol"]  # type: ignore[index]
    described = await tool(alice, "peers", {"action": "describe", "name": "bob"})
    assert set(described) >= {"passport", "resume", "skill_md"}  # type: ignore[arg-type]
    bob.auto_accept_invites = True
    opened = await tool(
        alice, "channels", {"action": "open", "type": "conversation", "target": "bob", "message": "hey"}
    )
    cid = opened["channel_id"]  # type: ignore[index]
    assert opened["seed_envelope_id"] and opened["participants"] == ["alice", "bob"]  # type: ignore[index]
    said = await tool(bob, "say", {"content": "hi alice", "audience": ["alice"]}, channel_id=cid)
    assert said["channel_id"] == cid  # type: ignore[index]
    listed = await tool(bob, "channels", {"action": "list"})
    assert [c["channel_id"] for c in listed["channels"]] == [cid]  # type: ignore[index]
    info = await tool(bob, "channels", {"action": "info"}, channel_id=cid)
    assert info["channel_id"] == cid  # type: ignore[index]
    quote = await tool(alice, "context", {"action": "quote", "speaker": "bob"})
    assert quote["excerpts"][0]["text"] == "hi alice"  # type: ignore[index]
    closed = await tool(alice, "channels", {"action": "close"}, channel_id=cid)
    assert closed["close_reason"] == "closed_by_agent"  # type: ignore[index]
    with pytest.raises(errors.InvalidArgument) as info_err:
        await tool(alice, "peers", {"action": "fly"})
    assert "action" in info_err.value.message
    with pytest.raises(errors.InvalidArgument):
        await tool(alice, "nope", {})
    with pytest.raises(errors.FailedPrecondition):
        await tool(alice, "tasks", {"action": "progress", "payload": 1})
    with pytest.raises(errors.InvalidArgument):
        await tool(alice, "say", {"content": "where?"})


async def test_delegate_consults_and_returns_reply(trio: tuple[Participant, Participant, Participant]) -> None:
    alice, bob, _ = trio
    bob.auto_accept_invites = True

    async def answer() -> None:
        question = await bob.next_of("ag2.msg.text")
        await bob.say(question.channel_id, f"answer to: {data_of(question)['text']}", causation_id=question.envelope_id)

    responder = asyncio.create_task(answer())
    resp = await alice.rpc("Delegate", hub_pb2.DelegateRequest(target="bob", prompt="model X?", timeout_seconds=10))
    await responder
    assert resp.text == "answer to: model X?"
    closed = await alice.next(lambda e: e.event_type == "ag2.channel.closed" and e.channel_id == resp.channel_id)
    assert data_of(closed)["reason"] == "consulting_complete"
    with pytest.raises(errors.InvalidArgument):
        await alice.rpc("Delegate", hub_pb2.DelegateRequest(target="alice", prompt="me?"))
    with pytest.raises(errors.Timeout):
        await alice.rpc("Delegate", hub_pb2.DelegateRequest(target="carol", prompt="hello?", timeout_seconds=0.5))


async def test_delegate_resolves_functions_prefixed_targets(trio: tuple[Participant, Participant, Participant]) -> None:
    # LLMs echo the tool namespace into the target ("functions.bob"): it names bob, through the RPC and the tool.
    alice, bob, _ = trio
    bob.auto_accept_invites = True

    async def answer(n: int) -> None:
        for _ in range(n):
            question = await bob.next_of("ag2.msg.text")
            await bob.say(question.channel_id, "yes", causation_id=question.envelope_id)

    responder = asyncio.create_task(answer(2))
    resp = await alice.rpc("Delegate", hub_pb2.DelegateRequest(target="functions.bob", prompt="q?", timeout_seconds=10))
    assert resp.text == "yes"
    tool = await alice.rpc(
        "CallTool",
        hub_pb2.CallToolRequest(
            name="delegate", arguments_json=json.dumps({"target": "functions.bob", "prompt": "q?"})
        ),
    )
    assert json.loads(tool.result_json)["text"] == "yes"
    await responder


async def test_an_unknown_delegate_target_lists_the_peers_to_delegate_to(
    hub: RunningHub, trio: tuple[Participant, Participant, Participant]
) -> None:
    alice, _, _ = trio
    with pytest.raises(errors.NotFound) as info:
        await alice.rpc("Delegate", hub_pb2.DelegateRequest(target="functions.bobby", prompt="q?"))
    assert info.value.message == "no agent named or with id 'functions.bobby'; you may delegate to: bob, carol."
    # The list is bounded: past 20 names the rest are counted.
    for i in range(22):
        await register(hub.target, f"peer-{i:02d}")
    with pytest.raises(errors.NotFound) as info:
        await alice.rpc("Delegate", hub_pb2.DelegateRequest(target="nobody", prompt="q?"))
    assert "you may delegate to: bob, carol, peer-00, " in info.value.message
    assert "peer-17 and 4 more (peers(action='find') lists them)." in info.value.message
    assert "peer-18" not in info.value.message


async def test_refused_posts_are_audited(hub: RunningHub, trio: tuple[Participant, Participant, Participant]) -> None:
    alice, bob, carol = trio
    disc = await open_channel(alice, "discussion", [bob, carol])
    with pytest.raises(errors.NotYourTurn):
        await carol.say(disc, "out of turn")

    async def refused() -> list[tuple[str, str, str]]:
        records = await list_audit(hub, kind="post_refused")
        return [(r.actor_id, r.subject_id, json.loads(r.detail_json)["reason"]) for r in records]

    # Audit records are written with the next group commit: poll instead of racing it.
    assert await assert_eventually(refused) == [(carol.agent_id, disc, "NOT_YOUR_TURN")]


async def test_task_tools_inside_a_task_and_expiry(trio: tuple[Participant, Participant, Participant]) -> None:
    alice, bob, _ = trio

    async def tool(p: Participant, name: str, args: dict[str, object], **kw: str) -> dict[str, object]:
        resp = await p.rpc("CallTool", hub_pb2.CallToolRequest(name=name, arguments_json=json.dumps(args), **kw))
        return dict(json.loads(resp.result_json))

    tid = (await alice.rpc("ReportTask", hub_pb2.ReportTaskRequest(kind=task_pb2.TASK_EVENT_KIND_STARTED))).task.task_id
    assert (await tool(alice, "tasks", {"action": "progress", "payload": {"pct": 10}}, task_id=tid))[
        "state"
    ] == "running"
    status = await tool(bob, "tasks", {"action": "status", "task_id": tid})
    assert json.loads(str(status["progress_json"])) == {"pct": 10}
    with pytest.raises(errors.PermissionDenied):
        await tool(bob, "tasks", {"action": "complete", "result": 1}, task_id=tid)
    assert (await tool(alice, "tasks", {"action": "complete", "result": [1, 2]}, task_id=tid))["state"] == "completed"
    waited = await tool(bob, "tasks", {"action": "wait", "task_id": tid, "timeout": 1})
    assert waited["state"] == "TASK_STATE_COMPLETED" and waited["timed_out"] is False
    listed = await tool(alice, "tasks", {"action": "list", "state": "all"})
    assert [t["task_id"] for t in listed["tasks"]] == [tid]  # type: ignore[union-attr]

    short = (
        await alice.rpc("ReportTask", hub_pb2.ReportTaskRequest(kind=task_pb2.TASK_EVENT_KIND_STARTED, ttl_seconds=0.3))
    ).task.task_id
    waited_short = await alice.rpc("WaitTask", hub_pb2.WaitTaskRequest(task_id=short, timeout_seconds=5))
    assert waited_short.task.state == task_pb2.TASK_STATE_EXPIRED and not waited_short.timed_out


async def test_the_audit_log_is_for_the_operator_only(hub: RunningHub) -> None:
    alice = await register(hub.target, "alice")
    with pytest.raises(errors.PermissionDenied, match="operator token"):
        await alice.rpc("ListAudit", hub_pb2.ListAuditRequest())
    async with grpc.aio.insecure_channel(hub.target) as ch:
        stub = hub_pb2_grpc.HubServiceStub(ch)
        with pytest.raises(errors.Unauthenticated):
            await call(stub.ListAudit(hub_pb2.ListAuditRequest()))
        with pytest.raises(errors.Unauthenticated):
            await call(stub.ListAudit(hub_pb2.ListAuditRequest(), metadata=(("authorization", "Bearer wrong"),)))
    assert [r.kind for r in await list_audit(hub, kind="agent_registered")] == ["agent_registered"]


async def test_list_audit_after_the_last_possible_id_is_empty_and_beyond_it_out_of_range(hub: RunningHub) -> None:
    await register(hub.target, "audited")
    assert await list_audit(hub, after_id=0)
    assert await list_audit(hub, after_id=2**63 - 1) == []  # SQLite ids stop at 2**63 - 1
    for after_id in (2**63, 2**64 - 1):  # uint64 on the wire: beyond every id SQLite can hold
        with pytest.raises(errors.OutOfRange):
            await list_audit(hub, after_id=after_id)


async def test_the_tasks_tool_cancels_with_the_rules_of_cancel_task(
    trio: tuple[Participant, Participant, Participant],
) -> None:
    alice, bob, carol = trio

    async def tool(p: Participant, args: dict[str, object]) -> dict[str, object]:
        resp = await p.rpc("CallTool", hub_pb2.CallToolRequest(name="tasks", arguments_json=json.dumps(args)))
        return dict(json.loads(resp.result_json))

    schema = next(t for t in (await bob.rpc("ListTools", hub_pb2.ListToolsRequest())).tools if t.name == "tasks")
    assert "cancel" in json.loads(schema.parameters_json_schema)["properties"]["action"]["enum"]
    cid = await open_channel(alice, "conversation", [bob])
    started = await alice.rpc(
        "ReportTask", hub_pb2.ReportTaskRequest(kind=task_pb2.TASK_EVENT_KIND_STARTED, title="crunch", channel_id=cid)
    )
    tid = started.task.task_id
    with pytest.raises(errors.PermissionDenied, match="not yours"):  # carol is not in the task's channel
        await tool(carol, {"action": "cancel", "task_id": tid, "reason": "mine now"})
    with pytest.raises(errors.InvalidArgument, match="needs task_id"):
        await tool(bob, {"action": "cancel"})
    cancelled = await tool(bob, {"action": "cancel", "task_id": tid, "reason": "no longer needed"})
    assert cancelled["cancel_requested"] is True and cancelled["envelope_id"]
    request = await alice.next_of("ag2.task.cancel_request")
    assert data_of(request) == {"task_id": tid, "reason": "no longer needed"}
    assert request.sender_id == bob.agent_id
    await alice.rpc("ReportTask", hub_pb2.ReportTaskRequest(task_id=tid, kind=task_pb2.TASK_EVENT_KIND_CANCELLED))
    # Cancelling a task that ended is a no-op, as CancelTask's: the task as it ended, nothing posted.
    again = await tool(bob, {"action": "cancel", "task_id": tid})
    assert again["envelope_id"] == "" and again["task_id"] == tid and again["state"] == "TASK_STATE_CANCELLED"
