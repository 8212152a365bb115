"""The policy in force, and the rules governing each identity under it.

:class:`Governance` holds the current :class:`~hubsvc.governance.policy.Policy` (replaced
whole when the policy file is reloaded) and answers, for an identity's record, the
:class:`~hubsvc.governance.policy.Effective` rules that govern it — cached per identity
until the policy or the identity changes.
"""

from __future__ import annotations

from agentnet.v1 import identity_pb2

from hubsvc.governance.policy import Effective, Policy, Rule
from netkernel.wire import PASSPORT_KIND


class Governance:
    """The policy in force and the effective rules of each identity."""

    def __init__(self, policy: Policy | None = None) -> None:
        self.policy = policy or Policy()
        self._cache: dict[str, tuple[identity_pb2.AgentRecord, Effective]] = {}

    def replace(self, policy: Policy) -> None:
        """Put ``policy`` in force (every later decision uses it)."""
        self.policy = policy
        self._cache.clear()

    def forget(self, agent_id: str) -> None:
        """Drop what is cached for an identity (its record changed or it left)."""
        self._cache.pop(agent_id, None)

    def effective(self, record: identity_pb2.AgentRecord) -> Effective:
        """The rules governing the identity with this record (default, matching entries, its own rule)."""
        cached = self._cache.get(record.agent_id)
        if cached is not None and cached[0] is record:
            return cached[1]
        own = Rule.model_validate_json(record.rule_json) if record.rule_json else None
        kind = PASSPORT_KIND.by_value.get(record.passport.kind, "agent")
        rules = self.policy.rules_for(record.passport.name, kind, list(record.resume.claimed_capabilities), own)
        effective = Effective(tuple(rules))
        self._cache[record.agent_id] = (record, effective)
        return effective
