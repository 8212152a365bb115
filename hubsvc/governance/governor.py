"""The policy in force, and the rules governing each identity under it.

:class:`Governance` holds the current :class:`~hubsvc.governance.policy.Policy` (replaced
whole when the policy file is reloaded) and answers, for an identity's record, the
:class:`~hubsvc.governance.policy.Effective` rules that govern it — cached per identity
until the policy or the identity changes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from agentnet.v1 import identity_pb2

from hubsvc.governance.policy import Effective, Policy, Rule
from netkernel.wire import PASSPORT_KIND


class Governance:
    """The policy in force and the effective rules of each identity."""

    def __init__(self, policy: Policy | None = None) -> None:
        self.policy = policy or Policy()
        self._cache: dict[str, tuple[identity_pb2.AgentRecord, Effective]] = {}
        self.version = 0
        """Moves on every :meth:`replace`: values derived from effective rules (:class:`Derived`)
        are all recomputed when it moved."""
        self._forgetters: list[Callable[[str], None]] = []
        """Told each identity :meth:`forget` drops (the :class:`Derived` caches drop its value)."""

    def replace(self, policy: Policy) -> None:
        """Put ``policy`` in force (every later decision uses it)."""
        self.policy = policy
        self._cache.clear()
        self.version += 1

    def forget(self, agent_id: str) -> None:
        """Drop what is cached for an identity (its record changed or it left), and only that."""
        self._cache.pop(agent_id, None)
        for forget in self._forgetters:
            forget(agent_id)

    def on_forget(self, forget: Callable[[str], None]) -> None:
        """Call ``forget(agent_id)`` whenever :meth:`forget` drops an identity."""
        self._forgetters.append(forget)

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


T = TypeVar("T")


class Derived(Generic[T]):
    """One value per identity derived from its effective rules (its rate, its inbox cap), cached.

    A hit costs one dict lookup (hot paths ask it per post and per recipient); the whole
    cache is dropped when the policy is replaced (:attr:`Governance.version`), an identity's
    entry when it is forgotten, so it holds at most one entry per registered identity.
    """

    def __init__(
        self,
        governance: Governance,
        record_of: Callable[[str], identity_pb2.AgentRecord | None],
        derive: Callable[[Effective], T | None],
    ) -> None:
        self._governance = governance
        self._record_of = record_of
        self._derive = derive
        self._values: dict[str, T | None] = {}
        self._version = governance.version
        governance.on_forget(self._forget)

    def _forget(self, agent_id: str) -> None:
        self._values.pop(agent_id, None)

    def get(self, agent_id: str) -> T | None:
        """The value for ``agent_id`` (None when no rule sets it, or for an unknown identity)."""
        if self._version != self._governance.version:
            self._values.clear()
            self._version = self._governance.version
        try:
            return self._values[agent_id]
        except KeyError:
            pass
        record = self._record_of(agent_id)
        value = None if record is None else self._derive(self._governance.effective(record))
        if record is not None:
            self._values[agent_id] = value
        return value
