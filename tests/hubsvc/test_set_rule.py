"""Rules changed after registration (SetRule) and read back (GetRule): validated like the policy
file's rules, audited as ``rule_set``, enforced from the identity's next call — on every replica
(on Redis the change feed brings the new record to the other replica by itself)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agentnet.v1 import hub_pb2

from hubsvc.governance.policy import Policy
from netkernel.errors import InvalidArgument, NotFound, PermissionDenied, RuleDenied
from tests.hubsvc.harness import (
    OPERATOR_TOKEN,
    Participant,
    RunningHub,
    assert_eventually,
    list_audit,
    register,
    running_hub,
)

ONLY_CONSULTING = {"access": {"channel_types": ["consulting"]}}


def as_operator(hub: RunningHub, anyone: Participant) -> Participant:
    """A caller holding the operator token (the record only names the participant object)."""
    return Participant(hub.target, anyone.record, OPERATOR_TOKEN)


def open_request(target: Participant, type: str = "conversation") -> hub_pb2.OpenChannelRequest:
    return hub_pb2.OpenChannelRequest(type=type, targets=[target.agent_id])


async def set_rule(caller: Participant, rule: dict[str, Any] | None, agent_id: str = "") -> hub_pb2.SetRuleResponse:
    text = json.dumps(rule) if rule is not None else ""
    response: hub_pb2.SetRuleResponse = await caller.rpc(
        "SetRule", hub_pb2.SetRuleRequest(agent_id=agent_id, rule_json=text)
    )
    return response


async def test_the_operator_narrows_a_rule_and_the_next_call_obeys_it(tmp_path: Path) -> None:
    async with running_hub(tmp_path / "hub.db") as hub:
        alice = await register(hub.target, "alice")
        bob = await register(hub.target, "bob")
        operator = as_operator(hub, alice)
        await alice.rpc("OpenChannel", open_request(bob))  # allowed before
        updated = await set_rule(operator, ONLY_CONSULTING, alice.agent_id)
        assert json.loads(updated.agent.rule_json) == ONLY_CONSULTING
        with pytest.raises(RuleDenied, match="rule 'own' does not let you open a 'conversation' channel"):
            await alice.rpc("OpenChannel", open_request(bob))
        await alice.rpc("OpenChannel", open_request(bob, "consulting"))
        records = await assert_eventually(lambda: list_audit(hub, kind="rule_set"))
        assert [(r.actor_id, r.subject_id) for r in records] == [("operator", alice.agent_id)]
        assert json.loads(records[0].detail_json) == {"rule": ONLY_CONSULTING}

        await set_rule(alice, None)  # an agent sets (here: removes) its own rule, as in AG2
        await alice.rpc("OpenChannel", open_request(bob))


async def test_set_rule_refuses_others_invalid_rules_and_unknown_identities(tmp_path: Path) -> None:
    async with running_hub(tmp_path / "hub.db") as hub:
        alice = await register(hub.target, "alice")
        bob = await register(hub.target, "bob")
        with pytest.raises(PermissionDenied, match="your own rule"):
            await set_rule(bob, ONLY_CONSULTING, alice.agent_id)
        with pytest.raises(PermissionDenied, match="your own rule"):
            await bob.rpc("GetRule", hub_pb2.GetRuleRequest(agent_id=alice.agent_id))
        with pytest.raises(InvalidArgument, match=r"not a valid rule: access\.chanel_types"):
            await set_rule(alice, {"access": {"chanel_types": ["consulting"]}})
        with pytest.raises(InvalidArgument, match="needs agent_id"):
            await set_rule(as_operator(hub, alice), ONLY_CONSULTING)
        with pytest.raises(NotFound):
            await set_rule(as_operator(hub, alice), ONLY_CONSULTING, "no-such-agent")
        await alice.rpc("OpenChannel", open_request(bob))  # every refusal changed nothing


async def test_get_rule_shows_every_rule_that_applies_and_what_they_combine_to(tmp_path: Path) -> None:
    policy = Policy.model_validate(
        {
            "default": {"limits": {"max_open_channels": 10}},
            "rules": [{"id": "bots", "match": {"names": ["ali*"]}, "rule": {"rate": {"posts_per_second": 5}}}],
        }
    )
    async with running_hub(tmp_path / "hub.db", policy=policy) as hub:
        alice = await register(hub.target, "alice")
        await set_rule(alice, {"limits": {"max_open_channels": 3}, "inbox": {"max_pending": 50}})
        mine = await alice.rpc("GetRule", hub_pb2.GetRuleRequest())
        operators = await as_operator(hub, alice).rpc("GetRule", hub_pb2.GetRuleRequest(agent_id=alice.agent_id))
        assert mine == operators
        assert [r.id for r in mine.rules] == ["default", "bots", "own"]
        assert json.loads(mine.rule_json) == {"limits": {"max_open_channels": 3}, "inbox": {"max_pending": 50}}
        assert json.loads(mine.effective_json) == {
            "limits": {"max_open_channels": {"value": 3, "rule": "own"}},
            "rate": {"posts_per_second": 5.0, "burst": 5, "rule": "bots"},
            "inbox": {"max_pending": 50, "rule": "own"},
        }


async def test_a_rule_set_on_one_replica_is_enforced_on_the_other(tmp_path: Path) -> None:
    db = tmp_path / "hub.db"
    async with running_hub(db) as hub_a, running_hub(db) as hub_b:

        async def fed(*agent_ids: str) -> None:
            """SQLite has no change feed (one process per file): call what the feed calls on Redis."""
            if hub_b.core.store.feed is None:
                await hub_b.core.apply_remote(agents=agent_ids)

        alice = await register(hub_a.target, "alice")
        bob = await register(hub_a.target, "bob")
        await fed(alice.agent_id, bob.agent_id)
        alice_on_b = Participant(hub_b.target, alice.record, alice.credential)
        await assert_eventually(lambda: alice_on_b.rpc("GetRule", hub_pb2.GetRuleRequest()))  # B knows alice
        await set_rule(as_operator(hub_a, alice), ONLY_CONSULTING, alice.agent_id)
        await fed(alice.agent_id)

        async def refused_on_b() -> bool:
            try:
                await alice_on_b.rpc("OpenChannel", open_request(bob))
            except RuleDenied as refused:
                return "rule 'own'" in refused.message
            raise AssertionError("replica B still let alice open a conversation")

        await assert_eventually(refused_on_b)
