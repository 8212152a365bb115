"""Governance caches forget only the identity that changed (hubsvc/governance/governor.py)."""

from __future__ import annotations

from agentnet.v1 import identity_pb2

from hubsvc.governance.governor import Derived, Governance
from hubsvc.governance.policy import Effective, Policy


def test_forgetting_one_identity_keeps_the_others_cached() -> None:
    policy = Policy.model_validate({"default": {"rate": {"posts_per_second": 5}}})
    governance = Governance(policy)
    records = {n: identity_pb2.AgentRecord(agent_id=n, passport=identity_pb2.Passport(name=n)) for n in ("a", "b")}
    derived: list[str] = []

    def derive(name: str, effective: Effective) -> int:
        derived.append(name)
        return len(effective.rules)

    values = {n: Derived(governance, records.get, lambda e, n=n: derive(n, e)) for n in ("a", "b")}
    for n in ("a", "b"):
        values[n].get(n)
    assert derived == ["a", "b"]
    governance.forget("a")
    assert values["b"].get("b") == 1 and derived == ["a", "b"]  # b's value was not recomputed
    assert values["a"].get("a") == 1 and derived == ["a", "b", "a"]  # a's was
    governance.replace(Policy())  # a new policy: every value is derived again
    values["b"].get("b")
    assert derived == ["a", "b", "a", "b"]
