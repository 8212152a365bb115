"""The commit plan: the keys and ops one commit script call (or, spread layout, each part's call) gets.

:class:`Plan` turns bundles (:class:`~hubsvc.storage.base.Writes`) into the ops of
``lua/commit.lua``, in the order SQLite writes them: first the checks (each channel's stored last
seq is the first new row's seq - 1, no idempotency key nor live agent name of the rows is taken, a
task row's expected state holds, the execution of a new call token still runs and, under
``CallTokenRow.hold_limit``, holds fewer unexpired tokens than it, a holder opening a channel or
starting a task under a limit holds fewer than it), then the writes, and last the group's entry
of the change feed. Where an earlier row of the same plan decides a check (a second post to one
channel, a task ended earlier in the group), the plan judges it itself and raises
:class:`~hubsvc.storage.base.StoreConflict`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from hubsvc.storage.base import TASK_IF_LIVE, TASK_LIVE, TASK_NEW, StoreConflict, TaskRow, WalRow, Writes
from hubsvc.storage.redis_store import feed as redis_feed
from hubsvc.storage.redis_store.codec import idem_field, pack, pack_call
from hubsvc.storage.redis_store.feed import RedisChangeFeed
from hubsvc.storage.redis_store.keys import RESERVED, KeyLayout, lease_value
from netkernel.partitions import partition_of

LeaseUntil = Callable[[int, int], int]
"""(partition, epoch) → until when this replica's lease of that partition with that epoch holds, in
microseconds of Redis's clock (0: it does not hold it)."""

DONE_KEEP = 60
"""Seconds a bundle id stays in the done set (spread layout) at least — at least ten times the
Redis timeout: every global part is sent with a deadline, and a completer reads the outbox entry
again just before sending it, so an entry is never applied later than that after it was done."""
RESERVE_KEEP = 60
"""Seconds a reservation counts at least (at least ten times the Redis timeout): longer than a
writer takes between the reservation and its global part, or a sweep to complete that part."""


