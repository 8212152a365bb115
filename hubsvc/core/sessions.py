"""Connected participants: where a Connect stream's session starts, resumes and ends.

``connect`` ends an older stream of the same identity (:func:`superseded`: SUPERSEDED, the one
mechanism on one hub and, through :meth:`Sessions.check_holder`, across replicas), resolves the
resume cursors (the client's own, else the stored ones), lists the pending turns in the Welcome
(:meth:`~hubsvc.core.channel.ChannelRuntime.pending_turn`, at most :data:`MAX_PENDING_TURNS`),
replays the WAL above the cursors and then releases the live envelopes; ``deliver`` offers
every committed envelope to the sessions of its channel's members; the cursors the
sessions advance on acks (:mod:`hubsvc.core.delivery`) are written to the store by
the flush loop every ``cursor_flush_interval`` (only the sessions whose cursors moved),
on disconnect and at shutdown. A crash therefore replays to a client that resumes from
the stored cursors at most the envelopes it acked in the last interval.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from agentnet.v1 import channel_pb2, connect_pb2, envelope_pb2
from opentelemetry.trace import Tracer

from hubsvc.core.channel import Members, MemberView
from hubsvc.core.delivery import Session, TurnProbe
from hubsvc.core.options import HubOptions
from hubsvc.core.registry import Registry
from hubsvc.core.steering import SessionSteering
from hubsvc.core.util import Clock, new_id
from hubsvc.recorder import NO_RECORDER, Recorder
from hubsvc.storage import HubStore, Writes
from netkernel.errors import AgentNetError, Superseded

MAX_PENDING_TURNS = 1000
"""Most pending turns one Welcome lists (Welcome.pending_turns_truncated says there were more)."""

RemoteTurns = Callable[[str], Awaitable[tuple[list[connect_pb2.PendingTurn], bool]]]
"""The turns the channels other replicas hold await from an agent, asked of those replicas:
(turns, whether every holder answered)."""


def merged_turns(
    local: list[connect_pb2.PendingTurn], remote: list[connect_pb2.PendingTurn], complete: bool
) -> tuple[list[connect_pb2.PendingTurn], bool]:
    """Held and remote turns in channel order, at most :data:`MAX_PENDING_TURNS`, and whether the
    list is short of some (more than the cap, or a holder that did not answer)."""
    turns = sorted({t.channel_id: t for t in [*local, *remote]}.values(), key=lambda t: t.channel_id)
    return turns[:MAX_PENDING_TURNS], len(turns) > MAX_PENDING_TURNS or not complete


def pending_turn(ch: MemberView, agent_id: str) -> connect_pb2.PendingTurn | None:
    """The turn the live channel ``ch`` awaits from ``agent_id`` now, if any (committed envelopes only)."""
    turn = ch.pending_turn(agent_id)
    if turn is None or turn[0] > ch.committed_seq:
        return None
    return connect_pb2.PendingTurn(channel_id=ch.channel_id, seq=turn[0], envelope_id=turn[1])


def superseded(by: str, *, elsewhere: bool) -> Superseded:
    """The error ending a stream that the newer stream ``by`` (its session id) of the same identity took
    over — the one mechanism on one hub and across replicas (``elsewhere``: through another replica)."""
    where = " (through another hub replica)" if elsewhere else ""
    return Superseded(
        f"this stream was replaced by a newer Connect stream of the same agent{where}: the newer one receives "
        "the deliveries now. Do not reconnect (two processes holding one identity would take the stream from "
        "each other forever); stop this one, or run each process as its own identity.",
        metadata={"cause": "replaced", "superseded_by": by},
    )


class Sessions:
    """The live delivery session of each connected agent, and its cursor bookkeeping."""

    def __init__(
        self,
        store: HubStore,
        registry: Registry,
        options: HubOptions,
        clock: Clock,
        *,
        live_channels: Callable[[], Iterable[MemberView]],
        spawn: Callable[[Any, str], asyncio.Task[Any]],
        refresh_turns: Callable[[str], Awaitable[None]] | None = None,
        record_first: bool = False,
        on_cursor: Callable[[str, str, int], None] | None = None,
        turn_probe: TurnProbe | None = None,
        recorder: Recorder = NO_RECORDER,
        tracer: Tracer | None = None,
    ) -> None:
        self._store = store
        self._registry = registry
        self._options = options
        self._clock = clock
        self._live_channels = live_channels
        self._spawn = spawn
        self._refresh_turns = refresh_turns
        """Catches up the channels awaiting a turn of an agent that a shared store holds more of."""
        self._record_first = record_first
        """Write a new stream's record before its catch-up (the channels are divided among replicas:
        the others tell this one of the agent's channels once the record says the stream is here)."""
        self.steering: SessionSteering | None = None
        """Asks streams whose channels another replica mostly holds to move there (set with divided channels)."""
        self.remote_turns: RemoteTurns | None = None
        """Asks the replicas holding an agent's other channels for their turns (set with divided channels)."""
        self._on_cursor = on_cursor
        """Told ``(agent_id, channel_id, cursor)`` whenever an agent's cursor moves (acks, skips, a Hello ahead)."""
        self._turn_probe = turn_probe
        """Whether an agent may post ag2.msg.text into a channel now (stamped on substantive deliveries)."""
        self._recorder = recorder
        """Told about replays and every delivery frame (hubsvc/metrics.py)."""
        self._tracer = tracer
        """Records a span per traced delivery (None: tracing off)."""
        self._sessions: dict[str, Session] = {}
        self._unrecorded: dict[str, bool] = {}
        """Session id → whether a holder read came in before the shared store recorded the stream
        (it is read again then); only streams of this replica whose record is still being written."""
        self._dirty: set[Session] = set()
        self._cursor_write: asyncio.Future[None] | None = None
        """The latest cursor write queued (writes commit in order: once it is done, so are the earlier)."""
        """Sessions whose cursors moved since they were last written."""

    async def connect(self, agent_id: str, hello: connect_pb2.Hello) -> tuple[Session, connect_pb2.Welcome]:
        """Open the agent's delivery session, replacing an older one, and start the replay."""
        old = self._sessions.get(agent_id)
        session_id = new_id()
        if old is not None:
            old.close(superseded(session_id, elsewhere=False))
            self._flush([old])
        limit = self._options.max_in_flight
        max_in_flight = min(hello.max_in_flight, limit) if hello.max_in_flight else limit
        session = Session(
            agent_id,
            session_id,
            max_in_flight=max_in_flight,
            max_queued=self._options.max_queued,
            clock=self._clock,
            max_bytes=self._options.max_stream_buffer_bytes,
            max_batch=min(hello.max_batch, self._options.max_batch) if hello.max_batch else 1,
            max_batch_bytes=self._options.max_batch_bytes,
            on_dirty=self._note_dirty,
            on_cursor=self._on_cursor,
            turn_probe=self._turn_probe,
            recorder=self._recorder,
            tracer=self._tracer,
        )
        session.follows_redirects = hello.follows_redirects and self.steering is not None
        # Registered before the marks are taken: whatever commits after a mark is buffered, not lost.
        self._sessions[agent_id] = session
        self._registry.touch(agent_id, online=True)
        recorded = self._record_holder(agent_id, session.session_id, True)
        written = self._cursor_write
        if written is not None and not written.done():
            # The acks a stream of this agent flushed as it ended (a reconnect follows at once):
            # read the stored cursors after they are written, not before.
            await asyncio.wait([written])
        if recorded is not None and self._record_first:
            # Other replicas tell this one of the agent's channels only once the stream's record is
            # written: the catch-up below, after it, reads what was appended before.
            try:
                await recorded
            except BaseException:
                self.disconnect(session)
                raise
        stored = await self._store.load_cursors(agent_id)
        if self._refresh_turns is not None:
            # A turn another replica saw answered is not listed (the client would answer it
            # again); what the catch-up publishes comes before the marks, so the replay covers it.
            await self._refresh_turns(agent_id)
        marks: dict[str, int] = {}
        held: list[connect_pb2.PendingTurn] = []
        for ch in list(self._live_channels()):
            if agent_id in ch.participants:
                marks[ch.channel_id] = ch.committed_seq
                turn = ch.pending_turn(agent_id)
                if turn is not None and turn[0] <= ch.committed_seq:
                    held.append(connect_pb2.PendingTurn(channel_id=ch.channel_id, seq=turn[0], envelope_id=turn[1]))
        session.marks_taken()  # a channel publishes after its committed seq moves: what came before is marked
        # The turns of channels other replicas hold, asked of them (bounded: a holder that does not
        # answer in time is left out and the list marked truncated, so the client lists them later).
        remote, complete = await self.remote_turns(agent_id) if self.remote_turns is not None else ([], True)
        turns, truncated = merged_turns(held, remote, complete)
        for _, row in await self._store.list_channels_for(agent_id, include_ended=True, limit=1000):
            if row.channel_id not in marks and not row.live:
                marks[row.channel_id] = channel_pb2.ChannelMetadata.FromString(row.record).last_seq
        # The client's own cursor wins (it may know better than the last flushed ack), within
        # what the channel holds: a cursor past the last seq would hide envelopes still to come.
        cursors = {
            c: min(max(hello.cursors[c], 0), mark) if c in hello.cursors else stored.get(c, 0)
            for c, mark in marks.items()
        }
        ahead = [(agent_id, c, seq) for c, seq in cursors.items() if seq > stored.get(c, 0)]
        if ahead:  # remember what the client already processed, as an ack would
            self._store.submit(Writes(cursors=ahead))
            if self._on_cursor is not None:
                for _, channel_id, seq in ahead:
                    self._on_cursor(agent_id, channel_id, seq)
        for channel_id, cursor in cursors.items():
            session.start_replay_channel(channel_id, cursor)
        welcome = connect_pb2.Welcome(
            agent_id=agent_id,
            session_id=session.session_id,
            cursors=cursors,
            keepalive_seconds=self._options.keepalive_seconds,
            max_post_batch=self._options.max_batch,
            post_batch_ack=self._options.max_batch > 0,
            pending_turns=turns,
            pending_turns_truncated=truncated,
        )
        self._spawn(self._replay(session, marks, cursors), f"replay-{agent_id}")
        return session, welcome

    async def _replay(self, session: Session, marks: dict[str, int], cursors: dict[str, int]) -> None:
        """Queue every envelope above each channel's cursor up to its mark, then release the live ones."""
        try:
            for channel_id, mark in marks.items():
                next_seq = cursors[channel_id] + 1
                while next_seq <= mark and not session.closed:
                    page = await self._store.read_wal(channel_id, next_seq, mark, 1000)
                    if not page:
                        break
                    for data in page:
                        await session.room()  # back-pressure: the WAL holds the rest, no need to queue it all
                        if session.closed:
                            break
                        wire = envelope_pb2.Envelope.FromString(data)
                        session.replay(wire, len(data))
                        next_seq = wire.seq + 1
                    self._recorder.replayed(len(page))
        finally:
            session.finish_replay(marks)

    def streams_here(self, agent_id: str) -> bool:
        """Whether ``agent_id`` has its Connect stream on this replica."""
        return agent_id in self._sessions

    def connected(self) -> int:
        """Connect streams open on this replica (each replica counts its own)."""
        return len(self._sessions)

    def disconnect(self, session: Session) -> None:
        """The stream ended: flush the session's cursors and forget it."""
        session.close()
        self._flush([session])
        if self._sessions.get(session.agent_id) is session:
            del self._sessions[session.agent_id]
            self._registry.touch(session.agent_id, online=False)
            self._record_holder(session.agent_id, session.session_id, False)

    def _record_holder(self, agent_id: str, session_id: str, connected: bool) -> asyncio.Future[None] | None:
        """Tell the other replicas sharing the store that this stream began or ended (a stream of the
        same identity they hold is then replaced); a store no other replica shares has no one to tell
        (None). Returns the record's write."""
        if self._store.feed is None:
            return None
        written = self._store.submit(Writes(sessions=[(agent_id, session_id, connected)]))
        if connected:
            self._unrecorded[session_id] = False
            written.add_done_callback(lambda done: self._holder_recorded(agent_id, session_id, done))
        return written

    def _holder_recorded(self, agent_id: str, session_id: str, written: asyncio.Future[None]) -> None:
        """A stream's record reached the store (or failed to): read the holder again if a read
        came in meanwhile, since that read may have been answered before the record was written."""
        if not written.cancelled():
            written.exception()  # a failed write is seen by the read below; nothing else waits on it
        session = self._sessions.get(agent_id)
        if self._unrecorded.pop(session_id, False) and session is not None and session.session_id == session_id:
            self._spawn(self.check_holder(agent_id), f"holder-{agent_id}")

    async def check_holder(self, agent_id: str) -> None:
        """Another replica recorded that a stream of ``agent_id`` began or ended: read which stream
        the shared store now names and apply it (:meth:`holder_changed`).

        A read answered before this replica's own newer stream was recorded would name an older
        stream and wrongly end the newer one, so while that record is being written the read waits
        for it, and a stream that begins or ends here during the read makes it read again."""
        while True:
            session = self._sessions.get(agent_id)
            if session is not None and session.session_id in self._unrecorded:
                self._unrecorded[session.session_id] = True  # read again once it is recorded
                return
            holder = await self._store.session_of(agent_id)
            if self._sessions.get(agent_id) is session:
                self.holder_changed(agent_id, holder)
                return

    def holder_changed(self, agent_id: str, holder: str | None) -> None:
        """Another replica recorded ``holder`` as the identity's current stream (None: it has
        none): a stream of it here that is not that one was replaced, as on one hub."""
        session = self._sessions.get(agent_id)
        if session is not None and holder is not None and holder != session.session_id:
            del self._sessions[agent_id]
            session.close(superseded(holder, elsewhere=True))
            self._flush([session])
            session = None
        if session is None:
            self._registry.touch(agent_id, online=holder is not None)

    def deliver(self, ch: Members, wires: list[envelope_pb2.Envelope]) -> None:
        """Offer committed envelopes of ``ch`` to its connected members (each session filters by audience)."""
        sessions = [s for s in (self._sessions.get(p) for p in ch.participants) if s is not None]
        if not sessions:
            return
        for wire in wires:
            size = wire.ByteSize()
            for session in sessions:
                session.offer(wire, size)

    def deliver_followed(self, ch: Members, wires: list[envelope_pb2.Envelope]) -> None:
        """:meth:`deliver` for a channel another replica holds: its members here may be steered there."""
        self.deliver(ch, wires)
        if self.steering is not None:
            self.steering.used_elsewhere(s for s in (self._sessions.get(p) for p in ch.participants) if s)

    def queue_stats(self) -> tuple[int, int, int, int]:
        """(connected streams, queued deliveries, queued bytes, the largest stream's queued bytes)."""
        sessions = list(self._sessions.values())
        sizes = [s.buffered_bytes for s in sessions]
        return len(sessions), sum(s.queued_envelopes for s in sessions), sum(sizes), max(sizes, default=0)

    def close(self, agent_id: str, error: AgentNetError) -> None:
        """End the agent's stream, if it has one, with ``error``."""
        session = self._sessions.get(agent_id)
        if session is not None:
            session.close(error)

    def close_all(self, error: AgentNetError) -> None:
        """End every stream with ``error`` (clients resume from their cursors)."""
        for session in list(self._sessions.values()):
            session.close(error)

    def flush_cursors(self) -> None:
        """Queue the write of every cursor the sessions advanced since the last flush."""
        dirty, self._dirty = self._dirty, set()
        self._flush(dirty)

    def _note_dirty(self, session: Session) -> None:
        self._dirty.add(session)

    async def flush_loop(self) -> None:
        """Flush cursors every ``cursor_flush_interval`` seconds, until cancelled."""
        while True:
            await asyncio.sleep(self._options.cursor_flush_interval)
            self.flush_cursors()

    def _flush(self, sessions: Iterable[Session]) -> None:
        """Queue one write of the cursors ``sessions`` advanced since their last flush."""
        self._dirty.difference_update(sessions)
        rows = [(session.agent_id, c, s) for session in sessions for c, s in session.take_dirty().items()]
        if rows:
            self._cursor_write = self._store.submit(Writes(cursors=rows))
