"""One bound identity's hub ``Connect`` stream: deliveries become AG2 ``notify`` frames, AG2
receipts become the hub's acks (the hub stores the cursors they reach), the identity's posts go
over it too, and a stream the hub ends (a hub restart, a replica going away) is opened again with
back-off, resuming from the hub's stored cursors, so nothing is lost and nothing acked is sent twice.

Posts and acks share the stream's writing side (agentsdk's :class:`~agentsdk.network._outbox.Outbox`
and :class:`~agentsdk.network._acks.AckCoalescer`): the posts queued when the stream is ready to
write go as one ``PostBatch`` frame, with the acks pending then riding in it (an ack waits a few
milliseconds for a post to carry it, as the SDK's do: a request/reply loop then sends no Ack frame at
all, one gRPC write and one hub frame less per receipt), and the hub answers
each post with its ``PostResult`` only once its commit is done — so an AG2 ``post_envelope`` is
still answered only after the hub committed the envelope, at a fraction of a unary call's cost.
A post made while the stream is down, or queued but not yet written when it ends, goes by the
unary ``PostEnvelope``; one written to a stream that ended before its result came is refused
UNAVAILABLE (the hub may or may not have admitted it, exactly as a unary call cut off mid-way).
An AG2 ``post_envelope`` is made with :meth:`IdentityStream.post_then`: its response is written
by the stream's own reading task as it reads the PostResult, with no task per post to wake.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from agentnet.v1 import connect_pb2, envelope_pb2, hub_pb2

from agentsdk.backoff import NO_RETRY, retry_rate_limited
from agentsdk.network._acks import ACK_DELAY, AckCoalescer
from agentsdk.network._outbox import Outbox, posted_envelope
from agentsdk.rpc import ConnectStream, HubRpc
from netkernel.errors import AgentNetError, RateLimited, Superseded, Unauthenticated, Unavailable

log = logging.getLogger(__name__)

Deliver = Callable[[envelope_pb2.Envelope, bool, bool], Awaitable[None]]
"""Hands one delivery (envelope, replay, of the first stream) to the connection; waits while its outbox is
full. A replay of a later stream (after the hub ended the first) is what the client has not seen yet."""

MAX_IN_FLIGHT = 256
"""Deliveries the hub may have outstanding (not yet acked by the AG2 client) per identity."""
MAX_BATCH = 256
"""Deliveries the hub may pack into one frame (``Hello.max_batch``)."""
_RETRY_FIRST, _RETRY_MAX = 0.2, 5.0

_Frame = connect_pb2.ConnectRequest


class _Unsent(Exception):
    """A post the ended stream never wrote: it goes by the unary PostEnvelope instead."""


Answer = Callable[[envelope_pb2.Envelope | Exception], Awaitable[None] | None]
"""Told the outcome of a post made with :meth:`IdentityStream.post_then`: the envelope as the hub
committed it, or why it was not admitted (the hub's domain error; UNAVAILABLE when unknown). It returns
None once done, or the awaitable of what is left (e.g. its frame waits for room in a full outbox)."""


class _Pending:
    """One post waiting for its PostResult on the stream: a future to set (:meth:`IdentityStream.post`)
    or an answer to run (:meth:`IdentityStream.post_then`)."""

    __slots__ = ("answer", "envelope", "future", "written")

    def __init__(
        self,
        envelope: envelope_pb2.Envelope,
        future: asyncio.Future[connect_pb2.PostResult] | None,
        answer: Answer | None,
    ) -> None:
        self.envelope = envelope
        self.future = future
        self.answer = answer
        self.written = False
        """Handed to gRPC: once the stream ends, its outcome is unknown."""


_Queued = tuple[str, _Pending]
"""A post put on the live stream: its request id and what waits for its PostResult."""


class IdentityStream:
    """The live hub session of one identity bound to an AG2 connection."""

    def __init__(
        self,
        rpc: HubRpc,
        agent_id: str,
        deliver: Deliver,
        *,
        ack_delay: float = ACK_DELAY,
        hold: tuple[Callable[[], None], Callable[[], None]] | None = None,
    ) -> None:
        self.rpc = rpc
        self._hold = hold
        """Called around a hub batch of several results and deliveries, so what they send goes together."""
        self.agent_id = agent_id
        self._deliver = deliver
        self._unary = HubRpc(rpc.connection, rpc.credential, backoff=NO_RETRY)
        """PostEnvelope while the stream is down, inside :meth:`post`'s own RATE_LIMITED retry."""
        self._outbox = Outbox()
        self._acks = AckCoalescer(self._send_ack, flush_at=max(1, MAX_IN_FLIGHT // 4))
        self._ack_delay = ack_delay
        """Seconds an ack may wait for a post to carry it, with a hub that reads acks in a PostBatch."""
        self._ids = itertools.count(1)
        self._pending: dict[str, _Pending] = {}
        """Posts written or queued on the current stream, by request id, until their PostResult."""
        self._answering: set[asyncio.Task[None]] = set()
        """Posts of :meth:`post_then` answered off the stream (unary, retried after RATE_LIMITED, cut off)."""
        self._live = False
        """The current stream got its Welcome and has not ended: posts may go over it."""
        self._stream: ConnectStream | None = None
        self._task: asyncio.Task[None] | None = None
        self._welcome: asyncio.Future[connect_pb2.Welcome] | None = None
        self._closed = False
        self._first = True
        self.ended: str = ""
        """Why the stream stopped for good ("" while it runs): superseded, unregistered."""

    async def start(self) -> connect_pb2.Welcome:
        """Open the stream; returns the hub's Welcome (replay follows as deliveries)."""
        self._welcome = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._run())
        return await asyncio.shield(self._welcome)

    def _hello(self) -> connect_pb2.ConnectRequest:
        return connect_pb2.ConnectRequest(
            hello=connect_pb2.Hello(
                credential=self.rpc.credential,
                max_in_flight=MAX_IN_FLIGHT,
                max_batch=MAX_BATCH,
                client_name="ag2gateway",
            )
        )

    async def _frames(self, outbox: Outbox) -> AsyncIterator[_Frame]:
        """The stream's request frames: the Hello, then the outbox (posts packed, acks riding along)."""
        yield self._hello()
        while (frame := await outbox.next()) is not None:
            which = frame.WhichOneof("frame")
            if which == "post":
                self._written(frame.post)
            elif which == "post_batch":
                for post in frame.post_batch.posts:
                    self._written(post)
            yield frame

    def _written(self, post: connect_pb2.Post) -> None:
        pending = self._pending.get(post.request_id)
        if pending is not None:
            pending.written = True

    def _send_ack(self, ack: connect_pb2.Ack) -> None:
        frame = _Frame()
        frame.ack.CopyFrom(ack)
        self._outbox.put(frame)

    async def _run(self) -> None:
        delay = _RETRY_FIRST
        while not self._closed:
            self._acks.flush()  # acks made for the ended stream are moot: its session's cursors are gone
            self._outbox = outbox = Outbox()
            self._stream = self.rpc.connect(self._frames(outbox))
            try:
                await self._pump(self._stream)
            except (Superseded, Unauthenticated) as err:
                self.ended = type(err).__name__
                self._fail_welcome(err)
                return
            except AgentNetError as err:
                if self._welcome is not None and not self._welcome.done():
                    self._fail_welcome(err)
                    return
                log.info("hub stream of %s ended (%s); reconnecting", self.agent_id, err.reason)
            except asyncio.CancelledError:
                raise
            except Exception as err:  # a bug: log it, retry
                log.exception("hub stream of %s failed", self.agent_id)
                if self._welcome is not None and not self._welcome.done():
                    self._fail_welcome(err)
                    return
            finally:
                self._end_posts()
            if self._closed:
                return
            self._first = False
            await asyncio.sleep(delay)
            delay = min(delay * 2, _RETRY_MAX)

    def _end_posts(self) -> None:
        """The stream ended: posts it never wrote go unary, those it wrote have no known outcome."""
        self._live = False
        pending, self._pending = self._pending, {}
        for post in pending.values():
            if post.answer is not None:
                if post.written:
                    self._answer_later(_raise(_cut_off()), post.answer)
                else:
                    self._answer_later(self._posted(post.envelope, None), post.answer)  # by PostEnvelope
            elif post.future is not None and not post.future.done():
                post.future.set_exception(_cut_off() if post.written else _Unsent())

    def _fail_welcome(self, err: BaseException) -> None:
        if self._welcome is not None and not self._welcome.done():
            self._welcome.set_exception(err)

    async def _pump(self, stream: ConnectStream) -> None:
        keepalive: asyncio.Task[None] | None = None
        try:
            async for frame in stream:
                which = frame.WhichOneof("frame")
                if which == "batch":
                    batch = frame.batch
                    hold = self._hold if len(batch.post_results) + len(batch.deliveries) > 1 else None
                    if hold is not None:
                        hold[0]()
                    try:
                        for result in batch.post_results:
                            if (answering := self._resolve(result)) is not None:
                                await answering
                        for delivery in batch.deliveries:
                            await self._deliver(delivery.envelope, delivery.replay, self._first)
                    finally:
                        if hold is not None:
                            hold[1]()
                elif which == "delivery":
                    await self._deliver(frame.delivery.envelope, frame.delivery.replay, self._first)
                elif which == "post_result":
                    if (answering := self._resolve(frame.post_result)) is not None:
                        await answering
                elif which == "welcome":
                    welcome = frame.welcome
                    self._outbox.limit = welcome.max_post_batch  # 0 (an older hub): single Posts
                    if welcome.post_batch_ack:  # acks pending when posts are written ride in their frame
                        self._outbox.carry = self._acks.take
                    self._acks.delay = self._ack_delay if welcome.post_batch_ack else 0.0
                    self._live = True
                    if self._welcome is not None and not self._welcome.done():
                        self._welcome.set_result(welcome)
                    if welcome.keepalive_seconds:
                        keepalive = asyncio.create_task(self._keepalive(welcome.keepalive_seconds))
        finally:
            if keepalive is not None:
                keepalive.cancel()

    async def _keepalive(self, seconds: int) -> None:
        nonce = 0
        while True:
            await asyncio.sleep(seconds)
            nonce += 1
            self._outbox.put(connect_pb2.ConnectRequest(ping=connect_pb2.Ping(nonce=nonce)))

    def _resolve(self, result: connect_pb2.PostResult) -> Awaitable[None] | None:
        """A post's PostResult: a :meth:`post_then` post is answered here, in the stream's turn (no task
        to wake; the awaitable of the answer's rest when it has to wait); a :meth:`post` post's awaiter
        is woken."""
        pending = self._pending.pop(result.request_id, None)
        if pending is None:
            return None
        if pending.answer is None:
            if pending.future is not None and not pending.future.done():
                pending.future.set_result(result)
            return None
        try:
            outcome: envelope_pb2.Envelope | Exception = posted_envelope(result)
        except RateLimited as err:  # retried as the connection's rate_limit_backoff allows, off the stream
            self._answer_later(self._retried(pending.envelope, err), pending.answer)
            return None
        except Exception as err:
            outcome = err
        return _answer(pending.answer, outcome)

    def ack(self, channel_id: str, seq: int) -> None:
        """The AG2 client processed the envelope at ``seq``: the hub's cursor may pass it. With a hub
        that reads acks riding in a PostBatch, an ack waits up to ``ack_delay`` (5 ms) for a post of
        this identity to carry it (the next ping of a request/reply loop, the reply a handler makes
        to the envelope after it), else goes in an Ack frame of its own; ``MAX_IN_FLIGHT // 4`` pending
        acks go at the end of the turn. An older hub gets the acks of one event-loop turn in one frame
        at its end."""
        self._acks.add(channel_id, seq)

    @property
    def acks_pending(self) -> int:
        """Acks made and not yet handed to the stream (waiting for a post to ride on, or the delay)."""
        return self._acks.pending

    def post(self, envelope: envelope_pb2.Envelope) -> Awaitable[envelope_pb2.Envelope]:
        """Admit ``envelope`` as this identity; the awaitable returns it as the hub committed it (the
        hub's domain error when refused; RATE_LIMITED retried as the connection's ``rate_limit_backoff``
        allows). While the stream is live the post is queued on it now, in the caller's turn: posts
        keep the order they were made in, and the stream writes it without waiting for the caller's
        task to run again."""
        return self._posted(envelope, self._queue(envelope))

    def post_then(self, envelope: envelope_pb2.Envelope, answer: Answer) -> None:
        """:meth:`post` without an awaiter: ``answer`` is told the outcome. While the stream is live the
        post is queued on it now and ``answer`` runs in the stream's own turn when its PostResult is read
        (so an AG2 post's response needs no task of its own, nor a loop turn to wake one); a post that
        goes unary, is retried after RATE_LIMITED or is cut off is answered from a task."""
        if self._queue(envelope, answer) is None:
            self._answer_later(self._posted(envelope, None), answer)

    def _answer_later(self, outcome: Awaitable[envelope_pb2.Envelope], answer: Answer) -> None:
        async def run() -> None:
            try:
                result: envelope_pb2.Envelope | Exception = await outcome
            except Exception as err:
                result = err
            if (answering := _answer(answer, result)) is not None:
                await answering

        task = asyncio.create_task(run())
        self._answering.add(task)
        task.add_done_callback(self._answering.discard)

    def cancel_answers(self) -> None:
        """Stop answering posts off the stream (the client is gone)."""
        for task in list(self._answering):
            task.cancel()

    async def _posted(self, envelope: envelope_pb2.Envelope, queued: _Queued | None) -> envelope_pb2.Envelope:
        try:
            return await self._outcome(envelope, queued)
        except RateLimited as err:
            return await self._retried(envelope, err)

    async def _retried(self, envelope: envelope_pb2.Envelope, refused: RateLimited) -> envelope_pb2.Envelope:
        return await retry_rate_limited(
            lambda: self._outcome(envelope, self._queue(envelope)),
            self.rpc.connection.rate_limit_backoff,
            refused=refused,
        )

    def _queue(self, envelope: envelope_pb2.Envelope, answer: Answer | None = None) -> _Queued | None:
        """Put the post on the live stream (None: the stream is down, it goes unary)."""
        if not self._live:
            return None
        request_id = str(next(self._ids))
        future = None if answer is not None else asyncio.get_running_loop().create_future()
        pending = _Pending(envelope, future, answer)
        self._pending[request_id] = pending
        frame = _Frame()
        post = frame.post
        post.request_id = request_id
        post.envelope.CopyFrom(envelope)
        self._outbox.put(frame)
        return request_id, pending

    async def _outcome(self, envelope: envelope_pb2.Envelope, queued: _Queued | None) -> envelope_pb2.Envelope:
        """The committed envelope: the queued post's PostResult, else a unary PostEnvelope."""
        if queued is not None:
            request_id, pending = queued
            assert pending.future is not None  # queued without an answer
            try:
                result = await pending.future
            except _Unsent:
                pass
            else:
                return posted_envelope(result)
            finally:
                self._pending.pop(request_id, None)
        request = hub_pb2.PostEnvelopeRequest(envelope=envelope)
        return (await self._unary.post_envelope(request)).envelope

    async def close(self) -> None:
        """End the stream (acks already sent reach the hub first)."""
        self._closed = True
        self._acks.flush()
        self._outbox.put(None)
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), 2.0)
            except (TimeoutError, Exception):
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await self._task


def _cut_off() -> Unavailable:
    return Unavailable("the hub stream ended before the post's result; it may have been admitted")


async def _raise(err: Exception) -> envelope_pb2.Envelope:
    raise err


def _answer(answer: Answer, outcome: envelope_pb2.Envelope | Exception) -> Awaitable[None] | None:
    """Run ``answer``: None once done, else the awaitable of its rest (a failing answer is logged: it must
    not end the stream that runs it)."""
    try:
        rest = answer(outcome)
    except Exception:
        log.exception("answering a post failed")
        return None
    return None if rest is None else _logged(rest)


async def _logged(rest: Awaitable[None]) -> None:
    try:
        await rest
    except Exception:
        log.exception("answering a post failed")