class Part:
    """The keys and ops of one commit script call (one slot)."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self._index: dict[str, int] = {}
        self.checks: list[list[Any]] = []
        self.writes: list[Any] = []

    def k(self, key: str) -> int:
        """The 1-based KEYS index of ``key`` (added on first use)."""
        index = self._index.get(key)
        if index is None:
            self.keys.append(key)
            index = self._index[key] = len(self.keys)
        return index

    def args(self, tail: Sequence[Any] = ()) -> list[Any]:
        """ARGV after the deadline: the check count, the checks, the writes, then ``tail``."""
        return [len(self.checks), *(v for check in self.checks for v in check), *self.writes, *tail]


class Plan:
    """The keys and ops of one commit: one script call (:attr:`whole`), or with the spread layout
    one call per channel part plus one for the global part (:meth:`spread_calls`)."""

    def __init__(
        self,
        keys: KeyLayout,
        feed: RedisChangeFeed,
        timeout: float,
        partitions: int = 0,
        lease_until: LeaseUntil | None = None,
    ) -> None:
        self._keys = keys
        self._partitions = partitions
        """The store's partition count (0: the store has no partition leases, so no bundle may be fenced)."""
        self._lease_until = lease_until
        """(spread layout, with partitions) Until when this replica's lease of (partition, epoch) holds."""
        self._feed_of = feed
        self._timeout = timeout
        self._spread = keys.spread
        self._global = Part()
        self._parts: dict[str, Part] = {}
        """Channel → its part (spread layout only)."""
        self._last: dict[str, int] = {}
        """Channel → the last seq this plan writes so far."""
        self._idem: set[tuple[str, str]] = set()
        self._names: dict[str, str] = {}
        self._task_ended: dict[str, bool] = {}
        """Task → whether the last row this plan writes for it so far is terminal."""
        self._running: dict[str, bool] = {}
        """Execution → whether the last row this plan writes for it so far is running."""
        self._tokens: dict[str, int] = {}
        """Call tokens of each execution this plan writes so far (the 'tokens' check counts them)."""
        self._holds: dict[str, dict[str, bool]] = {}
        """Holder set → member → whether the last row this plan writes for it so far is live."""
        self._reserve: tuple[str, int, str] | None = None
        """(spread) The holder set, limit and channel of a channel this bundle opens under a limit."""
        self.empty = True
        self._changed: dict[str, list[Any]] = {"a": [], "t": [], "x": [], "s": [], "u": []}
        """What the plan writes besides WAL rows, for the change feed: agent, task, execution and
        session-holder ids, cursors."""
        self._rows: dict[str, int] = {}
        """Channels whose row the plan writes (→ 0, the feed's "row only")."""
        self._senders: dict[str, set[str]] = {}
        """Channel → the senders of the WAL rows this plan appends to it."""
        self._notify: dict[str, tuple[str, ...]] = {}
        """Channel → its members, for the channels whose appends are told as notices (:attr:`Writes.notify`)."""

    @property
    def keys(self) -> list[str]:
        """KEYS of the single script call (layout without spread)."""
        return self._global.keys

    def _part(self, channel_id: str) -> Part:
        """Where a channel's keys are written: its own part with the spread layout, else the one script."""
        if not self._spread:
            return self._global
        part = self._parts.get(channel_id)
        if part is None:
            part = self._parts[channel_id] = Part()
        return part

    def _feed(self) -> list[Any]:
        """The last write ops of the global part: the change feed's entry and, with the channels
        divided among replicas, the channel notices (:attr:`Writes.notify`). A channel whose row
        this plan writes (opened, ended) stays in the feed entry, which every replica reads; one
        that only grew is told to the replicas of its members and watchers instead, and a plan
        with nothing else for the feed appends no feed entry."""
        feed, g = self._feed_of, self._global
        channels = self._rows | self._last
        ops: list[Any] = []
        if self._partitions:
            noticed = {c: seq for c, seq in self._last.items() if c not in self._rows and c in self._notify}
            if noticed:
                ops = self._notices(noticed)
                channels = {c: seq for c, seq in channels.items() if c not in noticed}
                if not channels and not any(self._changed.values()):
                    return ops
        fields = redis_feed.encode(feed.replica_id, channels, self._changed)
        return [*ops, "feed", g.k(feed.key), g.k(feed.counter), redis_feed.FEED_MAXLEN, len(fields) // 2, *fields]

    def _notices(self, noticed: dict[str, int]) -> list[Any]:
        """The 'notify' op telling each channel's last seq to the replicas its members and watchers
        are on (lua/commit.lua finds them; :mod:`hubsvc.storage.redis_store.feed`, "Notices"). When every
        row appended to a channel has one sender, that member's replica is not told for it: a
        member is not delivered its own posts (the post's answer returned it)."""
        g, feed = self._keys.g, self._feed_of
        per_channel: list[Any] = []
        for channel_id, seq in noticed.items():
            senders = self._senders.get(channel_id, set())
            sender = next(iter(senders)) if len(senders) == 1 else ""
            members = [m for m in self._notify[channel_id] if m != sender]  # its own posts: nothing to deliver
            watchers = self._global.k(g + redis_feed.WATCH + channel_id)
            per_channel += [channel_id, seq, watchers, len(members), *members]
        return ["notify", self._global.k(g + redis_feed.WHERE), g, redis_feed.NOTICES_MAXLEN, feed.replica_id,
                f"{time.time():.6f}", len(noticed), *per_channel]  # fmt: skip

    def args(self) -> list[Any]:
        """ARGV of the single script call: the check count, the checks, the writes, the feed entry."""
        return self._global.args(self._feed())

    def spread_calls(
        self, after: dict[str, str] | None = None
    ) -> tuple[str, tuple[str, Part] | None, tuple[list[str], list[Any]]]:
        """With the spread layout: the bundle id, the channel part (channel id, part) if any, and the
        global part's (KEYS, ARGV after the deadline).

        A bundle with a channel part records its global part in the channel's outbox (hash
        ``outbox``, field = bundle id) in the channel part's own script, and its global part
        first checks that the bundle is not done yet and marks it done (zset ``outbox:done``), so
        whoever finds the outbox entry may apply it again
        (:meth:`~hubsvc.storage.redis_store.spread.SpreadWriter.complete_pending`).
        ``after`` maps a channel to the bundle written to it just before in the same group: this
        one's channel part then requires the channel's ``lastb`` key to name that bundle (it
        committed, and no other writer came in between); every channel part sets ``lastb``.
        """
        if len(self._parts) > 1:
            raise ValueError(
                f"a bundle writes {len(self._parts)} channels ({', '.join(sorted(self._parts))}); with "
                "spread=1 a bundle may write one channel (its parts could not commit together)"
            )
        bundle_id = uuid.uuid4().hex
        g, keys = self._global, self._keys
        if not self._parts:
            return bundle_id, None, (g.keys, g.args(self._feed()))
        if g.checks:
            raise ValueError("with spread=1 a bundle that writes a channel may not carry global checks")
        done = keys.g + "outbox:done"
        g.checks.insert(0, ["once", g.k(done), bundle_id])
        g.writes += ["done", g.k(done), bundle_id, max(DONE_KEEP, int(10 * self._timeout))]
        global_call = (g.keys, g.args(self._feed()))
        ((channel_id, part),) = self._parts.items()
        last_bundle = part.k(keys.channel(channel_id, "lastb"))
        if after and channel_id in after:
            part.checks.append(["after", last_bundle, after[channel_id], channel_id])
        part.writes += ["hset", part.k(keys.channel(channel_id, "outbox")), bundle_id, pack_call(*global_call)]
        part.writes += ["set", last_bundle, bundle_id]
        return bundle_id, (channel_id, part), global_call

    def add(self, writes: Writes) -> None:
        """Add one bundle's ops (in the order SQLite writes them)."""
        s, g, gp = self._keys, self._keys.g, self._global
        if writes.fence:
            self._fence(writes)
        for a in writes.agents:
            if not a.removed:
                owner = self._names.setdefault(a.name, a.agent_id)
                if owner != a.agent_id:
                    raise StoreConflict(f"agent name {a.name} is claimed twice in one group")
                gp.checks.append(["name", gp.k(g + "agent_names"), a.name, a.agent_id])
            gp.writes += ["agent", gp.k(g + "agents"), gp.k(g + "agent_names"), gp.k(g + "agent_name_of"),
                          a.agent_id, pack(a.name, a.cred_hash, "1" if a.removed else "0", a.record), a.name,
                          "1" if a.removed else "0"]  # fmt: skip
        changed = self._changed
        changed["a"] += [a.agent_id for a in writes.agents]
        changed["t"] += [t.task_id for t in writes.tasks]
        changed["x"] += [e.execution_id for e in writes.executions]
        changed["u"] += writes.cursors
        for agent_id, session_id, connected in writes.sessions:
            changed["s"].append(agent_id)
            gp.writes += ["hset" if connected else "hdelif", gp.k(g + "sessions"), agent_id, session_id]
            if self._partitions:  # where the notices of the identity's channels go
                where = redis_feed.where_value(self._feed_of.replica_id, session_id)
                gp.writes += ["hset" if connected else "hdelif", gp.k(g + redis_feed.WHERE), agent_id, where]
        for channel_id, watching in writes.watches:
            if self._partitions:
                gp.writes += ["sadd" if watching else "srem", gp.k(g + redis_feed.WATCH + channel_id),
                              self._feed_of.replica_id]  # fmt: skip
        self._notify.update(writes.notify)
        for channel_id, agents in writes.hidden.items() if self._partitions else ():
            hidden = gp.k(g + redis_feed.HIDDEN)  # what every replica's discovery leaves out
            gp.writes += ["hset", hidden, channel_id, "\0".join(agents)] if agents else ["hdel", hidden, channel_id]
        for c in writes.channels:
            self._rows.setdefault(c.channel_id, 0)
            if self._partitions and not c.live:  # an ended channel grows no more: nobody need watch it, it hides no one
                gp.writes += ["del", gp.k(g + redis_feed.WATCH + c.channel_id)]
                gp.writes += ["hdel", gp.k(g + redis_feed.HIDDEN), c.channel_id]
            members = c.member_ids()
            live = "1" if c.live else "0"
            holder = s.holder("channels", members[0])  # the initiator's live channels
            if c.hold_limit is not None and c.live:
                if self._spread:  # the channel part commits first: the slot is reserved before it
                    self._reserve = (holder, c.hold_limit, c.channel_id)
                else:
                    self._hold_check(holder, g + "channels:live", c.hold_limit, c.channel_id, "max_open_channels")
            self._hold(holder, c.channel_id, c.live)
            if self._spread:
                cp = self._part(c.channel_id)
                cp.writes += ["chmeta", cp.k(s.channel(c.channel_id, "meta")), cp.k(s.channel(c.channel_id, "members")),
                              live, c.record, c.seed, len(members), *members]  # fmt: skip
                gp.writes += ["chglobal", gp.k(g + "channels:order"), gp.k(g + "channel_order"),
                              gp.k(g + "channels:live"), c.channel_id, live, len(members),
                              *(gp.k(g + "member_channels:" + m) for m in members)]  # fmt: skip
                continue
            gp.writes += ["channel", gp.k(s.channel(c.channel_id, "meta")), gp.k(g + "channel_order"),
                          gp.k(g + "channels:live"), gp.k(s.channel(c.channel_id, "members")), c.channel_id,
                          live, c.record, c.seed, len(members),
                          *(gp.k(g + "member_channels:" + m) for m in members), *members]  # fmt: skip
        for w in writes.wal:
            self._wal(w)
        for agent_id, channel_id, seq in writes.cursors:
            gp.writes += ["cursor", gp.k(g + "cursors:" + agent_id), channel_id, seq]
        for t in writes.tasks:
            holder = s.holder("tasks", t.owner_id)  # the owner's running tasks
            if t.expect == TASK_IF_LIVE:
                if not t.terminal:
                    raise ValueError(f"task {t.task_id}: only an ending row may be written 'if live'")
                self._task_ended[t.task_id] = True
                self._holds.setdefault(holder, {})[t.task_id] = False
                gp.writes += ["endtask", gp.k(g + "tasks"), gp.k(g + "tasks:live"), gp.k(holder), t.task_id, t.record]
                continue
            self._task_check(t)
            if t.hold_limit is not None and not t.terminal:
                self._hold_check(holder, g + "tasks:live", t.hold_limit, t.task_id, "max_running_tasks")
            self._hold(holder, t.task_id, not t.terminal)
            gp.writes += ["hset", gp.k(g + "tasks"), t.task_id, t.record]
            gp.writes += ["hsetnx", gp.k(g + "task_meta"), t.task_id, pack(t.owner_id, t.channel_id)]
            gp.writes += ["srem" if t.terminal else "sadd", gp.k(g + "tasks:live"), t.task_id]
        for ck in writes.checkpoints:  # one hash field per task: the last checkpoint written wins
            gp.writes += [
                "hset",
                gp.k(g + "checkpoints"),
                ck.task_id,
                pack(ck.owner_id, repr(ck.saved_at), ck.state_json),
            ]
        for ob in writes.observations:  # HINCRBY in the script: an increment, atomic with the task's end
            gp.writes += ["observe", gp.k(g + "observed:" + ob.agent_id), ob.capability, ob.outcome]
            gp.writes += [ob.latency_ms, repr(ob.at)]
        for e in writes.executions:
            if e.expect_running:
                self._running_check(e.execution_id)
            self._running[e.execution_id] = e.running
            gp.writes += ["exec", gp.k(g + "exec"), gp.k(g + "exec:meta"), gp.k(g + "exec:counter"),
                          gp.k(g + "exec:all"), gp.k(g + "exec:root:" + e.root_session_id),
                          gp.k(g + "exec:roots_of:" + e.caller_id), gp.k(g + "exec:roots_of:" + e.target_id),
                          gp.k(g + "exec:running"), e.execution_id, e.record,
                          pack(e.root_session_id, e.caller_id, e.target_id, repr(e.started_at), e.owner),
                          "1" if e.running else "0", repr(e.started_at), e.root_session_id]  # fmt: skip
            if not e.running:
                gp.writes += ["untoken", gp.k(g + "call_tokens"), gp.k(g + "call_tokens:" + e.execution_id)]
        for ct in writes.call_tokens:
            self._running_check(ct.execution_id)
            hashes, held = gp.k(g + "call_tokens"), gp.k(g + "call_tokens:" + ct.execution_id)
            earlier = self._tokens.get(ct.execution_id, 0)
            if ct.hold_limit is not None:  # hubsvc/storage/call_token_room.py
                gp.checks.append(["tokens", hashes, held, ct.hold_limit, repr(ct.issued_at), ct.execution_id, earlier])
                gp.writes += ["tokroom", hashes, held, ct.hold_limit, repr(ct.issued_at), repr(ct.grace)]
            self._tokens[ct.execution_id] = earlier + 1
            gp.writes += ["hset", hashes, ct.token_hash, pack(ct.execution_id, ct.agent_id, repr(ct.expires_at))]
            gp.writes += ["sadd", held, ct.token_hash]
        for kind, actor_id, subject_id, detail_json, created_at in writes.audit:
            gp.writes += ["audit", gp.k(g + "audit_seq"), gp.k(g + "audit"), gp.k(g + "audit:all"),
                          gp.k(g + "audit:kind:" + kind), gp.k(g + "audit:subject:" + subject_id),
                          pack(kind, actor_id, subject_id, detail_json, repr(created_at))]  # fmt: skip
        self.empty = self.empty and not writes

    def _fence(self, writes: Writes) -> None:
        """Check ops requiring that this replica still holds each fenced partition with its epoch (first
        of the checks). Every channel the bundle writes must be in a fenced partition (else ValueError:
        a bug). On the one-slot layout the lease itself is checked ('fence'). With the spread layout a
        channel part cannot read the lease (another slot), so it checks, in the channel's slot, that
        the lease has not run out by Redis's clock and that no later owner wrote to the channel
        ('epoch': each fenced write leaves its epoch in the channel's ``fence`` key)."""
        if not self._partitions:
            raise ValueError("a fenced write needs a store opened with partitions")
        unfenced = sorted(c for c in channels_of(writes) if partition_of(c, self._partitions) not in writes.fence)
        if unfenced:
            raise ValueError(f"fenced bundle writes channels {unfenced} outside its fenced partitions")
        for partition, epoch in sorted(writes.fence.items()):
            if not 0 <= partition < self._partitions:
                raise ValueError(f"fenced partition {partition} is not in [0, {self._partitions})")
            if not self._spread:
                value = lease_value(self._feed_of.replica_id, epoch)
                self._global.checks.append(["fence", self._global.k(self._keys.lease(partition)), value, partition])
        if self._spread:
            if self._lease_until is None:
                raise ValueError("a spread-layout plan with partitions needs its leases' expiry")
            for channel_id in sorted(channels_of(writes)):
                partition = partition_of(channel_id, self._partitions)
                epoch, cp = writes.fence[partition], self._part(channel_id)
                fence = cp.k(self._keys.channel(channel_id, "fence"))
                cp.checks.append(["epoch", fence, epoch, partition, self._lease_until(partition, epoch)])
                cp.writes += ["set", fence, epoch]

    def _hold_check(self, holder: str, live: str, limit: int, member: str, what: str, part: Part | None = None) -> None:
        """Require that ``holder`` (a holder set) holds fewer than ``limit`` live members, or ``member``,
        counting what this plan wrote to it before (a 'hold' check op, in ``part``: the global one)."""
        gp = part or self._global
        earlier = {} if part is not None else self._holds.get(holder, {})
        pairs = [v for m, on in earlier.items() for v in (m, "1" if on else "0")]
        gp.checks.append(["hold", gp.k(holder), gp.k(live), gp.k(self._keys.g + RESERVED), limit, member,
                          f"{what} of {holder.rsplit(':', 1)[-1]}", len(earlier), *pairs])  # fmt: skip

    def reservation(self) -> tuple[Part, Part] | None:
        """(spread) For a bundle that opens a channel under a limit: the call reserving the slot on
        the global slot before the channel part (the 'hold' check, then the member added to the
        holder set and reserved for :data:`RESERVE_KEEP` seconds), and the call releasing it if the
        channel part is refused. None for any other bundle."""
        if self._reserve is None:
            return None
        holder, limit, member = self._reserve
        g = self._keys.g
        reserve, release = Part(), Part()
        self._hold_check(holder, g + "channels:live", limit, member, "max_open_channels", reserve)
        reserve.writes += ["sadd", reserve.k(holder), member]
        reserve.writes += ["reserve", reserve.k(g + RESERVED), member, max(RESERVE_KEEP, int(10 * self._timeout))]
        release.writes += [
            "unreserve",
            release.k(holder),
            release.k(g + "channels:live"),
            release.k(g + RESERVED),
            member,
        ]
        return reserve, release

    def _hold(self, holder: str, member: str, live: bool) -> None:
        """Keep ``holder`` (the set of live channels an initiator holds, or running tasks an owner
        holds) up to date with a row written: add a live member, remove an ended one."""
        gp = self._global
        self._holds.setdefault(holder, {})[member] = live
        gp.writes += ["sadd" if live else "srem", gp.k(holder), member]

    def _running_check(self, execution_id: str) -> None:
        """Require the execution to be running: by an earlier row of this plan, else a check op."""
        running = self._running.get(execution_id)
        if running is None:
            gp = self._global
            gp.checks.append(["running", gp.k(self._keys.g + "exec:running"), execution_id])
        elif not running:
            raise StoreConflict(f"execution {execution_id} ended earlier in this group")

    def _task_check(self, t: TaskRow) -> None:
        """Check ``t.expect`` against an earlier row of this plan, or add a check op against the store."""
        ended = self._task_ended.get(t.task_id)
        self._task_ended[t.task_id] = t.terminal
        if not t.expect:
            return
        if ended is None:
            g, gp = self._keys.g, self._global
            gp.checks.append(["task", gp.k(g + "tasks"), gp.k(g + "tasks:live"), t.task_id, t.expect])
        elif t.expect == TASK_NEW or (t.expect == TASK_LIVE and ended):
            raise StoreConflict(f"task {t.task_id} was already written {'ended' if ended else 'running'} in this group")

    def _wal(self, w: WalRow) -> None:
        s, g, gp = self._keys, self._keys.g, self._global
        cp = self._part(w.channel_id)
        if w.seq < 1:
            raise StoreConflict(f"seq {w.seq} of channel {w.channel_id} is not positive")
        last_key = s.channel(w.channel_id, "last")
        previous = self._last.get(w.channel_id)
        if previous is None:
            cp.checks.append(["seq", cp.k(last_key), w.seq - 1, w.channel_id])
        elif w.seq != previous + 1:
            raise StoreConflict(f"channel {w.channel_id}: seq {w.seq} does not follow {previous}")
        self._last[w.channel_id] = w.seq
        self._senders.setdefault(w.channel_id, set()).add(w.sender_id)
        entry_id = f"{w.seq}-0"
        cp.writes += ["xadd", cp.k(s.channel(w.channel_id, "wal")), entry_id, 1, "d", w.data]
        if w.text is not None:
            cp.writes += ["xadd", cp.k(s.channel(w.channel_id, "texts")), entry_id, 3, "s", w.sender_id,
                          "c", w.created_at, "x", w.text]  # fmt: skip
        if w.idempotency_key is not None:
            field = idem_field(w.sender_id, w.idempotency_key)
            if (w.channel_id, field) in self._idem:
                raise StoreConflict(f"idempotency key written twice in channel {w.channel_id}")
            self._idem.add((w.channel_id, field))
            idem = cp.k(s.channel(w.channel_id, "idem"))
            cp.checks.append(["idem", idem, field, w.channel_id])
            cp.writes += ["hset", idem, field, w.seq]
        if w.causation_id is not None:  # the first reply stays: a later one answering the same envelope is not it
            replies = cp.k(s.channel(w.channel_id, "replies"))
            cp.writes += ["hsetnx", replies, idem_field(w.sender_id, w.causation_id), w.seq]
        gp.writes += ["hset", gp.k(g + "envelopes"), w.envelope_id, pack(w.channel_id, str(w.seq))]
        cp.writes += ["set", cp.k(last_key), w.seq]


def channels_of(writes: Writes) -> set[str]:
    """The channels a bundle writes (WAL rows or channel rows)."""
    return {w.channel_id for w in writes.wal} | {c.channel_id for c in writes.channels}
