"""The storage interface of the hub.

Everything durable goes through :meth:`HubStore.commit`, which takes a
:class:`Writes` bundle and returns once it is committed. Implementations group
concurrent bundles into one transaction (group commit), apply bundles in
submission order, and commit each bundle atomically. Reads are plain async
queries. Backends: SQLite (:mod:`hubsvc.storage.sqlite`, the default) and Redis
(:mod:`hubsvc.storage.redis_store`, docs/scale-out.md).
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from agentnet.v1 import channel_pb2

from hubsvc.storage.inbox_totals import InboxTotals
from hubsvc.storage.leases import PartitionLeases
from hubsvc.storage.rate_buckets import RateBuckets
from netkernel.errors import PARTITION_MOVED, LostRace, Unavailable


@dataclass(frozen=True, slots=True)
class WalRow:
    """One WAL record: a serialized ``agentnet.v1.Envelope`` plus indexed columns."""

    channel_id: str
    seq: int
    envelope_id: str
    sender_id: str
    event_type: str
    idempotency_key: str | None
    text: str | None
    """EV_TEXT body (for context search), else None."""
    created_at: str
    """Admission time, RFC 3339 UTC (sorts chronologically as text)."""
    data: bytes
    """The serialized wire Envelope."""
    causation_id: str | None = None
    """The envelope this one answers (indexed with the sender for :meth:`HubStore.find_reply`), else None."""


@dataclass(frozen=True, slots=True)
class AgentRow:
    """A registry entry: the serialized ``AgentRecord`` and the credential hash."""

    agent_id: str
    name: str
    cred_hash: str
    record: bytes
    removed: bool = False


@dataclass(frozen=True, slots=True)
class ChannelRow:
    """A channel: its serialized ``ChannelMetadata`` plus the seed to post once opened."""

    channel_id: str
    live: bool
    record: bytes
    seed: bytes = b""
    """Serialized seed Envelope ("" = none)."""
    hold_limit: int | None = None
    """Set on the row that creates a channel while its initiator's ``max_open_channels`` applies:
    a store shared by replicas writes the bundle only if the initiator then holds fewer live
    channels than this (else :class:`LimitConflict`, nothing written). A single-process store
    may ignore it (the hub's own count is exact there)."""

    def member_ids(self) -> list[str]:
        """The participants' agent ids, read from the record (what a store indexes the channel by)."""
        return [p.agent_id for p in channel_pb2.ChannelMetadata.FromString(self.record).participants]


TASK_NEW = "new"
"""A :attr:`TaskRow.expect`: the store holds no task with this id yet (a start)."""
TASK_LIVE = "live"
"""A :attr:`TaskRow.expect`: the stored task exists and has not ended (a report, a cancel request, an expiry)."""
TASK_IF_LIVE = "if_live"
"""A :attr:`TaskRow.expect` of an ending row: written only if the stored task exists and has not
ended, else skipped — never a conflict (a channel's close ends its running tasks: a task another
replica ended first keeps its end, and the close still commits)."""


@dataclass(frozen=True, slots=True)
class TaskRow:
    """A task: its serialized ``TaskMetadata``."""

    task_id: str
    owner_id: str
    channel_id: str
    terminal: bool
    record: bytes
    expect: str = ""
    """What the stored task must be for this write (:data:`TASK_NEW`, :data:`TASK_LIVE`; "" = anything;
    :data:`TASK_IF_LIVE` skips the row instead of refusing the bundle).
    When it is not, the bundle writes nothing and fails with :class:`StoreConflict`: so of two
    replicas ending one task, only the first write counts."""
    hold_limit: int | None = None
    """Set on a start while the owner's ``max_running_tasks`` applies: as :attr:`ChannelRow.hold_limit`,
    for the owner's running tasks."""


@dataclass(frozen=True, slots=True)
class CheckpointRow:
    """A task's checkpoint (CheckpointTask): the owner's JSON object, replaced by each save."""

    task_id: str
    owner_id: str
    state_json: str
    saved_at: float
    """The hub's clock when it was stored (epoch seconds)."""


OUTCOMES = ("completed", "failed", "expired", "cancelled")
"""How a task may end, as :class:`ObservationRow` counts it."""


@dataclass(frozen=True, slots=True)
class ObservationRow:
    """One ended task of an identity tagged with a capability: adds 1 to its counts (written in the
    bundle that ends the task, so a task counts once however many replicas race to end it)."""

    agent_id: str
    capability: str
    outcome: str
    """One of :data:`OUTCOMES`."""
    latency_ms: int
    at: float
    """When the task ended (epoch seconds)."""


@dataclass(frozen=True, slots=True)
class ObservedCounts:
    """An identity's track record of one capability, as stored."""

    completed: int = 0
    failed: int = 0
    expired: int = 0
    cancelled: int = 0
    last_latency_ms: int = 0
    last_updated: float = 0.0


@dataclass(frozen=True, slots=True)
class ExecutionRow:
    """An A2A execution: its serialized ``agentnet.v1.Execution`` plus indexed columns."""

    execution_id: str
    root_session_id: str
    caller_id: str
    target_id: str
    running: bool
    started_at: float
    record: bytes
    owner: str = ""
    """The replica whose InvokeAgent waits for the call (:attr:`Liveness.replica_id`; "" on a
    single-process store). Stored with the execution's first row; later rows do not change it."""
    expect_running: bool = False
    """The stored execution must still be running for this write: else the bundle writes nothing and
    fails with :class:`StoreConflict` (of several replicas failing a dead replica's call, only the
    first write counts)."""


@dataclass(frozen=True, slots=True)
class CallTokenRow:
    """An A2A call token: the SHA-256 of its secret, the execution it was issued for, the agent it
    was issued to and when it expires. Removed with the execution's end (an ended row, ``running``
    False, deletes every token of its execution in the same commit), and, when a row with a
    ``hold_limit`` is stored, as :mod:`hubsvc.storage.call_token_room` says."""

    token_hash: str
    execution_id: str
    agent_id: str
    expires_at: float
    hold_limit: int | None = field(default=None, compare=False)
    """Set on issue (the hub's ``a2a_max_tokens``): the execution may then hold at most this many
    tokens, this one included. The commit removes its tokens expired more than ``grace`` before
    ``issued_at``, then its oldest expired ones while it would hold more; if its unexpired tokens
    alone reach the limit it fails with :class:`LimitConflict`, nothing written. Not stored."""
    issued_at: float = field(default=0.0, compare=False)
    """The hub's clock when the token was issued: a stored token expiring at or before it has expired."""
    grace: float = field(default=0.0, compare=False)
    """Seconds after its expiry an expired token may still be exchanged (kept while there is room)."""


class StoreUnconfirmed(Exception):
    """The primary stored the group, but fewer of its replicas than required confirmed it in time:
    the write is kept unless the primary fails before its replicas catch up."""


class StoreConflict(Exception):
    """The store already holds something a bundle assumed free or unchanged (a seq, an idempotency
    key, a live agent name, a task that ended): another writer got there first. Nothing of the
    bundle was written."""


class LimitConflict(StoreConflict):
    """A bundle would make an identity hold as many live channels or tasks as the ``hold_limit`` of
    its row allows, or more: the store counted ``held`` already. Nothing of the bundle was written."""

    def __init__(self, message: str, held: int) -> None:
        super().__init__(message)
        self.held = held


class Fenced(StoreConflict):
    """A bundle fenced with :attr:`Writes.fence` reached the store while this replica no longer held
    ``partition`` with the epoch it named (the lease lapsed, or another replica owns it now). Nothing
    of the bundle was written; the hub answers UNAVAILABLE, cause ``partition_moved``."""

    def __init__(self, message: str, partition: int) -> None:
        super().__init__(message)
        self.partition = partition


WRITE_FAILED = "store_write_failed"
"""The ``cause`` of an UNAVAILABLE commit whose bundle the store did not write (the store failed,
or an earlier write of its channel did)."""


def nothing_stored(error: BaseException | None) -> bool:
    """Whether a commit that failed with ``error`` stored none of its bundle, as far as the hub knows.

    True for a lost race (:class:`LostRace`, :class:`AtLimit` too) and for a write the store did
    not take (UNAVAILABLE, cause :data:`WRITE_FAILED` or ``partition_moved``); False for a write
    stored but not confirmed by Redis replicas (cause ``store_unconfirmed``) and for a cancelled
    commit (``error`` None)."""
    return isinstance(error, LostRace) or (
        isinstance(error, Unavailable) and error.metadata.get("cause") in (WRITE_FAILED, PARTITION_MOVED)
    )


class AtLimit(LostRace):
    """Inside the hub: the shared store refused a bundle with :class:`LimitConflict` (another
    replica took the identity's last free slot first). The core answers the caller with the same
    ``LimitExceeded`` refusal its own count gives; ``held`` is what the store counted."""

    def __init__(self, message: str, held: int) -> None:
        super().__init__(message, metadata={"cause": "limit_reached"})
        self.held = held


@dataclass
class Writes:
    """A bundle of writes committed atomically, in this order."""

    wal: list[WalRow] = field(default_factory=list)
    agents: list[AgentRow] = field(default_factory=list)
    channels: list[ChannelRow] = field(default_factory=list)
    cursors: list[tuple[str, str, int]] = field(default_factory=list)
    """(agent_id, channel_id, seq) cursor upserts."""
    tasks: list[TaskRow] = field(default_factory=list)
    checkpoints: list[CheckpointRow] = field(default_factory=list)
    """Task checkpoint upserts (one per task: the last one written wins)."""
    observations: list[ObservationRow] = field(default_factory=list)
    """Capability counts to add to (AG2's Resume.observed)."""
    executions: list[ExecutionRow] = field(default_factory=list)
    """A2A execution upserts."""
    call_tokens: list[CallTokenRow] = field(default_factory=list)
    """A2A call tokens issued (see :class:`CallTokenRow` for when they are removed)."""
    audit: list[tuple[str, str, str, str, float]] = field(default_factory=list)
    """(kind, actor_id, subject_id, detail_json, created_at) audit appends."""
    sessions: list[tuple[str, str, bool]] = field(default_factory=list)
    """(agent_id, session_id, connected): a Connect stream began or ended. Only a store shared by
    replicas records them (the identity's current stream, :meth:`HubStore.session_of`); a
    single-process store has nothing to tell and ignores them."""
    fence: dict[int, int] = field(default_factory=dict)
    """Partition → the epoch this replica holds it with (:mod:`hubsvc.storage.leases`): a store shared
    by replicas writes the bundle only if, in the same atomic step, each lease is still held by this
    replica with that epoch and has not lapsed; else nothing of it is written (:class:`Fenced`). Every
    channel the bundle writes must then be in a fenced partition. A single-process store ignores it."""
    notify: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Channel → its members: with the channels divided, the appends to it are told only to the
    replicas of those members' streams and of its watchers (docs/scale-out.md, "Channel notices");
    a channel without an entry is told to every replica. Other stores ignore it."""
    watches: list[tuple[str, bool]] = field(default_factory=list)
    """(channel_id, watching): this replica began or stopped watching a channel (:attr:`notify`).
    Only a store shared by replicas that divide the channels records them."""
    hidden: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Channel → the agents an expectation's ``hide`` firing in it now hides (() none), after this
    bundle's envelopes: only a store shared by replicas that divide the channels records them, so
    every replica's discovery leaves them out (:meth:`HubStore.hidden_agents`)."""
    _CONTENT: ClassVar[tuple[str, ...]] = (
        "wal", "agents", "channels", "tasks", "checkpoints", "observations", "executions", "call_tokens", "audit",
        "sessions", "watches", "hidden",
    )  # fmt: skip

    def only_cursors(self) -> bool:
        """Holds cursor upserts and nothing else: advisory writes nobody waits on, so a store may
        write them after the bundles queued with them are answered."""
        return bool(self.cursors) and not self._besides_cursors()

    def _besides_cursors(self) -> bool:
        return any(getattr(self, name) for name in self._CONTENT)

    def __bool__(self) -> bool:
        return bool(self.cursors) or self._besides_cursors()


@dataclass(frozen=True, slots=True)
class AuditRow:
    """One audit record as stored."""

    audit_id: int
    kind: str
    actor_id: str
    subject_id: str
    detail_json: str
    created_at: float


@dataclass(frozen=True, slots=True)
class Change:
    """What one commit on the shared store changed, as the change feed tells the other replicas."""

    origin: str
    """The replica that committed it (:attr:`ChangeFeed.replica_id`)."""
    channels: dict[str, int]
    """Channel id → its last seq after the commit (0: only the channel's row changed)."""
    agents: tuple[str, ...] = ()
    tasks: tuple[str, ...] = ()
    executions: tuple[str, ...] = ()
    cursors: tuple[tuple[str, str, int], ...] = ()
    """(agent_id, channel_id, seq) acked cursors."""
    sessions: tuple[str, ...] = ()
    """Identities whose Connect stream began or ended (:meth:`HubStore.session_of` says which holds now)."""
    committed_at: float = 0.0
    """Wall-clock time (epoch seconds) the committing replica wrote it (0: unknown); the feed lag metric."""


class ChangeFeed(abc.ABC):
    """The ordered record of every commit to a store shared by several hub replicas.

    Each commit appends one :class:`Change` atomically with its writes, so a replica that
    reads the feed from a position it took *before* loading its state misses nothing.
    """

    replica_id: str
    """This replica's id (the ``origin`` of the changes it commits)."""

    @abc.abstractmethod
    async def position(self) -> str:
        """The feed's current end: :meth:`read` from it returns only later changes."""

    @abc.abstractmethod
    async def read(self, after: str, block: float) -> tuple[str, list[Change]]:
        """The changes after ``after`` (waiting up to ``block`` seconds for one) and the position
        to read from next. Raises :class:`FeedGap` if changes after ``after`` were trimmed."""


class FeedGap(Exception):
    """The feed no longer holds every change after the asked position: the reader must refresh
    everything it holds from the store."""


class Liveness(abc.ABC):
    """Which hub replicas sharing a store are alive: each keeps a key with a time to live fresh."""

    replica_id: str
    """This replica's id (the same as its change feed's)."""
    address: str = ""
    """The gRPC address (``host:port``) other replicas reach this one at, stored with each beat."""

    @abc.abstractmethod
    async def beat(self, ttl: float) -> None:
        """Mark this replica alive for the next ``ttl`` seconds (with its :attr:`address`)."""

    @abc.abstractmethod
    async def replicas(self) -> dict[str, str]:
        """Every replica whose liveness has not lapsed → its advertised address ("" if none)."""

    @abc.abstractmethod
    async def alive(self, replica_ids: Sequence[str]) -> set[str]:
        """Those of ``replica_ids`` whose liveness has not lapsed."""

    @abc.abstractmethod
    async def leave(self) -> None:
        """Mark this replica gone now (a clean stop)."""

    @abc.abstractmethod
    async def replica_key(self) -> str:
        """The secret the replicas sharing the store present to each other (ReplicaService): made by
        the first replica that asks, the same for every replica after it."""


class AuditBell:
    """Rung each time this process commits audit records, so a FollowAudit stream reads them at once
    instead of at its next poll of the store (which remains for the records of other replicas)."""

    def __init__(self) -> None:
        self._rung = asyncio.Event()

    def ring(self) -> None:
        """Wake every waiter of the current round and start a new round."""
        self._rung.set()
        self._rung = asyncio.Event()

    def round(self) -> asyncio.Event:
        """The current round: take it *before* reading the store, then :meth:`wait` on it, so a commit
        between the read and the wait is not missed."""
        return self._rung

    @staticmethod
    async def wait(round: asyncio.Event, timeout: float) -> None:
        """Until ``round`` is rung or ``timeout`` seconds pass."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(round.wait(), timeout)


class HubStore(abc.ABC):
    """Durable state of one hub."""

    feed: ChangeFeed | None = None
    """The change feed when several replicas share this store (None: this process is alone)."""
    kind: str = "store"
    """The backend's name in metrics (``store`` label): "sqlite" or "redis"."""
    liveness: Liveness | None = None
    """The replicas' liveness when several share this store (None: this process is alone)."""
    partitions: PartitionLeases | None = None
    """The partition leases when replicas share this store and divide its channels (None: this process
    is alone, or the store was opened without partitions)."""
    rate_buckets: RateBuckets | None = None
    """The identities' rate buckets when several replicas may share this store (None: this process is
    alone, and keeps its buckets in memory)."""
    inbox_totals: InboxTotals | None = None
    """The replicas' inbox counts when they divide the channels (None: one process folds them all)."""
    audit_bell: AuditBell
    """Rung when this process commits audit records (set by the backend's ``__init__``)."""

    @abc.abstractmethod
    async def open(self) -> None:
        """Create or migrate the schema and start the writer."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Flush pending writes and release resources."""

    @abc.abstractmethod
    def submit(self, writes: Writes) -> asyncio.Future[None]:
        """Queue ``writes``; the future resolves once they are durably committed.

        Bundles commit atomically and in submission order, and their futures resolve
        in that order (so callbacks added at submission run in admission order).
        A bundle that cannot be written fails alone: its future raises
        :class:`~netkernel.errors.Unavailable` and the other bundles of its group still
        commit. Its channels are then *fenced*: every later bundle writing a WAL row or
        the row of such a channel fails too (no seq gap can be committed) until
        :meth:`lift_fence` is reached in the queue.
        """

    @abc.abstractmethod
    def lift_fence(self, channel_id: str) -> asyncio.Future[None]:
        """Queue the end of ``channel_id``'s fence; resolves once every bundle submitted
        before it has been committed or failed (the channel's state in the store is then final)."""

    async def commit(self, writes: Writes) -> None:
        """Durably apply ``writes`` and wait for it."""
        await self.submit(writes)

    @abc.abstractmethod
    async def channel_seq(self, channel_id: str) -> int:
        """The last seq the store holds for the channel (0: none)."""

    async def channel_seqs(self, channel_ids: Sequence[str]) -> list[int]:
        """:meth:`channel_seq` of each channel, in order (a store with round trips reads them in one)."""
        return [await self.channel_seq(channel_id) for channel_id in channel_ids]

    async def session_of(self, agent_id: str) -> str | None:
        """The session id of ``agent_id``'s current Connect stream on any replica (None: none),
        as recorded by :attr:`Writes.sessions`; a single-process store records none."""
        return None

    async def hidden_agents(self) -> frozenset[str]:
        """The agents a ``hide`` firing hides in a live channel held by any replica, as recorded by
        :attr:`Writes.hidden`; a store that records none answers empty (each replica folds them all)."""
        return frozenset()

    @abc.abstractmethod
    async def load_agents(self) -> list[AgentRow]:
        """Every registered identity (removed ones included, flagged)."""

    @abc.abstractmethod
    async def get_agent(self, agent_id: str) -> AgentRow | None:
        """One identity (a removed one flagged), None when the id was never registered."""

    @abc.abstractmethod
    async def get_agent_named(self, name: str) -> AgentRow | None:
        """The live (not removed) identity holding passport name ``name``, if any."""

    @abc.abstractmethod
    async def load_live_channels(self) -> list[ChannelRow]:
        """Every channel not yet CLOSED or EXPIRED."""

    @abc.abstractmethod
    async def get_channel(self, channel_id: str) -> ChannelRow | None:
        """One channel, live or ended."""

    @abc.abstractmethod
    async def list_channels_for(
        self, agent_id: str, *, include_ended: bool, limit: int, before: int = 0
    ) -> list[tuple[int, ChannelRow]]:
        """Channels ``agent_id`` participates in, newest first, as (creation order, row) pairs (the
        order of :meth:`list_channels`): those created before order ``before`` (0 = from the newest),
        at most ``limit``."""

    @abc.abstractmethod
    async def list_channels(self, *, live_only: bool, before: int, limit: int) -> list[tuple[int, ChannelRow]]:
        """Every channel (only live ones with ``live_only``), newest first, as (creation order, row)
        pairs: those created before order ``before`` (0 = from the newest), at most ``limit``."""

    def location(self) -> tuple[str, str]:
        """(kind, address) of the store for an operator's status: never a password."""
        return (type(self).__name__, "")

    @abc.abstractmethod
    async def read_wal(self, channel_id: str, from_seq: int, until_seq: int, limit: int) -> list[bytes]:
        """Serialized envelopes with from_seq <= seq <= until_seq (0 = no bound), in seq order."""

    @abc.abstractmethod
    def scan_wal(self, channel_ids: Sequence[str], *, batch: int = 5000) -> AsyncIterator[tuple[str, list[bytes]]]:
        """The given channels' whole WALs, channel by channel: pages of (channel_id, envelope bytes in seq
        order), at most ``batch`` envelopes a page."""

    @abc.abstractmethod
    async def find_envelope(self, envelope_id: str) -> bytes | None:
        """An envelope by id."""

    @abc.abstractmethod
    async def find_idempotent(self, channel_id: str, sender_id: str, key: str) -> bytes | None:
        """The envelope ``sender_id`` wrote to the channel under idempotency ``key``, if any."""

    @abc.abstractmethod
    async def find_idempotent_many(self, channel_id: str, sender_id: str, keys: Sequence[str]) -> dict[str, bytes]:
        """:meth:`find_idempotent` for many keys of one sender in one lookup: key -> envelope, for the keys
        the channel holds (a key absent from the answer was never written)."""

    @abc.abstractmethod
    async def find_reply(self, channel_id: str, sender_id: str, causation_id: str) -> bytes | None:
        """The first envelope ``sender_id`` wrote to the channel whose causation_id is ``causation_id``.

        One indexed lookup (never a WAL scan), on every store."""

    @abc.abstractmethod
    async def search_text(self, channel_ids: Sequence[str], query: str, limit: int) -> list[bytes]:
        """EV_TEXT envelopes of the channels whose text contains ``query`` (case-insensitive), newest first."""

    @abc.abstractmethod
    async def texts_from(self, channel_ids: Sequence[str], sender_id: str, limit: int) -> list[bytes]:
        """Latest EV_TEXT envelopes of ``sender_id`` in the channels, newest first."""

    @abc.abstractmethod
    async def load_cursors(self, agent_id: str) -> dict[str, int]:
        """Stored ack cursors of ``agent_id``: channel_id -> seq."""

    @abc.abstractmethod
    async def load_tasks(self, *, live_only: bool) -> list[TaskRow]:
        """Tasks (only non-terminal ones when ``live_only``)."""

    @abc.abstractmethod
    async def get_task(self, task_id: str) -> TaskRow | None:
        """One task."""

    @abc.abstractmethod
    async def get_checkpoint(self, task_id: str) -> CheckpointRow | None:
        """The task's last checkpoint (None: none was saved)."""

    @abc.abstractmethod
    async def load_observed(self, agent_id: str) -> dict[str, ObservedCounts]:
        """The identity's counts per capability (empty: none observed)."""

    @abc.abstractmethod
    async def load_running_executions(self) -> list[ExecutionRow]:
        """A2A executions still marked running (left by a stopped hub)."""

    @abc.abstractmethod
    async def get_execution(self, execution_id: str) -> ExecutionRow | None:
        """One A2A execution, running or ended."""

    @abc.abstractmethod
    async def get_call_token(self, token_hash: str) -> CallTokenRow | None:
        """The call token with this secret hash, while its execution has not ended."""

    @abc.abstractmethod
    async def list_executions(self, *, root_session_id: str, member_id: str, limit: int) -> list[bytes]:
        """Serialized executions in start order: those of ``root_session_id`` when it is set,
        else those of every root session ``member_id`` took part in (as caller or target),
        else (both "") every execution."""

    @abc.abstractmethod
    async def root_session_members(self, root_session_id: str) -> set[str]:
        """Agent ids that took part (as caller or target) in a root session; empty when it is unknown."""

    @abc.abstractmethod
    async def list_audit(self, *, kind: str, subject_id: str, after_id: int, limit: int) -> list[AuditRow]:
        """Audit records in id order."""
