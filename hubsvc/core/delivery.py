"""Per-participant delivery sessions: priority queues, flow control and cursors.

A :class:`Session` exists while a participant has a live ``Connect`` stream.
Committed envelopes are offered to the session of every member that may see
them; the session hands them out urgent-first (FIFO within a priority), at most
``max_in_flight`` unacked at a time, and turns acks into per-channel cursors:
the cursor of a channel is the highest seq below which everything visible was
acked (or was not for this participant to see). Each delivery names the previous
seq of the participant's chain (``prev_seq``) so clients can keep exact cursors of
their own. Envelopes whose ``ttl_seconds`` ran out before delivery are sent as
content-less ``expired`` slots. A session whose client asked for batches
(``max_batch`` > 1) packs what is already queued when the stream is ready to write
(post results, then deliveries in the same order, within ``max_batch`` entries and
``max_batch_bytes``) into one ``batch`` frame; it never waits to fill one. While a
session replays the WAL from its resume cursors, live envelopes wait in a buffer so
order is kept. Opening, resuming and closing sessions, and writing their cursors to
the store, is :mod:`hubsvc.core.sessions`.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from agentnet.v1 import connect_pb2, envelope_pb2
from opentelemetry import trace

from hubsvc.core.options import HubOptions
from hubsvc.core.util import Clock, parse_iso_z
from hubsvc.recorder import NO_RECORDER, Recorder
from netkernel.envelope import EV_PACKET, EV_TEXT
from netkernel.errors import AgentNetError, InboxFull
from netkernel.tracecontext import context_of
from netkernel.wire import wire_visible_to

_PRIORITY_RANK = {
    envelope_pb2.PRIORITY_URGENT: 0,
    envelope_pb2.PRIORITY_NORMAL: 1,
    envelope_pb2.PRIORITY_UNSPECIFIED: 1,
    envelope_pb2.PRIORITY_BACKGROUND: 2,
}


_Outgoing = tuple[envelope_pb2.Envelope, bool, int]
"""A delivery taken from the queue: (envelope, replay, prev_seq)."""

TurnProbe = Callable[[str, str, str], bool | None]
"""``(agent_id, channel_id, envelope_id)`` → may that participant post an ag2.msg.text reply to the
envelope there now (CanSend's answer); None when this replica cannot tell (another one holds the channel)."""

_TURN_EVENT_TYPES = frozenset({EV_TEXT, EV_PACKET})
"""The substantive event types whose live deliveries carry ``Delivery.can_send``."""


class _Signal:
    """An asyncio event for one waiter at a time, without ``asyncio.Event``'s waiter deque.

    A hub keeps a session per connected participant, most of them idle; each session's two
    events cost about 2 KiB as ``asyncio.Event`` and a few dozen bytes as this. Each signal
    of a session has one waiter by construction (the stream's writer, the replay task)."""

    __slots__ = ("_set", "_waiter")

    def __init__(self, value: bool = False) -> None:
        self._set = value
        self._waiter: asyncio.Future[None] | None = None

    def set(self) -> None:
        """Set the flag and wake the waiter, if any."""
        self._set = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def clear(self) -> None:
        """Reset the flag."""
        self._set = False

    async def wait(self) -> None:
        """Return once the flag is set (at once if it is)."""
        if self._set:
            return
        assert self._waiter is None, "a session signal has one waiter at a time"
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None


def is_expired(wire: envelope_pb2.Envelope, now: float) -> bool:
    """True when the envelope's own TTL ran out."""
    if not wire.HasField("ttl_seconds") or not wire.created_at:
        return False
    return parse_iso_z(wire.created_at) + wire.ttl_seconds <= now


@dataclass
class _ChannelCursor:
    seen_upto: int = 0
    """Every seq <= this was offered to (or skipped for) the session."""
    outstanding: set[int] = field(default_factory=set)
    """Offered seqs not yet acked (queued or sent)."""
    sent: set[int] = field(default_factory=set)
    """The outstanding seqs already written to the stream (they count against max_in_flight)."""
    _order: list[int] = field(default_factory=list)
    """Min-heap over outstanding seqs with lazy deletion (acks are O(log n), not O(n))."""
    last_visible: int = 0
    """Seq of the last envelope in this participant's chain (Delivery.prev_seq of the next one)."""

    def add(self, seq: int) -> None:
        self.outstanding.add(seq)
        heapq.heappush(self._order, seq)

    def value(self) -> int:
        order = self._order
        while order and order[0] not in self.outstanding:
            heapq.heappop(order)
        return order[0] - 1 if order else self.seen_upto


class Session:
    """One participant's live stream.

    Everything queued for the stream and not yet written to it (deliveries, post results,
    the pending pong, live envelopes held back during replay) is counted in
    :attr:`buffered_bytes`; a session that would go past ``max_bytes`` is closed with
    :class:`~netkernel.errors.InboxFull` and drops what it queued (the client resumes from
    its cursors: everything dropped is in the WAL above them).
    """

    def __init__(
        self,
        agent_id: str,
        session_id: str,
        *,
        max_in_flight: int,
        max_queued: int,
        clock: Clock,
        max_bytes: int = HubOptions.max_stream_buffer_bytes,
        max_batch: int = 1,
        max_batch_bytes: int = HubOptions.max_batch_bytes,
        on_dirty: Callable[[Session], None] | None = None,
        on_cursor: Callable[[str, str, int], None] | None = None,
        turn_probe: TurnProbe | None = None,
        recorder: Recorder = NO_RECORDER,
        tracer: trace.Tracer | None = None,
    ) -> None:
        self.agent_id = agent_id
        self.session_id = session_id
        self.max_in_flight = max_in_flight
        self.max_queued = max_queued
        self.max_bytes = max_bytes
        self.max_batch = max(1, max_batch)
        """Most entries per frame; 1 = single frames only (clients that did not opt in)."""
        self.max_batch_bytes = max_batch_bytes
        self._clock = clock
        self._heap: list[tuple[int, int, str, envelope_pb2.Envelope, bool, int, int]] = []
        self._counter = itertools.count()
        self._control: deque[tuple[connect_pb2.ConnectResponse, int]] = deque()
        self._pong: tuple[connect_pb2.ConnectResponse, int] | None = None
        self._redirect: tuple[connect_pb2.ConnectResponse, int] | None = None
        """A Redirect waiting to be sent: a frame of its own, never packed into a batch."""
        self._wakeup = _Signal()
        self._room = _Signal(True)
        self._in_flight = 0
        self._cursors: dict[str, _ChannelCursor] = {}
        self._replaying = True
        self._marked = False
        """Whether the replay's marks are taken (before that, every offered envelope is at or below its
        channel's mark-to-be: the replay reads it from the WAL)."""
        self._buffer: list[tuple[envelope_pb2.Envelope, int]] = []
        self._closed = False
        self._close_error: AgentNetError | None = None
        self.buffered_bytes = 0
        """Bytes queued for the stream and not yet written to it."""
        self.follows_redirects = False
        """Whether the client may be sent a Redirect (its Hello said it follows them, and this replica steers)."""
        self.steer_after = 0.0
        """When the stream may next be considered for a Redirect (:mod:`hubsvc.core.steering`)."""
        self.dirty: dict[str, int] = {}
        """channel_id -> cursor changed since the last flush."""
        self._on_dirty = on_dirty
        """Told when ``dirty`` gains its first entry since the last :meth:`take_dirty`."""
        self._on_cursor = on_cursor
        """Told ``(agent_id, channel_id, cursor)`` whenever a cursor moves (the inbox count follows it)."""
        self._turn_probe = turn_probe
        """Asked, when a live substantive delivery is written, for its ``can_send`` (None: left unset)."""
        self._recorder = recorder
        """Told about every frame of deliveries written (hubsvc/metrics.py)."""
        self._tracer = tracer
        """Records a delivery span per queued envelope that carries a trace context (None: tracing off)."""
        self._spans: dict[tuple[str, int], trace.Span] = {}
        """The open delivery spans: (channel_id, seq) → span, from queued until written (or dropped)."""

    @property
    def queued_envelopes(self) -> int:
        """Deliveries queued and not yet written (live ones held back during replay included)."""
        return len(self._heap) + len(self._buffer)

    @property
    def queued_frames(self) -> int:
        """Frames waiting to be written (deliveries, post results, the pending pong and Redirect)."""
        waiting = (self._pong is not None) + (self._redirect is not None)
        return len(self._heap) + len(self._control) + len(self._buffer) + waiting

    def _reserve(self, size: int, what: str) -> bool:
        """Count ``size`` more bytes, or close the session (InboxFull) when they do not fit."""
        if self.buffered_bytes and self.buffered_bytes + size > self.max_bytes:
            self._overflow(size, what)
            return False
        self.buffered_bytes += size
        return True

    def _release(self, size: int) -> None:
        self.buffered_bytes -= size
        if self.buffered_bytes <= self.max_bytes // 2:
            self._room.set()

    def _overflow(self, size: int, what: str) -> None:
        self.close(
            InboxFull(
                f"the hub ended this stream because the client is not reading it: {self.buffered_bytes} bytes "
                f"were queued for it and {what} of {size} bytes would pass the limit of {self.max_bytes} bytes "
                "(--max-stream-buffer-bytes). Nothing is lost: reconnect and resume from your cursors "
                "(the hub stored the ones your acks reached); read the stream and ack as you go.",
                metadata={
                    "cause": "slow_consumer",
                    "buffered_bytes": str(self.buffered_bytes),
                    "limit_bytes": str(self.max_bytes),
                },
            )
        )

    # -- inbound: what the hub offers -------------------------------------------------

    def offer(self, wire: envelope_pb2.Envelope, size: int) -> None:
        """Offer a committed envelope (``size`` = its serialized size) of one of this participant's channels."""
        if self._closed:
            return
        if self._replaying:
            if not self._marked:
                return  # committed before the marks are read: the replay covers it (not held twice)
            if self._reserve(size, "a live envelope held back during replay"):
                self._buffer.append((wire, size))
            return
        self._accept(wire, size, replay=False)

    def marks_taken(self) -> None:
        """The replay's marks are read (each channel's committed seq): live envelopes offered from now
        on may lie above them, so they are held back until the replay ends."""
        self._marked = True

    def start_replay_channel(self, channel_id: str, cursor: int) -> None:
        """Begin replay of a channel from ``cursor`` (everything <= cursor counts as done)."""
        state = self._cursors.setdefault(channel_id, _ChannelCursor())
        state.seen_upto = max(state.seen_upto, cursor)
        state.last_visible = max(state.last_visible, cursor)

    def replay(self, wire: envelope_pb2.Envelope, size: int) -> None:
        """Queue an envelope read from the WAL during resume (wait for :meth:`room` first)."""
        self._accept(wire, size, replay=True)

    async def room(self) -> None:
        """Wait until at most half the byte budget is used (or the session closed): replay's back-pressure."""
        while not self._closed and self.buffered_bytes > self.max_bytes // 2:
            self._room.clear()
            await self._room.wait()

    def finish_replay(self, marks: dict[str, int]) -> None:
        """Replay covered each channel up to ``marks[channel]``; release the buffered live envelopes."""
        for channel_id, mark in marks.items():
            state = self._cursors.setdefault(channel_id, _ChannelCursor())
            state.seen_upto = max(state.seen_upto, mark)
        self._replaying = False
        buffered, self._buffer = self._buffer, []
        for wire, size in buffered:
            self._release(size)
            known = self._cursors.get(wire.channel_id)
            if known is not None and wire.seq <= known.seen_upto:
                continue  # already delivered by the replay
            self._accept(wire, size, replay=False)

    def _accept(self, wire: envelope_pb2.Envelope, size: int, *, replay: bool) -> None:
        state = self._cursors.setdefault(wire.channel_id, _ChannelCursor(seen_upto=wire.seq - 1))
        if wire.seq <= state.seen_upto:
            return
        if wire.sender_id == self.agent_id or not wire_visible_to(wire, self.agent_id):
            # Not for this participant, or its own post (the PostResult already returned it).
            self._skip(state, wire)
            return
        prev, state.last_visible = state.last_visible, wire.seq
        state.seen_upto = wire.seq
        state.add(wire.seq)
        if len(self._heap) >= self.max_queued:
            self._overflow(size, f"delivery number {self.max_queued + 1}")
            return
        if not self._reserve(size, "a delivery"):
            return
        rank = _PRIORITY_RANK.get(wire.priority, 1)
        heapq.heappush(self._heap, (rank, next(self._counter), wire.channel_id, wire, replay, prev, size))
        if self._tracer is not None and wire.trace_id:
            self._trace(wire, replay)
        self._wakeup.set()

    def _trace(self, wire: envelope_pb2.Envelope, replay: bool) -> None:
        """Open the delivery span of a queued envelope, a child of the context its ``trace_id`` carries
        (read from the WAL for a replay or another replica's commit, so the trace goes on)."""
        parent = context_of(wire.trace_id)
        if parent is None or self._tracer is None:
            return
        self._spans[(wire.channel_id, wire.seq)] = self._tracer.start_span(
            "agentnet.hub.deliver",
            context=parent,
            kind=trace.SpanKind.PRODUCER,
            attributes={
                "agentnet.channel_id": wire.channel_id,
                "agentnet.seq": wire.seq,
                "agentnet.envelope_id": wire.envelope_id,
                "agentnet.recipient_id": self.agent_id,
                "agentnet.replay": replay,
            },
        )

    def _end_span(self, channel_id: str, seq: int, outcome: str) -> None:
        span = self._spans.pop((channel_id, seq), None)
        if span is not None:
            span.set_attribute("agentnet.delivery", outcome)
            span.end()

    def _skip(self, state: _ChannelCursor, wire: envelope_pb2.Envelope) -> None:
        before = state.value()
        state.seen_upto = max(state.seen_upto, wire.seq)
        if state.value() != before:
            self._mark_dirty(wire.channel_id, state.value())

    def control(self, frame: connect_pb2.ConnectResponse) -> None:
        """Queue a control frame (a post result); sent ahead of deliveries, counted in the byte budget."""
        if self._closed:
            return
        size = frame.ByteSize()
        if self._reserve(size, "a post result"):
            self._control.append((frame, size))
            self._wakeup.set()

    def pong(self, nonce: int) -> None:
        """Answer a Ping. At most one pong waits: a newer ping replaces the unsent answer to an older one."""
        if not self._closed:
            frame = connect_pb2.ConnectResponse(pong=connect_pb2.Pong(nonce=nonce))
            self._pong = self._replacing(self._pong, frame, "a pong")

    def redirect(self, address: str, reason: str) -> None:
        """Ask the client to move the stream to the replica at ``address`` (docs/scale-out.md "Session
        steering"): a Redirect frame, sent before anything else queued, in a frame of its own. At most
        one waits: a newer one replaces an unsent older one."""
        if not self._closed:
            frame = connect_pb2.ConnectResponse(redirect=connect_pb2.Redirect(address=address, reason=reason))
            self._redirect = self._replacing(self._redirect, frame, "a redirect")

    def _replacing(
        self, waiting: tuple[connect_pb2.ConnectResponse, int] | None, frame: connect_pb2.ConnectResponse, what: str
    ) -> tuple[connect_pb2.ConnectResponse, int] | None:
        """The one frame of its kind that waits (a pong, a Redirect): ``frame``, in place of the unsent
        ``waiting`` one, counted in the byte budget (None when it does not fit: the session closed)."""
        if waiting is not None:
            self._release(waiting[1])
        size = frame.ByteSize()
        if not self._reserve(size, what):
            return None
        self._wakeup.set()
        return frame, size

    def ack(self, channel_id: str, seq: int) -> None:
        """Mark one delivered envelope processed (unknown acks are ignored)."""
        state = self._cursors.get(channel_id)
        if state is None or seq not in state.outstanding:
            return
        before = state.value()
        state.outstanding.discard(seq)
        if seq in state.sent:
            state.sent.discard(seq)
            self._in_flight -= 1
        if state.value() != before:
            self._mark_dirty(channel_id, state.value())
        if self._heap:  # a queued delivery may fit under max_in_flight now; else the stream has nothing new to send
            self._wakeup.set()

    def cursor(self, channel_id: str) -> int:
        """The channel's current cursor for this session."""
        state = self._cursors.get(channel_id)
        return state.value() if state else 0

    def _mark_dirty(self, channel_id: str, cursor: int) -> None:
        if not self.dirty and self._on_dirty is not None:
            self._on_dirty(self)
        self.dirty[channel_id] = cursor
        if self._on_cursor is not None:
            self._on_cursor(self.agent_id, channel_id, cursor)

    def take_dirty(self) -> dict[str, int]:
        """Cursors changed since the last call."""
        dirty, self.dirty = self.dirty, {}
        return dirty

    def close(self, error: AgentNetError | None = None) -> None:
        """End the session; the stream finishes (with ``error`` if given).

        Unsent frames are dropped at once (the stream may stay blocked on a client that reads
        nothing): the client resumes from its cursors, above which everything is in the WAL."""
        if not self._closed:
            self._closed = True
            self._close_error = error
            if self._spans:
                for channel_id, seq in list(self._spans):
                    self._end_span(channel_id, seq, "dropped")
            self._heap.clear()
            self._buffer.clear()
            self._control.clear()
            self._pong = self._redirect = None
            self.buffered_bytes = 0
            self._room.set()
            self._wakeup.set()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed

    # -- outbound: what the stream sends ----------------------------------------------

    async def next_frame(self) -> connect_pb2.ConnectResponse | None:
        """The next frame to send; None when the session closed cleanly.

        With ``max_batch`` > 1, several queued post results and deliveries come as one ``batch``
        frame (a batch of one as its single frame). Raises the close error when the session was
        closed with one.
        """
        while True:
            if self._redirect is not None:
                (frame, size), self._redirect = self._redirect, None
                self._release(size)
                return frame
            if self._control:
                if self.max_batch == 1:
                    frame, size = self._control.popleft()
                    self._release(size)
                    return frame
                batch = self._batch()
                assert batch is not None  # a queued post result always fits
                return batch
            if self._pong is not None:
                (frame, size), self._pong = self._pong, None
                self._release(size)
                return frame
            if self._closed:
                if self._close_error is not None:
                    raise self._close_error
                return None
            if self._heap and self._in_flight < self.max_in_flight:
                if self.max_batch > 1:
                    batch = self._batch()
                    if batch is not None:
                        return batch
                    continue
                popped = self._pop_delivery()
                if popped is not None:
                    return self._single(popped)
                continue
            self._wakeup.clear()
            await self._wakeup.wait()

    def _batch(self) -> connect_pb2.ConnectResponse | None:
        """Pack what is queued now: post results first, then (unless a pong waits to go before them)
        deliveries, within ``max_batch`` entries and ``max_batch_bytes`` (the first entry always fits).
        None when everything it looked at was acked meanwhile."""
        results: list[connect_pb2.ConnectResponse] = []
        deliveries: list[_Outgoing] = []
        count = total = 0
        limit, budget = self.max_batch, self.max_batch_bytes
        control = self._control
        while control and count < limit and (not count or total + control[0][1] <= budget):
            frame, size = control.popleft()
            self._release(size)
            results.append(frame)
            count += 1
            total += size
        heap = self._heap
        if self._pong is None:
            while heap and count < limit and self._in_flight < self.max_in_flight:
                size = heap[0][6]
                if count and total + size > budget:
                    break
                popped = self._pop_delivery()
                if popped is not None:
                    deliveries.append(popped)
                    count += 1
                    total += size
        if count <= 1:
            if results:
                return results[0]
            return self._single(deliveries[0]) if deliveries else None
        if deliveries:
            self._recorder.delivered(len(deliveries))
        response = connect_pb2.ConnectResponse()
        batch = response.batch
        for frame in results:
            batch.post_results.add().CopyFrom(frame.post_result)
        for outgoing in deliveries:
            self._fill(batch.deliveries.add(), outgoing)
        return response

    def _single(self, outgoing: _Outgoing) -> connect_pb2.ConnectResponse:
        self._recorder.delivered(1)
        response = connect_pb2.ConnectResponse()
        self._fill(response.delivery, outgoing)
        return response

    def _pop_delivery(self) -> _Outgoing | None:
        """Take the first queued delivery (None when it was acked meanwhile) and count it in flight."""
        _, _, channel_id, wire, replay, prev, size = heapq.heappop(self._heap)
        self._release(size)
        if self._spans:
            self._end_span(channel_id, wire.seq, "written")
        state = self._cursors[channel_id]
        if wire.seq not in state.outstanding:
            return None
        state.sent.add(wire.seq)
        self._in_flight += 1
        return wire, replay, prev

    def _fill(self, delivery: connect_pb2.Delivery, outgoing: _Outgoing) -> None:
        """Write one delivery into ``delivery`` (an expired envelope as its content-less slot)."""
        wire, replay, prev = outgoing
        if is_expired(wire, self._clock()):
            # Stale: withhold the content but keep the slot, so client cursors stay exact.
            env = delivery.envelope
            env.channel_id, env.seq, env.envelope_id, env.event_type = (
                wire.channel_id,
                wire.seq,
                wire.envelope_id,
                wire.event_type,
            )
            delivery.expired = True
        else:
            delivery.envelope.CopyFrom(wire)
            if not replay and self._turn_probe is not None and wire.event_type in _TURN_EVENT_TYPES:
                can_send = self._turn_probe(self.agent_id, wire.channel_id, wire.envelope_id)
                if can_send is not None:
                    delivery.can_send = can_send
        delivery.replay = replay
        delivery.prev_seq = prev
