"""One identity's live ``Connect`` stream, kept alive.

:class:`DeliveryStream` connects, resumes from the identity's cursors, reconnects
with jittered backoff when the stream breaks, hands every envelope to the
identity's dispatcher exactly once (duplicates after a reconnect are dropped by
envelope id), processes each channel in order while channels run in parallel,
acks after processing (the acks of one event-loop turn in one frame, or riding with the next
post, :mod:`agentsdk.network._acks`), asks the hub
for batched frames (``max_batch``) and unpacks them in order, and posts envelopes over the stream (posts
queued together go in one PostBatch frame, :mod:`agentsdk.network._outbox`; falling back to the
unary ``PostEnvelope`` when the stream is down; every post carries an idempotency
key, so a retry never admits a copy); a post refused with RATE_LIMITED is sent again
after the hub's ``retry_after_seconds`` (:mod:`agentsdk.backoff`).

A stream ended with SUPERSEDED (a newer Connect of the same identity took it over) or a refused
credential stops for good (:attr:`DeliveryStream.fatal`): reconnecting would take the stream back.
Each Welcome's pending turns (channels awaiting this identity's answer) are handed to the
dispatcher once: those above their resume cursor come as replays anyway, those acked earlier
without an answer are read back from the WAL, and those this stream already handled are skipped.

What waits for the handlers is bounded in bytes (``HubConnection.max_queued_delivery_bytes``,
all channels together): beyond it the stream stops reading frames until the handlers catch
up, so gRPC's flow control holds the rest at the hub, whose own per-stream byte budget then
applies (a client that stays behind too long is ended with INBOX_FULL and resumes from its
cursors) — nothing is dropped. While reading is paused, posts go by the unary ``PostEnvelope``
(their results would wait behind the unread frames), including those already sent on the
stream, which are sent again under the same idempotency key.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import random
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractContextManager

from agentnet.v1 import connect_pb2, envelope_pb2, hub_pb2
from opentelemetry import trace

from agentsdk.backoff import retry_rate_limited
from agentsdk.network._acks import ACK_DELAY, AckCoalescer
from agentsdk.network._channel_queue import ChannelQueue
from agentsdk.network._cursors import CursorBook
from agentsdk.network._deadlines import Deadlines
from agentsdk.network._outbox import Outbox
from agentsdk.network._unary_post import UnaryPoster, admitted_unless_moving
from agentsdk.network.turn_context import enter_delivery, exit_delivery
from agentsdk.rpc import HubRpc
from agentsdk.transport import HubConnection
from netkernel.envelope import EV_CHANNEL_CLOSED, EV_CHANNEL_EXPIRED
from netkernel.errors import (
    AgentNetError,
    PermissionDenied,
    RateLimited,
    Superseded,
    Unauthenticated,
    Unavailable,
)
from netkernel.tracecontext import context_of


def _expire(fut: asyncio.Future[connect_pb2.PostResult]) -> None:
    """A post's deadline passed: its wait ends with TimeoutError (as ``asyncio.wait_for``'s would)."""
    if not fut.done():
        fut.set_exception(TimeoutError())


_CHANNEL_ENDED = frozenset({EV_CHANNEL_CLOSED, EV_CHANNEL_EXPIRED})
LISTING_ATTEMPTS = 5
"""Tries of the pending-turn listing after a truncated Welcome (pauses about 0.5, 1, 2 and 4 s between)."""
REDIRECT_PAUSE = 60.0
"""Seconds a stream follows no Redirect after one whose replica it could not connect to."""
SEEN_IDS = 100_000
"""How many of the newest envelope ids a stream remembers, to hand each envelope to the dispatcher once."""
log = logging.getLogger("agentnet.sdk")

Dispatch = Callable[[envelope_pb2.Envelope, int], Awaitable[None] | None]
"""Hands one envelope and its wire size in bytes to the identity: returns what to await before the
channel's next envelope, or None when the envelope was handled within the call (no coroutine made for it)."""


