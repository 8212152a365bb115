"""HubCore: the transport-agnostic hub, wired from its parts.

Where things happen:

* :mod:`~hubsvc.core.posts` — a participant's post (the arbiter, idempotent retries, the
  lost-race retry, refusal audit);
* :mod:`~hubsvc.core.admission` — ``Admission.admit``, the one call that admits an envelope
  an identity originates (posts and channel seeds alike): screen, membership, the channel's
  rules (the adapter; the depth rule of :mod:`~hubsvc.governance.checks`), the inbox cap
  (:mod:`~hubsvc.governance.inbox`), the rate token (:mod:`~hubsvc.governance.rate`), then
  stamp → fold → stage, under the channel's lock, so admission order is WAL order;
* :mod:`~hubsvc.core.live_channels` — the live channels: open, close, expire, timers, waits,
  the commit of staged batches (a post is answered and delivered only once committed),
  hydrate and recovery;
* :mod:`~hubsvc.core.sessions` / :mod:`~hubsvc.core.delivery` — Connect sessions:
  resume, replay, per-participant queues, acks and cursor flushing;
* :mod:`~hubsvc.core.expectation_timers` — channel expectations: deadlines armed from the
  WAL, the actions that fire once;
* :mod:`~hubsvc.core.registry`, :mod:`~hubsvc.core.tasks`, :mod:`~hubsvc.core.executions`,
  :mod:`~hubsvc.core.call_tokens` — identities, the task mirror, the A2A execution log and
  its call tokens (:meth:`HubCore.apply_remote` refreshes them when another replica changed them).

HubCore starts and stops them together and exposes the calls the servicer, the
operations and the tests use.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

from agentnet.v1 import a2a_pb2, identity_pb2
from opentelemetry.trace import Tracer

from hubsvc.core.admission import Admission
from hubsvc.core.call_tokens import CallTokens
from hubsvc.core.channel import TERMINAL
from hubsvc.core.enforcement import Enforcement
from hubsvc.core.executions import ExecutionLog
from hubsvc.core.expectation_timers import ExpectationTimers
from hubsvc.core.live_channels import LiveChannels
from hubsvc.core.options import HubOptions
from hubsvc.core.ownership import Ownership
from hubsvc.core.placement import Placement
from hubsvc.core.posts import Posts
from hubsvc.core.registry import Registry
from hubsvc.core.replica_liveness import ReplicaLiveness
from hubsvc.core.replica_sync import ReplicaSync
from hubsvc.core.retention import Retention
from hubsvc.core.sessions import Sessions
from hubsvc.core.steering import SessionSteering
from hubsvc.core.tasks import TaskMirror
from hubsvc.core.util import Clock, audit_row, system_clock
from hubsvc.governance.arbiter import Arbiter
from hubsvc.governance.governor import Derived, Governance
from hubsvc.governance.inbox import Inboxes
from hubsvc.governance.inbox_share import SharedInboxes
from hubsvc.governance.policy import Policy, parse_rule
from hubsvc.governance.rate import RateLimiter
from hubsvc.recorder import NO_RECORDER, Recorder
from hubsvc.storage import HubStore, Writes
from hubsvc.storage.base import Change
from hubsvc.storage.group_commit import GroupCommitStore
from netkernel.errors import InvalidArgument, Timeout, Unauthenticated, Unavailable
from netkernel.tasks import cancel_and_wait

log = logging.getLogger("agentnet.hub")

_PRUNE_EVERY = 30
"""Ownership rounds between two sweeps of followed channels that ended with no member here."""
_PAGE = 1000
"""Channels one store read lists at most (an unregistering identity's live channels)."""
UNREGISTER_WAIT = 5.0
"""Seconds an Unregister answer waits for the other replicas to close the identity's channels they hold."""


def unregistered() -> Unauthenticated:
    """How the streams of an identity that was unregistered end: its credential is revoked, so a client
    must not reconnect with it (UNAUTHENTICATED, metadata ``cause: unregistered``)."""
    return Unauthenticated(
        "this identity was unregistered: its credential is revoked; register again to take part.",
        metadata={"cause": "unregistered"},
    )


class HubCore:
    """The hub: registry, channels, admission, delivery sessions, tasks."""

    def __init__(
        self,
        store: HubStore,
        *,
        options: HubOptions | None = None,
        clock: Clock = system_clock,
        policy: Policy | None = None,
        arbiter: Arbiter | None = None,
        recorder: Recorder = NO_RECORDER,
        tracer: Tracer | None = None,
    ) -> None:
        self.store = store
        self.options = options or HubOptions()
        self.clock = clock
        self.recorder = recorder
        """Where the parts report their metric events (hubsvc/metrics.py; a no-op without metrics)."""
        self.tracer = tracer
        """Records the spans of posts, commits and deliveries (None: tracing off; servicekit/tracing.py)."""
        if isinstance(store, GroupCommitStore):
            store.recorder = recorder
        self.started_at = clock()
        """When this hub was built (the operator's status reports its uptime)."""
        self._background: set[asyncio.Task[Any]] = set()
        self._loops: list[asyncio.Task[None]] = []
        self._gained_unchecked: set[int] = set()
        """Partitions gained in this ownership round, whose channels :meth:`_close_for_the_gone` checks next."""
        leases, liveness = store.partitions, store.liveness
        ownership = (
            Ownership(
                leases,
                liveness,
                ttl=self.options.replica_ttl,
                refresh=self.options.replica_refresh,
                on_gained=self._gained,
                on_lost=self._lost,
                after_round=self._after_ownership_round,
            )
            if leases is not None and liveness is not None
            else None
        )
        self.placement = Placement(ownership, leases, liveness)
        """Which channels this replica holds: all of them, unless the store divides them among replicas."""
        self._holding = False
        """Set once hydrate has loaded this replica's partitions (a partition gained before is in it)."""
        self.governance = Governance(policy)
        """The policy in force (docs/governance.md) and each identity's effective rules."""
        self.registry = Registry(store, clock, on_change=self.governance.forget)
        self.tasks = TaskMirror(store, clock, self.audit, tracer)
        self.executions = ExecutionLog(store, clock)
        self.call_tokens = CallTokens(store, self.executions, self.options, clock)
        record_of = self.registry.record_of
        self.inboxes = Inboxes(Derived(self.governance, record_of, lambda e: e.inbox()).get, self.registry.name_for)
        """What waits for each identity (the inbox cap, docs/governance.md "Inbox caps")."""
        self.rate = RateLimiter(
            clock,
            self.audit,
            Derived(self.governance, record_of, lambda e: e.rate()).get,
            audit_window=self.options.rate_audit_window,
            shared=store.rate_buckets,
        )
        """The posts-per-second token buckets (docs/governance.md "Rate limits"); the store's, shared by
        its replicas, when it has them."""
        self.rules = Enforcement(
            self.registry,
            self.governance,
            self.tasks,
            self.options,
            self.audit,
            live_channels=lambda: self.channels.live(),
            arbiter=arbiter,
        )
        """The policy's rules and the arbiter applied to what identities do."""
        self.admission = Admission(self.options, clock, self.inboxes, self.rate, depth_limit=self.rules.depth_limit)
        """Admits every envelope an identity originates (``Admission.admit``), under the channel's lock."""
        self.shared_inboxes = (
            None
            if store.inbox_totals is None
            else SharedInboxes(self.inboxes, store.inbox_totals, self.options.replica_ttl)
        )
        """The inbox counts shared with the other replicas when they divide the channels."""
        self.admission.shared_inboxes = self.shared_inboxes
        self.sessions = Sessions(
            store,
            self.registry,
            self.options,
            clock,
            live_channels=lambda: self.channels.member_channels(),
            spawn=self.spawn,
            refresh_turns=lambda agent_id: self.channels.refresh_turns_of(agent_id),
            record_first=self.placement.divided,
            # With an arbiter the delivery leaves can_send unset: only CanSend asks the arbiter.
            turn_probe=None
            if arbiter is not None
            else lambda agent, channel, cause: (
                self.posts.reply_refusal(agent, channel, cause) is None if self.placement.holds(channel) else None
            ),
            recorder=recorder,
            tracer=tracer,
        )
        if self.placement.divided and self.options.steer_interval > 0:
            self.sessions.steering = SessionSteering(
                self.placement, store, clock, self.options.steer_interval, self.spawn, recorder
            )
        self.channels = LiveChannels(
            store,
            self.registry,
            self.tasks,
            self.admission,
            self.inboxes,
            self.options,
            clock,
            deliver=self.sessions.deliver,
            deliver_followed=self.sessions.deliver_followed,
            spawn=self.spawn,
            govern=self.rules.open_channel,
            policy=lambda: self.governance.policy,
            placement=self.placement,
            connected=self.sessions.streams_here,
        )
        self.expectations = ExpectationTimers(self.channels, self.admission, clock, self.spawn)
        """Channel expectations: their deadlines (from the WAL) and the actions that fire."""
        self.channels.settled = self.expectations.settled
        self.posts = Posts(
            store,
            self.channels,
            self.admission,
            self.audit,
            govern=self.rules.post if arbiter is not None else None,
            recorder=recorder,
            tracer=tracer,
        )
        # The calls served by one part, bound straight to it (posting is a hot path: no extra frame).
        self.post = self.posts.post
        self.admit = self.posts.admit
        self.admit_many = self.posts.admit_many
        self.can_send = self.posts.can_send
        self.open_channel = self.channels.open
        self.close_channel = self.channels.close
        self.wait_channel = self.channels.wait
        self.channel_meta = self.channels.meta
        self.require_member = self.channels.require_member
        self.live_channel = self.channels.get
        self.final_state = self.channels.final_state
        self.watch = self.channels.watch
        self.read_wal = self.channels.read_wal
        self.iter_wal = self.channels.iter_wal
        self.connect = self.sessions.connect
        self.disconnect = self.sessions.disconnect
        self.replicas: ReplicaSync | None = None
        """Applies the other replicas' commits when the store is shared (its change feed)."""
        self.liveness = ReplicaLiveness(liveness, self.executions, self.options) if liveness is not None else None
        """Keeps this replica alive in a shared store and fails the calls of replicas that died."""
        self.retention = Retention(
            store, self.options, clock, forget=self.channels.forget, policy=lambda: self.governance.policy
        )
        """The sweep that purges ended channels after their type's retention and audit records after
        --retain-audit (hubsvc/core/retention.py)."""

    # -- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Open storage, load identities and tasks, hydrate live channels, start the cursor flusher and task
        sweeper (and, with replicas, the liveness refresh and the sweep for calls of stopped replicas)."""
        await self.store.open()
        feed = self.store.feed
        # Taken before anything is loaded: what other replicas commit from here on is applied.
        position = await feed.position() if feed is not None else ""
        if self.liveness is not None:
            await self.liveness.beat()  # alive before it records itself as the owner of any call
        ownership = self.placement.ownership
        if ownership is not None:
            await ownership.step()  # this replica's share of the partitions, before it loads their channels
            await self.placement.read()
        await self.registry.load()
        await self.tasks.load()
        await self.executions.load()
        await self.hydrate()
        self._holding = True
        self._loops = [
            asyncio.create_task(self.sessions.flush_loop(), name="hub-cursor-flush"),
            asyncio.create_task(self.tasks.expiry_loop(self.options.sweep_interval), name="hub-sweeper"),
            asyncio.create_task(self.expectations.run(), name="hub-expectations"),
        ]
        if ownership is not None:
            self._loops.append(asyncio.create_task(ownership.run(), name="hub-ownership"))
        if self.retention.enabled:
            self._loops.append(asyncio.create_task(self.retention.run(), name="hub-retention"))
        if self.store.rate_buckets is not None:
            self._loops.append(asyncio.create_task(self.rate.give_back_loop(), name="hub-rate-give-back"))
        if self.shared_inboxes is not None:
            self._loops.append(asyncio.create_task(self.shared_inboxes.publish_loop(), name="hub-inbox-counts"))
        if self.liveness is not None:
            self._loops.append(asyncio.create_task(self.liveness.beat_loop(), name="hub-liveness"))
            self._loops.append(asyncio.create_task(self.liveness.sweep_loop(), name="hub-orphan-calls"))
        if feed is not None:
            self.replicas = ReplicaSync(
                feed,
                position,
                self.channels,
                records=self._apply_change,
                refresh_all=self._refresh_all,
                recorder=self.recorder,
            )
            self._loops.append(asyncio.create_task(self.replicas.run(), name="hub-replica-sync"))

    async def _after_ownership_round(self, rounds: int) -> None:
        """After each ownership round: read where the other channels are held; every
        :data:`_PRUNE_EVERY` rounds, let go of followed channels that ended with no member here."""
        await self.placement.read()
        gained, self._gained_unchecked = self._gained_unchecked, set()
        try:
            for partition in gained:
                await self._close_for_the_gone(partition)
        except Exception:
            self._gained_unchecked |= gained  # checked again next round (closing is idempotent)
            raise
        if rounds % _PRUNE_EVERY == 0:
            self.channels.followers.prune({row.channel_id for row in await self.store.load_live_channels()})

    async def _gained(self, partition: int, epoch: int) -> None:
        """This replica took ``partition`` (at ``epoch``): hold its live channels (before hydrate: it does)."""
        if self._holding:
            await self.channels.handover.gain(partition)
            self._gained_unchecked.add(partition)  # checked after the round, once it counts as held

    async def _close_for_the_gone(self, partition: int) -> None:
        """Close the gained channels of identities unregistered while the partition had no live holder
        (the holder that would have closed them died before the change feed told it)."""
        unknown = {
            agent_id
            for ch in self.channels.live()
            if self.placement.partition(ch.channel_id) == partition
            for agent_id in ch.participants
            if agent_id not in self.registry
        }
        for agent_id in unknown:
            if await self.registry.reload(agent_id):  # gone from the store too, not just not learnt yet
                await self.channels.close_all_of(agent_id)

    async def _lost(self, partition: int, epoch: int) -> None:
        """This replica gave up or lost ``partition``: its channels' commits settle, then it follows them."""
        await self.channels.handover.lose(partition)

    async def _apply_change(self, change: Change) -> None:
        """Re-read the records another replica's commit wrote; apply its streams' beginnings and ends."""
        await self.apply_remote(agents=change.agents, tasks=change.tasks, executions=change.executions)
        for agent_id in dict.fromkeys(change.sessions):
            await self.sessions.check_holder(agent_id)

    async def _refresh_all(self) -> None:
        """Re-read every record and catch every channel up (the change feed was trimmed past us)."""
        agents = [row.agent_id for row in await self.store.load_agents()]
        tasks = [row.task_id for row in await self.store.load_tasks(live_only=False)]
        executions = [row.execution_id for row in await self.store.load_running_executions()]
        await self.apply_remote(agents=agents, tasks=tasks, executions=executions)
        await self.channels.catch_up_all()

    async def hydrate(self) -> int:
        """Rebuild every live channel by folding its WAL; returns the envelopes folded."""
        return await self.channels.hydrate()

    def close_sessions(self) -> None:
        """End every Connect stream (clients reconnect elsewhere / later and resume)."""
        self.sessions.close_all(
            Unavailable(
                "the hub is shutting down; reconnect to resume from your cursors.", metadata={"cause": "shutdown"}
            )
        )

    async def stop(self) -> None:
        """Close every session, flush cursors and close storage."""
        self.close_sessions()
        if self.replicas is not None:
            self.replicas.stop()
        await cancel_and_wait(self._loops)
        self.sessions.flush_cursors()
        if self.placement.ownership is not None:
            try:  # hand the partitions over now rather than when their leases lapse
                await self.placement.ownership.stop()
            except Exception as exc:
                log.warning("could not release this replica's partitions (%r); their leases lapse by themselves", exc)
        if self.shared_inboxes is not None:
            await self.shared_inboxes.withdraw()  # its channels' counts are their new holders' now
        self.channels.cancel_timers()
        await cancel_and_wait(list(self._background))
        if self.liveness is not None:
            await self.liveness.leave()
        await self.store.close()

    async def apply_remote(
        self, *, agents: Iterable[str] = (), tasks: Iterable[str] = (), executions: Iterable[str] = ()
    ) -> None:
        """Another replica committed changes to these identities, tasks and executions: re-read
        each from the store and make it current here (an identity that is gone loses its
        sessions and rate bucket; waiters of a task wake). Channels are refreshed separately."""
        for agent_id in dict.fromkeys(agents):
            if await self.registry.reload(agent_id):
                self.sessions.close(agent_id, unregistered())
                self.rate.forget(agent_id)
                if self.placement.divided:  # the channels held here close here (each holder closes its own)
                    self.spawn(self.channels.close_all_of(agent_id), f"close-channels-of-{agent_id}")
        for task_id in dict.fromkeys(tasks):
            await self.tasks.reload(task_id)
        for execution_id in dict.fromkeys(executions):
            await self.executions.reload(execution_id)

    # -- shared services of the parts -------------------------------------------------

    def spawn(self, coro: Any, name: str) -> asyncio.Task[Any]:
        """Run a background coroutine, keeping a reference and logging its failure."""
        task = asyncio.create_task(coro, name=name)
        self._background.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._background.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.error("background task %s failed", name, exc_info=t.exception())

        task.add_done_callback(done)
        return task

    def audit(self, kind: str, actor: str, subject: str, detail: dict[str, Any]) -> None:
        """Append an audit record (committed with the next group)."""
        self.store.submit(Writes(audit=[audit_row(kind, actor, subject, detail, self.clock())]))

    async def hidden_from_discovery(self) -> Callable[[str], bool]:
        """Whether an expectation's ``hide`` keeps an identity out of ``ListAgents`` and ``DiscoverAgents``
        now: hidden by a channel held here, or (channels divided among replicas) by one another replica
        holds, as that channel's commits recorded it (:meth:`HubStore.hidden_agents`)."""
        here = self.expectations.hidden
        elsewhere = await self.store.hidden_agents()
        return lambda agent_id: here(agent_id) or agent_id in elsewhere

    def name_for(self, agent_id: str) -> str:
        """Passport name of an agent id."""
        return self.registry.name_for(agent_id)

    # -- identities -------------------------------------------------------------------

    def authenticate(self, credential: str) -> str:
        """The agent id a bearer credential belongs to (Unauthenticated otherwise), marked as seen now."""
        agent_id = self.registry.authenticate(credential)
        self.registry.touch(agent_id)
        return agent_id

    async def register(
        self,
        passport: identity_pb2.Passport,
        resume: identity_pb2.Resume,
        skill_md: str | None,
        a2a: a2a_pb2.A2ASettings | None,
        *,
        human: bool,
        rule_json: str = "",
        by_operator: bool = False,
        idempotency_key: str = "",
        remote_a2a: a2a_pb2.RemoteA2AAgent | None = None,
    ) -> tuple[identity_pb2.AgentRecord, str]:
        """Register an agent / remote agent (``human=False``) or a human (``human=True``).

        ``rule_json`` is the identity's own rule (it can only narrow the policy); ``by_operator``
        says the call carried the operator token (the registration rules do not apply then);
        ``idempotency_key`` makes a retry return the identity and credential it created."""
        if human:
            if passport.kind not in (identity_pb2.PASSPORT_KIND_UNSPECIFIED, identity_pb2.PASSPORT_KIND_HUMAN):
                raise InvalidArgument("RegisterHuman registers kind human only; use Register for agents.")
            passport.kind = identity_pb2.PASSPORT_KIND_HUMAN
        elif passport.kind == identity_pb2.PASSPORT_KIND_HUMAN:
            raise InvalidArgument(
                "Register refuses kind human: register non-LLM participants with RegisterHuman "
                "(hc.register_human(Passport(name=..., kind='human')) in the Python SDK)."
            )
        await self.rules.register(passport, resume, by_operator=by_operator)
        if rule_json:
            parse_rule(rule_json)  # INVALID_ARGUMENT naming the problem
        return await self.registry.register(
            passport, resume, skill_md, a2a, rule_json=rule_json, idempotency_key=idempotency_key, remote_a2a=remote_a2a
        )

    async def unregister(self, agent_id: str) -> list[str]:
        """Remove an identity; its live channels close with reason "participant_left". With the channels
        divided among replicas this replica closes those it holds; each other holder closes its own once
        the change feed tells it, and the answer waits for those the store lists as live (at most
        :data:`UNREGISTER_WAIT` seconds: one whose holder is down is left out of it, and closes when its
        next holder learns)."""
        elsewhere = await self._held_elsewhere(agent_id)
        closed = await self.channels.close_all_of(agent_id)
        self.sessions.close(agent_id, unregistered())
        await self.registry.unregister(agent_id)
        self.governance.forget(agent_id)
        self.rate.forget(agent_id)
        ended = await asyncio.gather(*(self._ended(channel_id, UNREGISTER_WAIT) for channel_id in elsewhere))
        return closed + [c for c, end in zip(elsewhere, ended, strict=True) if end and c not in closed]

    async def _held_elsewhere(self, agent_id: str) -> list[str]:
        """The live channels of ``agent_id`` not held here (channels divided among replicas), as the store
        records them: one opened through another replica a moment ago counts, although the change feed
        may not have told this replica of it yet."""
        if not self.placement.divided:
            return []
        found: list[str] = []
        before = 0
        while True:
            page = await self.store.list_channels_for(agent_id, include_ended=False, limit=_PAGE, before=before)
            found += [row.channel_id for _, row in page if self.channels.table.get(row.channel_id) is None]
            if len(page) < _PAGE:
                return found
            before = page[-1][0]

    async def _ended(self, channel_id: str, timeout: float) -> bool:
        """Whether ``channel_id`` (held by another replica) ends within ``timeout`` seconds."""
        try:
            await self.wait_channel(channel_id, lambda meta: meta.state in TERMINAL, timeout)
        except Timeout:
            return False
        return True
