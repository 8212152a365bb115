"""Enforcement of the policy's rules and the arbiter over the hub's live state.

The checks themselves are pure (:mod:`hubsvc.governance.checks`); this part supplies
what they need — the actor's effective rules, the peers it reaches, how many channels
and tasks it holds (counted from the live channels and the task mirror, which are
rebuilt from storage at start, so the counts are right after a restart) — consults the
arbiter, and audits every refusal as ``action_refused`` (who, what, which rule).
Posts refused by a rule are audited by :mod:`hubsvc.core.posts` as ``post_refused``.

The counts from memory are exact on one hub; with several replicas on one store, each one knows
the others' opens and starts only once the change feed tells it. So a check that passes here
hands back a :class:`Slot`: the limit goes into the row the commit writes (``hold_limit``), the
shared store checks it atomically with the write (docs/scale-out.md "Governance limits across
replicas"), and a store refusal (:class:`~hubsvc.storage.AtLimit`) becomes the same audited
``LimitExceeded`` the count here gives.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from agentnet.v1 import identity_pb2

from hubsvc.core.channel import ChannelRuntime
from hubsvc.core.options import HubOptions
from hubsvc.core.registry import Registry
from hubsvc.core.tasks import TaskMirror
from hubsvc.governance import checks
from hubsvc.governance.arbiter import Action, Arbiter, Decision, consult
from hubsvc.governance.governor import Governance
from hubsvc.governance.policy import Effective
from hubsvc.storage import AtLimit
from netkernel.envelope import Envelope
from netkernel.errors import AgentNetError, RuleDenied, Unauthenticated, Unavailable
from netkernel.wire import PASSPORT_KIND

Audit = Callable[[str, str, str, dict[str, Any]], None]
_VERB_TYPE = {"open_channel": "open", "delegate": "delegate in", "invoke": "call an agent through"}
"""How a refusal of a channel type words each action."""
_VERB_PEER = {"open_channel": "invite", "delegate": "delegate to", "invoke": "call"}
"""How a refusal of a peer words each action."""
_NOUN_INBOUND = {"open_channel": "invitations", "delegate": "delegations", "invoke": "calls"}
"""How a target's inbound refusal words each action."""


@dataclass(frozen=True, slots=True)
class Slot:
    """One of an identity's counted slots (an open channel, a running task) that a check granted."""

    limit: int | None
    """The limit the commit's row carries for the store to check (None: no limit applies)."""
    refuse: Callable[[int], AgentNetError]
    """The audited refusal to raise when the store found the identity already holding this many."""


NO_SLOT_LIMIT = Slot(None, lambda held: Unavailable(f"the store refused a slot no limit counts ({held} held); retry."))
"""The slot of an action no limit counts."""


def _kind(record: identity_pb2.AgentRecord) -> str:
    return PASSPORT_KIND.by_value.get(record.passport.kind, "agent")


def peer_of(record: identity_pb2.AgentRecord) -> checks.Peer:
    """What rules and the arbiter see of an identity."""
    return checks.Peer(record.passport.name, _kind(record), tuple(record.resume.claimed_capabilities))