async def _awaited(pending: Awaitable[None] | None) -> None:
    """Await ``pending`` unless it is None (a :data:`Dispatch` that finished within its call)."""
    if pending is not None:
        await pending


class DeliveryStream:
    """Keeps one identity's Connect stream alive and dispatches its envelopes."""

    def __init__(
        self,
        conn: HubConnection,
        credential: str,
        dispatch: Dispatch,
        *,
        cursors: CursorBook | None = None,
        max_in_flight: int = 256,
        max_batch: int = 256,
        client_name: str = "agentsdk-python",
        max_backoff: float = 2.0,
        on_fatal: Callable[[AgentNetError], None] | None = None,
        on_welcome: Callable[[connect_pb2.Welcome], None] | None = None,
    ) -> None:
        self.conn = conn
        """The connection the identity was given (its ``target``: where the stream connects first)."""
        self.credential = credential
        self.rpc = HubRpc(conn, credential)
        """The stream's calls, on the connection the stream is on now."""
        self._unary = UnaryPoster(conn, credential)
        """PostEnvelope when the stream is down, inside :meth:`post`'s own RATE_LIMITED retry."""
        self.redirected_to: str | None = None
        """The replica address a hub's Redirect moved the stream to (None: the stream is on :attr:`conn`)."""
        self._redirects_paused_until = 0.0
        """Redirects are not followed before this (event-loop) time: the last one led nowhere."""
        self.dispatch = dispatch
        self.cursors = cursors or CursorBook()
        self.max_in_flight = max_in_flight
        self.max_batch = max_batch
        """Most post results and deliveries per frame the hub may send (0 = one per frame)."""
        self.client_name = client_name
        self.max_backoff = max_backoff
        self.connected = asyncio.Event()
        self.fatal: AgentNetError | None = None
        """The error that ended the stream for good (no reconnect follows): a refused credential, or
        SUPERSEDED — a newer Connect stream of the same identity took it over."""
        self._on_fatal = on_fatal
        """Told the :attr:`fatal` error once the stream stopped for good."""
        self._on_welcome = on_welcome
        """Told every Welcome (the first and each reconnect's), after the cursors were resumed."""
        self.pending_turns: list[connect_pb2.PendingTurn] = []
        """The pending turns the latest Welcome listed (what the identity's channels awaited from it then)."""
        self.session_id = ""
        """The hub's id of the stream's current session (Welcome's ``session_id``; "" before the first)."""
        self.resume_turns = True
        """Whether the handler runs each pending turn a Welcome lists that it did not handle yet."""
        self._outbox = Outbox()
        self._results: dict[str, asyncio.Future[connect_pb2.PostResult]] = {}
        self._deadlines = Deadlines(lambda: self._results, _expire)
        """Fails the posts whose result did not come within their timeout (one timer for all)."""
        self._ids = itertools.count(1)
        self._key_prefix = os.urandom(8).hex()
        self._keys = itertools.count(1)
        """The idempotency keys of this stream's posts: 64 random bits of its own, then a counter (32
        hex digits, as unique as random ones for an identity's posts; the hub's index of a channel's keys
        takes keys that follow each other in order more cheaply than random ones)."""
        self._seen: OrderedDict[str, int | None] = OrderedDict()
        """Envelope ids handed to the dispatcher (the newest :data:`SEEN_IDS`): None while its handler runs, then
        the :attr:`_listings` count when it finished (a pending-turn listing begun later reflects it)."""
        self._listings = 0
        """ListPendingTurns listings begun (see :meth:`list_pending_turns`)."""
        self._channels: dict[str, ChannelQueue] = {}
        self.max_queued_bytes = conn.max_queued_delivery_bytes
        """Bytes of deliveries the channel queues may hold before the stream stops reading."""
        self.queued_bytes = 0
        """Bytes of the deliveries waiting in the channel queues (each counted until its handler starts)."""
        self.paused = False
        """True while the stream does not read because the queues are over :attr:`max_queued_bytes`."""
        self._drained = asyncio.Event()
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._fetches: set[asyncio.Task[None]] = set()
        """Reads of pending turns' envelopes in flight."""
        self._runner: asyncio.Task[None] | None = None
        self._stopping = False
        self._acks = AckCoalescer(self._send_ack, flush_at=max(1, max_in_flight // 4))

    async def start(self, timeout: float = 30.0) -> None:
        """Connect and wait for the first Welcome (raises the hub's error if refused)."""
        self._runner = asyncio.create_task(self._run(), name="agentsdk-connect")
        waiter = asyncio.create_task(self.connected.wait())
        done, _ = await asyncio.wait({waiter, self._runner}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if waiter not in done:
            waiter.cancel()
            if self.fatal is not None:
                raise self.fatal
            raise Unavailable(f"could not connect to the hub at {self.conn.target} within {timeout:g}s")

    async def stop(self) -> None:
        """End the stream and the channel workers (pending envelopes are redelivered next time)."""
        self._stopping = True
        self._outbox.put(None)
        self._deadlines.cancel()
        tasks = [t for t in (self._runner, *self._workers.values(), *self._fetches) if t is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            # A handler that swallows cancellation must not hang the shutdown.
            _, stuck = await asyncio.wait(tasks, timeout=5.0)
            for task in stuck:
                log.warning("handler task %s did not stop within 5s of cancellation; abandoning it", task.get_name())
        self.connected.clear()
        await self.cursors.flush()  # the cursor store holds every envelope handled here

    async def _run(self) -> None:
        backoff = 0.05
        while not self._stopping:
            outbox = Outbox()
            hello = connect_pb2.Hello(
                credential=self.credential,
                cursors=self.cursors.snapshot(),
                max_in_flight=self.max_in_flight,
                max_batch=self.max_batch,
                client_name=self.client_name,
                follows_redirects=self.conn.follow_redirects,
            )
            outbox.put(connect_pb2.ConnectRequest(hello=hello))
            self._outbox = outbox
            stream = self.rpc.connect(outbox.frames())
            welcomed = moving = False
            try:
                async for frame in stream:
                    kind = frame.WhichOneof("frame")
                    if kind == "delivery":
                        self._route(frame.delivery)
                    elif kind == "batch":
                        for result in frame.batch.post_results:
                            self._resolve(result)
                        for delivery in frame.batch.deliveries:
                            self._route(delivery)
                    elif kind == "post_result":
                        self._resolve(frame.post_result)
                    elif kind == "welcome":
                        self.cursors.resume(dict(frame.welcome.cursors))
                        outbox.limit = frame.welcome.max_post_batch  # 0 (an older hub): single Posts
                        carry = frame.welcome.post_batch_ack  # False (an older hub): acks in Ack frames only
                        outbox.carry = self._acks.take if carry else None
                        self._acks.delay = ACK_DELAY if carry else 0.0
                        self.connected.set()
                        welcomed = True
                        backoff = 0.05
                        self.pending_turns = list(frame.welcome.pending_turns)
                        self.session_id = frame.welcome.session_id
                        if self.resume_turns:
                            self._resume_turns(frame.welcome)
                        if self._on_welcome is not None:
                            self._on_welcome(frame.welcome)
                    elif kind == "redirect" and self._follow(frame.redirect):
                        moving = True
                        break
                    if self.queued_bytes > self.max_queued_bytes:
                        await self._pause()
            except AgentNetError as error:
                if isinstance(error, (Unauthenticated, PermissionDenied, Superseded)):
                    # SUPERSEDED: a newer stream took over; reconnecting would take it back, and so on.
                    self.fatal = error
                    if self._on_fatal is not None:  # the owner says it (or not, when it asked for it)
                        self._on_fatal(error)
                    else:
                        log.error("hub ended the stream for good: %s", error.message)
                    return
                log.warning(
                    "stream to %s broke (%s: %s); reconnecting", self.rpc.connection.target, error.reason, error.message
                )
            except Exception:  # a bug here must not leave the identity silently unconnected
                log.exception("the stream to %s failed unexpectedly; reconnecting", self.rpc.connection.target)
            finally:
                self.connected.clear()
                stream.cancel()
                self._next_connection(moving, welcomed)  # where the posts failed below are sent again
                self._fail_pending(Unavailable("the stream to the hub broke before the post's result arrived"))
            if self._stopping:
                return
            if moving:
                continue  # to the replica the Redirect named, at once
            await asyncio.sleep(backoff * (0.5 + random.random()))
            backoff = min(backoff * 2, self.max_backoff)

    def _next_connection(self, moving: bool, welcomed: bool) -> None:
        """A stream ended: pick the connection of the next one, and of the stream's calls meanwhile —
        the replica a Redirect named (``moving``), else the address given. A moved stream that ended
        goes back to the address given; one that never got its Welcome there led nowhere (unreachable,
        refused), so no Redirect is followed for :data:`REDIRECT_PAUSE` seconds."""
        if not moving and self.redirected_to is not None:
            if not welcomed:
                log.warning(
                    "could not connect to %s, where the hub redirected; back to %s",
                    self.redirected_to,
                    self.conn.target,
                )
                self._redirects_paused_until = asyncio.get_running_loop().time() + REDIRECT_PAUSE
            self.redirected_to = None
        self._use(self.conn.peer(self.redirected_to) if self.redirected_to else self.conn)

    def _use(self, conn: HubConnection) -> None:
        """Make the stream's calls go to ``conn`` (the address given, or where a Redirect moved it)."""
        if self.rpc.connection is not conn:
            self.rpc = HubRpc(conn, self.credential)
            self._unary.use(conn)

    def _follow(self, redirect: connect_pb2.Redirect) -> bool:
        """Whether to end the stream and reconnect at ``redirect.address`` (then :attr:`redirected_to`
        names it): not when redirects are off, paused after one that led nowhere, or name where the
        stream already is."""
        address = redirect.address
        if (
            not self.conn.follow_redirects
            or not address
            or address == self.redirected_to
            or asyncio.get_running_loop().time() < self._redirects_paused_until
        ):
            return False
        log.info("the hub moves this stream to %s (%s)", address, redirect.reason)
        self.redirected_to = address
        return True

    async def _pause(self) -> None:
        """Stop reading until the handlers took the queues back under :attr:`max_queued_bytes`."""
        self.paused = True
        # Results of posts sent on the stream wait behind the unread frames: send those posts
        # again by PostEnvelope (same idempotency key), as when the stream breaks.
        self._fail_pending(Unavailable("the stream paused reading while its handlers catch up"))
        try:
            while self.queued_bytes > self.max_queued_bytes:
                self._drained.clear()
                await self._drained.wait()
        finally:
            self.paused = False

    def _fail_pending(self, error: AgentNetError) -> None:
        results, self._results = self._results, {}
        for fut in results.values():
            if not fut.done():
                fut.set_exception(error)

    def _resolve(self, result: connect_pb2.PostResult) -> None:
        fut = self._results.pop(result.request_id, None)
        if fut is not None and not fut.done():
            fut.set_result(result)

    def _route(self, delivery: connect_pb2.Delivery, *, resumed: bool = False) -> None:
        channel_id = delivery.envelope.channel_id
        queue = self._channels.get(channel_id)
        if queue is None:
            queue = self._channels[channel_id] = ChannelQueue()
            self._workers[channel_id] = asyncio.create_task(self._work(channel_id, queue), name=f"channel-{channel_id}")
        size = delivery.envelope.ByteSize()  # measured once: the dispatcher is handed it too
        self.queued_bytes += size
        queue.put((delivery, size, resumed))

    def _resume_turns(self, welcome: connect_pb2.Welcome) -> None:
        """Run the handler on each pending turn of ``welcome`` this stream has not handled."""
        self.resume(welcome.pending_turns, welcome.cursors)
        if welcome.pending_turns_truncated:  # more than one Welcome lists: page through the rest
            task = asyncio.create_task(self._resume_listed(), name="pending-turns")
            self._fetches.add(task)
            task.add_done_callback(self._fetches.discard)

    def resume(
        self,
        turns: Iterable[connect_pb2.PendingTurn],
        cursors: Mapping[str, int],
        *,
        rerun_before: int | None = None,
    ) -> int:
        """Hand each of ``turns`` to the dispatcher once; returns how many it started.

        One whose envelope lies above its channel's cursor in ``cursors`` is replayed (or delivered)
        anyway and handled then; the others were acked earlier without an answer, so they are read
        from the WAL and handled in their channel's order, without moving the cursor. One this stream
        handed to the dispatcher already is skipped — unless ``rerun_before`` is given and its handler
        finished before listing number ``rerun_before`` began (so the hub's list saw that it did not
        answer); one whose handler still runs is always skipped."""
        started = 0
        for turn in turns:
            if turn.seq > cursors.get(turn.channel_id, 0):
                continue
            if turn.envelope_id in self._seen:
                finished = self._seen[turn.envelope_id]
                if rerun_before is None or finished is None or finished >= rerun_before:
                    continue
                del self._seen[turn.envelope_id]  # handled, unanswered: run it again
            task = asyncio.create_task(self._fetch_turn(turn), name=f"pending-turn-{turn.channel_id}")
            self._fetches.add(task)
            task.add_done_callback(self._fetches.discard)
            started += 1
        return started

    async def list_pending_turns(self) -> tuple[list[connect_pb2.PendingTurn], int]:
        """Every turn the identity's live channels await from it now (ListPendingTurns, all pages), and
        the number of this listing (handlers that finished before it began are reflected in it)."""
        self._listings += 1
        listing = self._listings
        turns: list[connect_pb2.PendingTurn] = []
        token = ""
        while True:
            page = await self.rpc.list_pending_turns(hub_pb2.ListPendingTurnsRequest(limit=1000, page_token=token))
            turns.extend(page.turns)
            token = page.next_page_token
            if not token:
                return turns, listing

    async def _resume_listed(self) -> None:
        """List the pending turns a truncated Welcome left out and run them. A hub replica holding some
        of the identity's channels that does not answer makes the listing UNAVAILABLE: it is tried
        again, :data:`LISTING_ATTEMPTS` times in all with a growing pause, while this session lasts."""
        session, pause = self.session_id, 0.5
        for attempt in range(1, LISTING_ATTEMPTS + 1):
            try:
                turns, _ = await self.list_pending_turns()
            except Unavailable as error:
                if attempt == LISTING_ATTEMPTS:
                    log.warning("could not list the pending turns (%d tries): %s", attempt, error.message)
                    return
                await asyncio.sleep(pause * (0.5 + random.random()))  # a backoff between tries
                pause *= 2
                if self.session_id != session:  # a new session's Welcome lists them itself
                    return
            except AgentNetError as error:
                log.warning("could not list the pending turns: %s", error.message)
                return
            else:
                self.resume(turns, self.cursors.snapshot())
                return

    async def _fetch_turn(self, turn: connect_pb2.PendingTurn) -> None:
        request = hub_pb2.ReadWalRequest(channel_id=turn.channel_id, from_seq=turn.seq, until_seq=turn.seq)
        try:
            async for item in self.rpc.read_wal(request):
                if item.envelope.envelope_id == turn.envelope_id:
                    self._route(connect_pb2.Delivery(envelope=item.envelope, replay=True), resumed=True)
        except AgentNetError as error:
            log.warning("could not read the pending turn %s of %s: %s", turn.seq, turn.channel_id, error.message)

    def _plain_turns(self) -> bool:
        """Whether a handler turn here needs no span: none would be recorded (:attr:`HubConnection.tracing`
        False) and none is current (then an envelope carrying no trace context is handed over as it is)."""
        return not self.conn.tracing and isinstance(trace.get_current_span(), trace.NonRecordingSpan)

    async def _work(self, channel_id: str, queue: ChannelQueue) -> None:
        items = queue.items
        loop = asyncio.get_running_loop()
        plain: bool | None = None
        """:meth:`_plain_turns`, asked once per run of turns this worker handles without suspending
        (None: ask before the next turn): only the handlers it calls run in between."""
        while True:
            if not items:
                queue.waiter = waiter = loop.create_future()
                plain = None
                await waiter
                continue
            delivery, size, resumed = items.popleft()
            self.queued_bytes -= size
            if self.queued_bytes <= self.max_queued_bytes:
                self._drained.set()
            env = delivery.envelope
            envelope_id = env.envelope_id  # each read of a message's field makes a new str
            if not delivery.expired and envelope_id not in self._seen:
                self._remember(envelope_id)
                token = enter_delivery(envelope_id, delivery.can_send if delivery.HasField("can_send") else None)
                try:
                    if plain is None:
                        plain = self._plain_turns()
                    if plain and not env.trace_id:
                        # What _dispatch_untraced does then, one coroutine less; a dispatcher that
                        # finished the delivery in the call (None) costs no coroutine at all.
                        pending = self.dispatch(env, size)
                        if pending is not None:
                            plain = None
                            await pending
                    elif self.conn.tracing:
                        plain = None
                        with self._turn_span(env):
                            await _awaited(self.dispatch(env, size))
                    else:
                        plain = None
                        await self._dispatch_untraced(env, size)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("handler failed on %s %s", env.event_type, envelope_id)
                finally:
                    exit_delivery(token)
                    if envelope_id in self._seen:
                        self._seen[envelope_id] = self._listings
            if resumed:
                continue  # read back below the cursor: nothing to ack
            self.cursors.processed(channel_id, delivery.prev_seq, env.seq)
            self._acks.add(channel_id, env.seq)
            if env.event_type in _CHANNEL_ENDED and not items:
                # Nothing follows a channel's end: retire its worker (a replay would start a new one, as
                # does the closed envelope that follows a TTL end's expired one when it arrives later).
                del self._channels[channel_id], self._workers[channel_id]
                return

    def _turn_span(self, env: envelope_pb2.Envelope) -> AbstractContextManager[trace.Span]:
        """The handler turn's span, current while the handler runs: a child of the trace context the
        envelope carries (its ``trace_id``, a W3C traceparent), so the reply's post continues the trace."""
        return self.conn.tracer.start_as_current_span(
            "agentnet.handle",
            context=context_of(env.trace_id) if env.trace_id else None,
            kind=trace.SpanKind.CONSUMER,
            attributes={
                "agentnet.channel_id": env.channel_id,
                "agentnet.seq": env.seq,
                "agentnet.envelope_id": env.envelope_id,
                "agentnet.event_type": env.event_type,
            },
        )

    async def _dispatch_untraced(self, env: envelope_pb2.Envelope, size: int) -> None:
        """The handler turn when no span would be recorded (:attr:`HubConnection.tracing` False).

        What the no-op tracer's span would do, without making one: the span current while the
        handler runs names the context the envelope carries (so the reply's post continues that
        trace), else the one current already (then there is nothing to make current)."""
        context = context_of(env.trace_id) if env.trace_id else None
        if context is not None:
            span = trace.get_current_span(context)
        else:
            current = trace.get_current_span()
            if isinstance(current, trace.NonRecordingSpan):
                await _awaited(self.dispatch(env, size))
                return
            span = trace.NonRecordingSpan(current.get_span_context())
        with trace.use_span(span, end_on_exit=True):
            await _awaited(self.dispatch(env, size))

    def _remember(self, envelope_id: str) -> None:
        self._seen[envelope_id] = None
        if len(self._seen) > SEEN_IDS:
            # An OrderedDict: a dict's oldest key, next(iter(...)), is found by walking past the slots
            # of the keys removed before it, tens of thousands of them once the window is full.
            self._seen.popitem(last=False)

    def _send_ack(self, ack: connect_pb2.Ack) -> None:
        if self.connected.is_set():  # else the next stream replays what was not acked
            self._outbox.put(connect_pb2.ConnectRequest(ack=ack))

    async def post(self, envelope: envelope_pb2.Envelope, timeout: float = 30.0) -> envelope_pb2.Envelope:
        """Admit ``envelope``; returns it as written. Raises the hub's domain error when refused
        (RATE_LIMITED only once the connection's ``rate_limit_backoff`` gave up).

        :meth:`post_nowait` and :meth:`finish_post` are this in two halves, for a caller that awaits
        the stream's answer itself (no coroutine of this one per post)."""
        queued = self.post_nowait(envelope, timeout)
        if queued is None:
            return await self.finish_post(envelope, None, timeout)
        request_id, fut = queued
        try:
            result = await fut
        except Unavailable:
            result = None  # the stream broke: post by PostEnvelope, the idempotency key makes it safe
        finally:
            self._results.pop(request_id, None)
        if result is not None and result.WhichOneof("result") == "envelope":
            return result.envelope
        return await self.finish_post(envelope, result, timeout)

    def post_nowait(
        self, envelope: envelope_pb2.Envelope, timeout: float = 30.0
    ) -> tuple[str, asyncio.Future[connect_pb2.PostResult]] | None:
        """The first half of :meth:`post`: give ``envelope`` its idempotency key (unless it has one) and,
        while the stream is up, queue it there. Returns its request id and the future of its
        PostResult (failed with Unavailable when the stream breaks first, with TimeoutError after
        ``timeout`` seconds), or None when the stream is not up. The caller awaits the future, then
        calls :meth:`forget_post` with the request id, then, unless the result holds the admitted
        envelope, :meth:`finish_post`."""
        if not envelope.HasField("idempotency_key"):
            envelope.idempotency_key = f"{self._key_prefix}{next(self._keys):016x}"
        if self.connected.is_set() and not self.paused:
            return self._queue_post(envelope, timeout)
        return None

    def forget_post(self, request_id: str) -> None:
        """The wait for a post queued by :meth:`post_nowait` ended (answered, failed or cancelled)."""
        self._results.pop(request_id, None)

    async def finish_post(
        self, envelope: envelope_pb2.Envelope, result: connect_pb2.PostResult | None, timeout: float = 30.0
    ) -> envelope_pb2.Envelope:
        """The second half of :meth:`post`, for a post whose stream attempt did not admit it: ``result``
        is the hub's refusal (raised; RATE_LIMITED retried as the backoff allows; UNAVAILABLE because
        replicas are moving, :func:`~agentsdk.network._unary_post.moving`, posted again by PostEnvelope
        under the same key, which waits for a hub and is retried) or None (never queued on the stream, or
        the stream broke first: posted by PostEnvelope under the same key)."""
        try:
            admitted = admitted_unless_moving(result) if result is not None else None
            if admitted is not None:
                return admitted
            return await self._unary.post(envelope, timeout)
        except RateLimited as refused:  # the first attempt, refused: retry as the backoff allows
            return await retry_rate_limited(
                lambda: self._post_once(envelope, timeout), self.conn.rate_limit_backoff, refused=refused
            )

    async def _post_once(self, envelope: envelope_pb2.Envelope, timeout: float) -> envelope_pb2.Envelope:
        if self.connected.is_set() and not self.paused:
            request_id, fut = self._queue_post(envelope, timeout)
            try:
                result = await fut
            except Unavailable:
                result = None  # the stream broke: retry below, the idempotency key makes it safe
            finally:
                self._results.pop(request_id, None)
            admitted = admitted_unless_moving(result) if result is not None else None
            if admitted is not None:
                return admitted
        return await self._unary.post(envelope, timeout)

    def _queue_post(
        self, envelope: envelope_pb2.Envelope, timeout: float
    ) -> tuple[str, asyncio.Future[connect_pb2.PostResult]]:
        """Queue ``envelope`` on the stream; its request id and the future of its PostResult (failed
        with Unavailable when the stream breaks first, with TimeoutError after ``timeout`` seconds)."""
        request_id = str(next(self._ids))
        fut: asyncio.Future[connect_pb2.PostResult] = asyncio.get_running_loop().create_future()
        self._results[request_id] = fut
        self._outbox.post(request_id, envelope)  # copied once, into the frame written
        # The deadline fails the future (asyncio.wait_for would wrap it in another one).
        self._deadlines.add(request_id, timeout)
        return request_id, fut
