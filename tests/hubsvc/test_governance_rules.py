"""The hub enforces its policy's rules (docs/governance.md "Rules", "Who may register"), audited."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import pytest
from agentnet.v1 import a2a_pb2, hub_pb2, hub_pb2_grpc, identity_pb2, task_pb2

from hubsvc.core.options import HubOptions
from hubsvc.governance.policy import Policy
from netkernel.errors import (
    DepthExceeded,
    InvalidArgument,
    LimitExceeded,
    NotFound,
    RuleDenied,
    Unauthenticated,
)
from tests.hubsvc.harness import (
    OPERATOR_TOKEN,
    RPC_DEADLINE,
    Participant,
    RunningHub,
    assert_eventually,
    call,
    list_audit,
    open_channel,
    register,
    running_hub,
)
from tests.procs import ROOT, start_service

Q = "ag2.msg.text"


def policy(**data: Any) -> Policy:
    """A policy from the same dict a policy file holds."""
    return Policy.model_validate(data)


async def audited(hub: RunningHub, kind: str, **detail: str) -> dict[str, Any]:
    """The first audit record of ``kind`` whose detail holds ``detail`` (waits for its group commit)."""

    async def find() -> dict[str, Any] | None:
        for record in await list_audit(hub, kind=kind, limit=1000):
            data = json.loads(record.detail_json)
            if all(data.get(k) == v for k, v in detail.items()):
                return {"actor_id": record.actor_id, "subject_id": record.subject_id, **data}
        return None

    found: dict[str, Any] = await assert_eventually(find)
    return found


async def register_raw(
    hub: RunningHub, name: str, *, human: bool = False, token: str = "", rule: dict[str, Any] | None = None
) -> Participant:
    """Register with an optional bearer token and own rule."""
    metadata = (("authorization", f"Bearer {token}"),) if token else None
    async with grpc.aio.insecure_channel(hub.target) as ch:
        stub = hub_pb2_grpc.HubServiceStub(ch)
        passport = identity_pb2.Passport(name=name)
        rule_json = json.dumps(rule) if rule is not None else ""
        if human:
            pending = stub.RegisterHuman(
                hub_pb2.RegisterHumanRequest(passport=passport, rule_json=rule_json),
                metadata=metadata,
                timeout=RPC_DEADLINE,
            )
        else:
            pending = stub.Register(
                hub_pb2.RegisterRequest(passport=passport, rule_json=rule_json), metadata=metadata, timeout=RPC_DEADLINE
            )
        response = await call(pending)
    return Participant(hub.target, response.agent, response.credential)


def open_request(type: str, *targets: Participant, **kwargs: Any) -> hub_pb2.OpenChannelRequest:
    return hub_pb2.OpenChannelRequest(type=type, targets=[t.agent_id for t in targets], **kwargs)


# -- access ---------------------------------------------------------------------------


async def test_channel_types_rule_refuses_other_types_everywhere_and_allows_its_own(tmp_path: Path) -> None:
    rules = policy(
        rules=[
            {"id": "interns", "match": {"names": ["intern-*"]}, "rule": {"access": {"channel_types": ["consulting"]}}}
        ]
    )
    async with running_hub(tmp_path / "hub.db", policy=rules) as hub:
        intern = await register(hub.target, "intern-1")
        senior = await register(hub.target, "senior")
        await senior.connect()
        with pytest.raises(RuleDenied, match="rule 'interns' does not let you open a 'conversation' channel") as err:
            await intern.rpc("OpenChannel", open_request("conversation", senior))
        assert err.value.metadata["rule"] == "interns"
        assert err.value.metadata["check"] == "access.channel_types"
        assert "it allows: consulting" in err.value.message
        # The same rule through the channels tool (CallTool).
        args = json.dumps({"action": "open", "type": "discussion", "target": ["senior"]})
        with pytest.raises(RuleDenied, match="'discussion' channel"):
            await intern.rpc("CallTool", hub_pb2.CallToolRequest(name="channels", arguments_json=args))
        # What the rule allows, and identities it does not match, go through.
        opened = await intern.rpc("OpenChannel", open_request("consulting", senior))
        assert opened.channel.type == "consulting"
        await senior.rpc("OpenChannel", open_request("conversation", intern))
        row = await audited(hub, "action_refused", action="open_channel", check="access.channel_types")
        assert row["actor_id"] == intern.agent_id
        assert row["rule"] == "interns" and row["reason"] == "RULE_DENIED"
        assert row["subject_id"] == "senior"


async def test_peer_selector_limits_whom_an_identity_invites_delegates_to_and_calls(tmp_path: Path) -> None:
    rules = policy(
        rules=[
            {
                "id": "desk",
                "match": {"kinds": ["human"]},
                "rule": {"access": {"peers": {"names": ["helper-*"], "capabilities": ["triage"]}}},
            }
        ]
    )
    async with running_hub(tmp_path / "hub.db", policy=rules) as hub:
        clerk = await register(hub.target, "clerk", human=True)
        helper = await register(hub.target, "helper-1")
        stranger = await register(hub.target, "stranger")
        triager = await register(hub.target, "nurse", capabilities=["triage"])
        for p in (helper, triager):
            await p.connect()
            p.auto_accept_invites = True
        with pytest.raises(RuleDenied, match="rule 'desk' does not let you invite 'stranger'") as err:
            await clerk.rpc("OpenChannel", open_request("discussion", helper, stranger))
        assert err.value.metadata == {"rule": "desk", "check": "access.peers", "peer": "stranger"}
        assert "named helper-*; or claiming triage" in err.value.message
        with pytest.raises(RuleDenied, match="does not let you delegate to 'stranger'"):
            await clerk.rpc("Delegate", hub_pb2.DelegateRequest(target="stranger", prompt="hi"))
        # An unknown target's error lists only the peers the rules let the caller delegate to.
        with pytest.raises(NotFound) as unknown:
            await clerk.rpc("Delegate", hub_pb2.DelegateRequest(target="helper-9", prompt="hi"))
        assert unknown.value.message.endswith("; you may delegate to: helper-1, nurse.")
        await stranger.rpc("SetA2ASettings", hub_pb2.SetA2ASettingsRequest(a2a=a2a_pb2.A2ASettings(enabled=True)))
        with pytest.raises(RuleDenied, match="does not let you call 'stranger'"):
            await clerk.rpc("InvokeAgent", hub_pb2.InvokeAgentRequest(agent_id=stranger.agent_id, message="hi"))
        # Peers the selector picks, by name or by capability.
        await clerk.rpc("OpenChannel", open_request("discussion", helper, triager))
        for action in ("open_channel", "delegate", "invoke"):
            row = await audited(hub, "action_refused", action=action, check="access.peers")
            assert row["rule"] == "desk" and row["actor_id"] == clerk.agent_id


async def test_inbound_from_limits_who_may_open_invite_delegate_to_and_call_an_identity(tmp_path: Path) -> None:
    """AG2's ``access.inbound_from``: the target's rule picks who may reach it (the opener's own rules allow it)."""
    async with running_hub(tmp_path / "hub.db") as hub:
        vip = await register(hub.target, "vip")
        inbound = json.dumps({"access": {"inbound_from": {"names": ["assistant-*"]}}})
        await vip.rpc("SetRule", hub_pb2.SetRuleRequest(rule_json=inbound))
        assistant = await register(hub.target, "assistant-1")
        stranger = await register(hub.target, "stranger")
        other = await register(hub.target, "other")
        await vip.rpc("SetA2ASettings", hub_pb2.SetA2ASettingsRequest(a2a=a2a_pb2.A2ASettings(enabled=True)))
        with pytest.raises(RuleDenied, match="'vip' does not accept invitations from you") as err:
            await stranger.rpc("OpenChannel", open_request("discussion", other, vip))
        assert err.value.code == grpc.StatusCode.PERMISSION_DENIED
        assert err.value.metadata == {"rule": "own", "check": "access.inbound_from", "peer": "vip"}
        assert "its rule 'own' accepts peers named assistant-*" in err.value.message
        with pytest.raises(RuleDenied, match="'vip' does not accept delegations from you"):
            await stranger.rpc("Delegate", hub_pb2.DelegateRequest(target="vip", prompt="hi"))
        with pytest.raises(RuleDenied, match="'vip' does not accept calls from you"):
            await stranger.rpc("InvokeAgent", hub_pb2.InvokeAgentRequest(agent_id=vip.agent_id, message="hi"))
        tool = hub_pb2.CallToolRequest(
            name="channels", arguments_json=json.dumps({"action": "open", "type": "consulting", "target": "vip"})
        )
        with pytest.raises(RuleDenied, match="'vip' does not accept invitations from you"):
            await stranger.rpc("CallTool", tool)
        await assistant.rpc("OpenChannel", open_request("consulting", vip))  # picked by the selector
        await vip.rpc(
            "OpenChannel", open_request("consulting", stranger)
        )  # it restricts who reaches it, not whom it reaches
        for action in ("open_channel", "delegate", "invoke"):
            row = await audited(hub, "action_refused", action=action, check="access.inbound_from")
            assert row["actor_id"] == stranger.agent_id and row["reason"] == "RULE_DENIED"


async def test_resume_change_is_seen_by_capability_rules(tmp_path: Path) -> None:
    """Governance forgets an identity's cached rules when its record changes."""
    rules = policy(
        rules=[{"id": "bots", "match": {"capabilities": ["bot"]}, "rule": {"access": {"channel_types": []}}}]
    )
    async with running_hub(tmp_path / "hub.db", policy=rules) as hub:
        a = await register(hub.target, "a")
        b = await register(hub.target, "b")
        await a.rpc("OpenChannel", open_request("conversation", b))
        await a.rpc("SetResume", hub_pb2.SetResumeRequest(resume=identity_pb2.Resume(claimed_capabilities=["bot"])))
        with pytest.raises(RuleDenied, match=r"rule 'bots'.*it allows: no channel types"):
            await a.rpc("OpenChannel", open_request("conversation", b))


# -- limits ---------------------------------------------------------------------------


async def test_max_open_channels_counts_pending_and_open_channels_across_a_restart(tmp_path: Path) -> None:
    rules = policy(default={"limits": {"max_open_channels": 1}})
    db = tmp_path / "hub.db"
    async with running_hub(db, policy=rules) as hub:
        a = await register(hub.target, "a")
        b = await register(hub.target, "b")
        credentials = (a.record, a.credential, b.record, b.credential)
        first = await a.rpc("OpenChannel", open_request("conversation", b))  # PENDING: b never acks
        with pytest.raises(LimitExceeded, match="at most 1 open channels and you have 1") as err:
            await a.rpc("OpenChannel", open_request("conversation", b))
        assert err.value.metadata["rule"] == "default" and err.value.metadata["limit"] == "1"
        await b.rpc("OpenChannel", open_request("conversation", a))  # b's own count is separate
        await audited(hub, "action_refused", action="open_channel", reason="LIMIT_EXCEEDED", rule="default")
    async with running_hub(db, policy=rules) as hub:
        a = Participant(hub.target, credentials[0], credentials[1])
        b = Participant(hub.target, credentials[2], credentials[3])
        with pytest.raises(LimitExceeded):
            await a.rpc("OpenChannel", open_request("conversation", b))
        await a.rpc("CloseChannel", hub_pb2.CloseChannelRequest(channel_id=first.channel.channel_id))
        await a.rpc("OpenChannel", open_request("conversation", b))


async def test_concurrent_opens_and_starts_never_take_more_than_the_limit(tmp_path: Path) -> None:
    rules = policy(default={"limits": {"max_open_channels": 2, "max_running_tasks": 3}})
    async with running_hub(tmp_path / "hub.db", policy=rules) as hub:
        a = await register(hub.target, "a")
        b = await register(hub.target, "b")
        opens = await asyncio.gather(
            *(a.rpc("OpenChannel", open_request("conversation", b)) for _ in range(8)), return_exceptions=True
        )
        assert sum(not isinstance(r, BaseException) for r in opens) == 2
        assert all(isinstance(r, LimitExceeded) for r in opens if isinstance(r, BaseException))
        started = task_pb2.TASK_EVENT_KIND_STARTED
        starts = await asyncio.gather(
            *(a.rpc("ReportTask", hub_pb2.ReportTaskRequest(task_id=f"t{i}", kind=started)) for i in range(8)),
            return_exceptions=True,
        )
        assert sum(not isinstance(r, BaseException) for r in starts) == 3
        assert all(isinstance(r, LimitExceeded) for r in starts if isinstance(r, BaseException))


async def test_max_running_tasks_counts_running_tasks_across_a_restart(tmp_path: Path) -> None:
    rules = policy(rules=[{"id": "small", "match": {"names": ["w*"]}, "rule": {"limits": {"max_running_tasks": 2}}}])
    db = tmp_path / "hub.db"
    started = task_pb2.TASK_EVENT_KIND_STARTED
    async with running_hub(db, policy=rules) as hub:
        w = await register(hub.target, "worker")
        for task_id in ("t1", "t2"):
            await w.rpc("ReportTask", hub_pb2.ReportTaskRequest(task_id=task_id, kind=started))
        with pytest.raises(LimitExceeded, match="rule 'small' allows you at most 2 running tasks") as err:
            await w.rpc("ReportTask", hub_pb2.ReportTaskRequest(task_id="t3", kind=started))
        assert err.value.metadata["check"] == "limits.max_running_tasks"
        await audited(hub, "action_refused", action="start_task", rule="small")
        record, credential = w.record, w.credential
    async with running_hub(db, policy=rules) as hub:
        w = Participant(hub.target, record, credential)
        with pytest.raises(LimitExceeded):
            await w.rpc("ReportTask", hub_pb2.ReportTaskRequest(task_id="t3", kind=started))
        done = task_pb2.TASK_EVENT_KIND_COMPLETED
        await w.rpc("ReportTask", hub_pb2.ReportTaskRequest(task_id="t1", kind=done))
        await w.rpc("ReportTask", hub_pb2.ReportTaskRequest(task_id="t3", kind=started))


async def test_ttl_rules_give_a_default_and_refuse_longer_channels(tmp_path: Path) -> None:
    rules = policy(
        default={"limits": {"default_ttl_seconds": 600}},
        rules=[{"id": "short", "match": {"names": ["s*"]}, "rule": {"limits": {"max_ttl_seconds": 60}}}],
    )
    async with running_hub(tmp_path / "hub.db", policy=rules) as hub:
        a = await register(hub.target, "a")
        s = await register(hub.target, "sam")
        meta = (await a.rpc("OpenChannel", open_request("conversation", s))).channel
        assert meta.expires_at.seconds - meta.created_at.seconds in (599, 600, 601)
        asked = (await a.rpc("OpenChannel", open_request("conversation", s, ttl_seconds=5000))).channel
        assert asked.expires_at.seconds - asked.created_at.seconds in (4999, 5000, 5001)
        with pytest.raises(RuleDenied, match="rule 'short' lets your channels live at most 60s") as err:
            await s.rpc("OpenChannel", open_request("conversation", a, ttl_seconds=61))
        assert err.value.metadata["check"] == "limits.max_ttl_seconds"
        # No TTL asked: the smallest of the default (600) and the maximum (60).
        capped = (await s.rpc("OpenChannel", open_request("conversation", a))).channel
        assert capped.expires_at.seconds - capped.created_at.seconds in (59, 60, 61)


async def test_max_depth_rule_refuses_deeper_posts_and_delegations(tmp_path: Path) -> None:
    rules = policy(rules=[{"id": "shallow", "match": {"names": ["a"]}, "rule": {"limits": {"max_depth": 1}}}])
    async with running_hub(tmp_path / "hub.db", policy=rules) as hub:
        a = await register(hub.target, "a")
        b = await register(hub.target, "b")
        for p in (a, b):
            await p.connect()
        channel_id = await open_channel(a, "conversation", [b])
        await a.post(channel_id, Q, {"text": "one deep"}, depth=1)
        with pytest.raises(DepthExceeded, match=r"exceeds the limit of 1 \(max_depth of rule 'shallow'\)") as err:
            await a.post(channel_id, Q, {"text": "two deep"}, depth=2)
        assert err.value.metadata["rule"] == "shallow"
        await b.post(channel_id, Q, {"text": "b may"}, depth=2)  # the rule governs a only
        row = await audited(hub, "post_refused", reason="DEPTH_EXCEEDED")
        assert row["rule"] == "shallow" and row["check"] == "limits.max_depth"
        # A delegation from a's depth-1 envelope would reach depth 2.
        one_deep = await a.post(channel_id, Q, {"text": "cause"}, depth=1)
        request = hub_pb2.DelegateRequest(target="b", prompt="dig", causation_id=one_deep.envelope_id)
        with pytest.raises(
            DepthExceeded, match=r"delegating would reach depth 2, above the limit of 1 \(max_depth of rule 'shallow'\)"
        ):
            await a.rpc("Delegate", request)
        await audited(hub, "action_refused", action="delegate", reason="DEPTH_EXCEEDED", rule="shallow")


# -- registration -----------------------------------------------------------------------


async def test_closed_registration_needs_the_operator_token(tmp_path: Path) -> None:
    async with running_hub(tmp_path / "hub.db", policy=policy(registration={"open": False})) as hub:
        for human in (False, True):
            with pytest.raises(Unauthenticated, match="registration on this hub is closed") as err:
                await register_raw(hub, f"walk-in-{human}", human=human)
            assert err.value.metadata == {"rule": "registration", "check": "registration.open"}
        member = await register_raw(hub, "member", token=OPERATOR_TOKEN)
        with pytest.raises(Unauthenticated):  # an agent's credential is not the operator's
            await register_raw(hub, "friend", token=member.credential)
        await register_raw(hub, "desk", human=True, token=OPERATOR_TOKEN)
        row = await audited(hub, "action_refused", action="register", check="registration.open")
        assert row["subject_id"] == "walk-in-False" and row["reason"] == "UNAUTHENTICATED"


async def test_registration_allow_selector_picks_who_may_register(tmp_path: Path) -> None:
    rules = policy(registration={"allow": {"names": ["team-*"], "kinds": ["human"]}})
    async with running_hub(tmp_path / "hub.db", policy=rules) as hub:
        await register_raw(hub, "team-a")
        await register_raw(hub, "visitor", human=True)
        with pytest.raises(RuleDenied, match="does not let 'outsider' \\(kind agent\\) register") as err:
            await register_raw(hub, "outsider")
        assert err.value.metadata == {"rule": "registration", "check": "registration.allow"}
        await register_raw(hub, "outsider", token=OPERATOR_TOKEN)  # the operator is not governed
        await audited(hub, "action_refused", action="register", check="registration.allow")


# -- own rules ----------------------------------------------------------------------------


async def test_own_rule_is_validated_stored_and_only_narrows(tmp_path: Path) -> None:
    rules = policy(default={"access": {"channel_types": ["consulting", "conversation"]}})
    async with running_hub(tmp_path / "hub.db", policy=rules) as hub:
        with pytest.raises(InvalidArgument, match=r"rule_json is not a valid rule: access\.channel_typez") as err:
            await register_raw(hub, "h", human=True, rule={"access": {"channel_typez": []}})
        assert err.value.metadata["field"] == "rule_json"
        with pytest.raises(InvalidArgument, match="rule_json is not a valid rule"):
            await register_raw(hub, "g", rule={"limits": {"max_open_channels": -1}})
        peer = await register(hub.target, "peer")
        own = {"access": {"channel_types": ["consulting", "workflow"]}}
        human = await register_raw(hub, "h", human=True, rule=own)
        agent = await register_raw(hub, "g", rule={"limits": {"max_open_channels": 0}})
        described = await peer.rpc("DescribeAgent", hub_pb2.DescribeAgentRequest(name="h"))
        assert json.loads(described.agent.rule_json) == own
        await human.rpc("OpenChannel", open_request("consulting", peer))
        with pytest.raises(RuleDenied, match="rule 'own' does not let you open a 'conversation'"):
            await human.rpc("OpenChannel", open_request("conversation", peer))
        # Its own rule allows workflow, the operator's default does not: the narrower wins.
        with pytest.raises(RuleDenied, match="rule 'default' does not let you open a 'workflow'"):
            await human.rpc("OpenChannel", open_request("workflow", peer))
        with pytest.raises(LimitExceeded, match="rule 'own' allows you at most 0 open channels"):
            await agent.rpc("OpenChannel", open_request("consulting", peer))


# -- the policy file ------------------------------------------------------------------------


async def test_policy_file_reloads_on_change_and_keeps_the_old_policy_when_invalid(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("default:\n  access:\n    channel_types: [consulting]\n")
    options = HubOptions(policy_poll_interval=0.05)
    async with running_hub(tmp_path / "hub.db", options, policy=path) as hub:
        first = await audited(hub, "policy_loaded")
        a = await register(hub.target, "a")
        b = await register(hub.target, "b")
        with pytest.raises(RuleDenied, match="it allows: consulting"):
            await a.rpc("OpenChannel", open_request("conversation", b))

        path.write_text("default:\n  access:\n    channel_types: [conversation]\n")

        async def conversation_allowed() -> bool:
            await a.rpc("OpenChannel", open_request("conversation", b))
            return True

        await assert_eventually(conversation_allowed)
        replicas = len(hub.replicas)  # each replica reads the file and records its own load

        async def loaded_twice() -> list[dict[str, Any]]:
            loads = [json.loads(r.detail_json) for r in await list_audit(hub, kind="policy_loaded")]
            assert len(loads) == 2 * replicas, loads
            return loads

        records = await assert_eventually(loaded_twice)
        assert {r["sha256"] for r in records[:replicas]} == {first["sha256"]}
        assert {r["sha256"] for r in records[replicas:]} == {records[-1]["sha256"]} != {first["sha256"]}

        path.write_text("default:\n  access:\n    channel_typo: [workflow]\n")
        failed = await audited(hub, "policy_reload_failed")
        assert "channel_typo" in failed["error"] and failed["in_force_sha256"] == records[-1]["sha256"]
        await a.rpc("OpenChannel", open_request("conversation", b))  # the previous policy is still in force
        with pytest.raises(RuleDenied):
            await a.rpc("OpenChannel", open_request("consulting", b))


def test_an_invalid_policy_file_stops_the_hub_at_start(tmp_path: Path) -> None:
    bad = tmp_path / "policy.yaml"
    bad.write_text("rules:\n  - id: x\n    match: {names: [a]}\n    rule: {limits: {max_open_channels: -2}}\n")
    for extra, env in (
        (["--policy", str(bad)], {}),
        ([], {"AGENTNET_HUB_POLICY": str(bad)}),
        (["--policy", str(tmp_path / "missing.yaml")], {}),
    ):
        out = subprocess.run(
            [sys.executable, "-m", "hubsvc", "--port", "0", "--data-dir", str(tmp_path), *extra],
            cwd=ROOT,
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode != 0
        assert "agentnet-hub: policy file" in out.stderr
    assert "rules.0.rule.limits.max_open_channels" in out.stderr or "missing.yaml" in out.stderr


async def test_hub_process_enforces_the_policy_file_and_audits_its_load(tmp_path: Path) -> None:
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"default": {"access": {"channel_types": ["consulting"]}}}))
    hub = start_service("hubsvc", ["--data-dir", str(tmp_path), "--policy", str(path)], cwd=tmp_path)
    try:
        a = await register(hub.target, "a")
        b = await register(hub.target, "b")
        with pytest.raises(RuleDenied, match="rule 'default' does not let you open a 'workflow' channel"):
            await a.rpc("OpenChannel", open_request("workflow", b))
        await a.rpc("OpenChannel", open_request("consulting", b))
        token = (tmp_path / "hub-operator.token").read_text().strip()
        async with grpc.aio.insecure_channel(hub.target) as ch:
            stub = hub_pb2_grpc.HubServiceStub(ch)
            metadata = (("authorization", f"Bearer {token}"),)

            async def loaded() -> list[Any]:
                return list(
                    (await stub.ListAudit(hub_pb2.ListAuditRequest(kind="policy_loaded"), metadata=metadata)).records
                )

            records = await assert_eventually(loaded)
        assert json.loads(records[0].detail_json)["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    finally:
        assert hub.terminate() == 0