class Enforcement:
    """Applies each identity's effective rules (and the arbiter) to the actions it starts."""

    def __init__(
        self,
        registry: Registry,
        governance: Governance,
        tasks: TaskMirror,
        options: HubOptions,
        audit: Audit,
        *,
        live_channels: Callable[[], Iterable[ChannelRuntime]],
        arbiter: Arbiter | None = None,
    ) -> None:
        self._registry = registry
        self._governance = governance
        self._tasks = tasks
        self._options = options
        self._audit = audit
        self._live_channels = live_channels
        self.arbiter = arbiter
        self._starting: dict[str, int] = {}
        """Tasks whose STARTED report is being written, per owner (counted with the running ones)."""

    def rules_of(self, agent_id: str) -> Effective:
        """The effective rules of a registered identity."""
        return self._governance.effective(self._registry.get(agent_id).record)

    def refused(self, action: str, actor: str, subject: str, err: AgentNetError) -> AgentNetError:
        """Audit a refusal as ``action_refused`` and return it (for ``raise``)."""
        self._audit(
            "action_refused",
            actor,
            subject,
            {
                "action": action,
                "reason": err.reason,
                "rule": err.metadata.get("rule", ""),
                "check": err.metadata.get("check", ""),
                "message": err.message,
            },
        )
        return err

    async def _consult(self, decision: Decision) -> None:
        if self.arbiter is not None:
            await consult(self.arbiter, decision, self._options.arbiter_timeout)

    # -- registration -----------------------------------------------------------------

    async def register(
        self, passport: identity_pb2.Passport, resume: identity_pb2.Resume, *, by_operator: bool
    ) -> None:
        """Refuse a registration the policy's ``registration`` section (or the arbiter) does not allow.

        Closed registration without the operator token is UNAUTHENTICATED; a passport the
        ``allow`` selector does not pick, or the arbiter refuses, is RULE_DENIED. The operator
        registers anyone."""
        if by_operator:
            return
        kind = PASSPORT_KIND.by_value.get(passport.kind, "agent")
        rule = self._governance.policy.registration
        try:
            if not rule.open:
                raise Unauthenticated(
                    "registration on this hub is closed (policy registration.open is false): only the operator "
                    "registers identities — call Register / RegisterHuman with the operator token as "
                    "'authorization: Bearer <token>'.",
                    metadata={"rule": "registration", "check": "registration.open"},
                )
            if rule.allow is not None and not rule.allow.matches(passport.name, kind, resume.claimed_capabilities):
                raise RuleDenied(
                    f"the policy's registration rule does not let {passport.name!r} (kind {kind}) register; "
                    f"it allows {checks.describe_selector(rule.allow)}.",
                    metadata={"rule": "registration", "check": "registration.allow"},
                )
            await self._consult(
                Decision("register", passport.name, kind, capabilities=tuple(resume.claimed_capabilities))
            )
        except AgentNetError as err:
            raise self.refused("register", "", passport.name, err) from None

    # -- channels -----------------------------------------------------------------------

    async def open_channel(
        self, initiator: str, action: Action, channel_type: str, members: list[str], ttl: float | None, depth: int
    ) -> tuple[float | None, Slot]:
        """Check a channel ``initiator`` opens (``action``: open_channel, delegate or invoke) with
        ``members`` invited; returns its TTL (None = the hub's default) and the open-channel slot
        it takes. (Delegate and InvokeAgent check the depth they reach before, with
        :meth:`check_call_depth`; the seed's ``depth`` is for the arbiter.)

        Order: channel type, peers, the arbiter, then the count of channels it holds — last,
        with no await after it, so concurrent opens on this replica cannot both take the last
        slot (the store checks the slot's limit against every replica's opens)."""
        try:
            try:
                rules, peers, me = self._check_identities(initiator, action, channel_type, members)
            except RuleDenied:
                # With replicas this one's copies of the identities may lag a rule changed through another
                # a moment ago (the change feed brings it soon after): a refusal is decided on the store's
                # records, read again first. Opens that pass read nothing.
                for agent_id in dict.fromkeys([initiator, *members]):
                    await self._registry.reload(agent_id)
                rules, peers, me = self._check_identities(initiator, action, channel_type, members)
            await self._consult(
                Decision(
                    action,
                    me.name,
                    me.kind,
                    actor_id=initiator,
                    capabilities=me.capabilities,
                    targets=tuple(p.name for p in peers),
                    channel_type=channel_type,
                    depth=depth,
                )
            )
            ttl = checks.channel_ttl(rules, ttl)
            if rules.limit("max_open_channels")[0] is not None:
                held = sum(1 for ch in self._live_channels() if ch.spec.initiator == initiator and not ch.is_terminal)
                checks.check_count(rules, "max_open_channels", held, "open channels")
        except AgentNetError as err:
            subject = ",".join(self._registry.name_for(m) for m in members)
            raise self.refused(action, initiator, subject, err) from None
        return ttl, self._slot(
            rules,
            "max_open_channels",
            "open channels",
            action,
            initiator,
            lambda: ",".join(map(self._registry.name_for, members)),
        )

    def _check_identities(
        self, initiator: str, action: Action, channel_type: str, members: list[str]
    ) -> tuple[Effective, list[checks.Peer], checks.Peer]:
        """The checks of an open that read the identities' own records: the initiator's channel types
        and peers, each member's say over who reaches it (AG2's inbound_from); RuleDenied when one
        refuses. Returns the initiator's rules, the members as peers and the initiator as one."""
        rules = self.rules_of(initiator)
        checks.check_channel_type(rules, channel_type, _VERB_TYPE.get(action, "open"))
        peers = [peer_of(self._registry.get(m).record) for m in members]
        checks.check_peers(rules, peers, _VERB_PEER.get(action, "invite"))
        me = peer_of(self._registry.get(initiator).record)
        inbound = _NOUN_INBOUND.get(action, "invitations")
        for member, peer in zip(members, peers, strict=True):
            if member != initiator:
                checks.check_inbound(self.rules_of(member), peer, me, inbound)
        return rules, peers, me

    def _slot(
        self, rules: Effective, field: str, what: str, action: str, actor: str, subject: Callable[[], str]
    ) -> Slot:
        """The slot a passed ``limits.<field>`` check grants (its refusal audited like the check's own)."""
        limit, rule_id = rules.limit(field)
        if limit is None:
            return NO_SLOT_LIMIT

        def refuse(held: int) -> AgentNetError:
            err = checks.limit_exceeded(rule_id, int(limit), field, max(held, int(limit)), what)
            return self.refused(action, actor, subject(), err)

        return Slot(int(limit), refuse)

    # -- depth ------------------------------------------------------------------------

    def reachable_peers(self, initiator: str, action: Action) -> list[str]:
        """Names of the live identities (not ``initiator``) its rules let it reach by ``action``, sorted."""
        rules = self.rules_of(initiator)
        reach = _VERB_PEER.get(action, "invite")
        names = []
        for entry in self._registry.entries():
            if entry.agent_id == initiator:
                continue
            try:
                checks.check_peers(rules, [peer_of(entry.record)], reach)
            except RuleDenied:
                continue
            names.append(entry.name)
        return sorted(names)

    def depth_limit(self, agent_id: str) -> tuple[int, str]:
        """The deepest envelope depth ``agent_id`` may post, and the rule that set it ("" = the hub's)."""
        if agent_id not in self._registry:
            return self._options.max_depth, ""
        return checks.depth_limit(self.rules_of(agent_id), self._options.max_depth)

    def check_call_depth(self, action: Action, agent_id: str, depth: int, subject: str) -> None:
        """The depth rule (:func:`~hubsvc.governance.checks.check_depth`, as admission asks it of every
        envelope) for a call about to start: Delegate or InvokeAgent reaching ``depth`` (a refusal is
        audited as ``action_refused``)."""
        try:
            what = "this A2A call" if action == "invoke" else "delegating"
            checks.check_depth(self.depth_limit(agent_id), depth, what)
        except AgentNetError as err:
            raise self.refused(action, agent_id, subject, err) from None

    # -- posts --------------------------------------------------------------------------

    async def post(self, sender_id: str, env: Envelope, channel: ChannelRuntime | None) -> None:
        """Ask the arbiter about a post (the caller audits a refusal as ``post_refused``)."""
        if self.arbiter is None:
            return
        me = peer_of(self._registry.get(sender_id).record)
        audience = tuple(self._registry.name_for(a) for a in env.audience or ())
        await self._consult(
            Decision(
                "post",
                me.name,
                me.kind,
                actor_id=sender_id,
                capabilities=me.capabilities,
                targets=audience,
                channel_type=channel.spec.type if channel is not None else "",
                channel_id=env.channel_id,
                event_type=env.event_type,
                depth=env.depth,
            )
        )

    # -- tasks --------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def task_slot(self, owner: str) -> AsyncIterator[Slot]:
        """Hold one of ``owner``'s ``max_running_tasks`` slots while its STARTED report is written
        (LimitExceeded, audited, when none is free). The body writes the start with the slot's
        limit (``TaskRow.hold_limit``); a store refusal of it (:class:`AtLimit`) is the same refusal."""
        rules = self.rules_of(owner)
        if rules.limit("max_running_tasks")[0] is not None:
            running = sum(1 for t in self._tasks.live() if t.owner_id == owner) + self._starting.get(owner, 0)
            try:
                checks.check_count(rules, "max_running_tasks", running, "running tasks")
            except AgentNetError as err:
                raise self.refused("start_task", owner, owner, err) from None
        slot = self._slot(rules, "max_running_tasks", "running tasks", "start_task", owner, lambda: owner)
        self._starting[owner] = self._starting.get(owner, 0) + 1
        try:
            yield slot
        except AtLimit as full:
            raise slot.refuse(full.held) from None
        finally:
            left = self._starting[owner] - 1
            if left:
                self._starting[owner] = left
            else:
                del self._starting[owner]
