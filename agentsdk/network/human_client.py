"""HumanClient: a participant without an LLM (a person at a UI, a bridge, a scripted seeder), consuming
inbound envelopes by push callbacks, a bounded pull queue, or both. Import it from :mod:`agentsdk.network`
(or :mod:`agentsdk.network.clients`)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from agentnet.v1 import envelope_pb2

from agentsdk.network._replies import wait_reply
from agentsdk.network.network_client import EnvelopeCallback, NetworkClient
from netkernel.channel_types import CONSULTING_TYPE
from netkernel.envelope import (
    EV_CHANNEL_INVITE,
    EV_MSG_CHUNK,
    Envelope,
)
from netkernel.errors import AgentNetError, FailedPrecondition, InvalidArgument, Timeout
from netkernel.identity import Passport
from netkernel.wire import envelope_from_wire, envelope_to_wire

if TYPE_CHECKING:
    from agentsdk.network.hub_client import HubClient

log = logging.getLogger("agentnet.sdk")

#: Default bounds of a HumanClient's pull queue.
DEFAULT_MAX_QUEUED_ENVELOPES = 10_000
DEFAULT_MAX_QUEUED_BYTES = 64 * 1024 * 1024


def check_queue_bounds(max_queued_envelopes: int, max_queued_bytes: int) -> None:
    """InvalidArgument unless both pull queue bounds are positive."""
    for name, value in (("max_queued_envelopes", max_queued_envelopes), ("max_queued_bytes", max_queued_bytes)):
        if value < 1:
            raise InvalidArgument(f"{name} must be at least 1 (got {value}); it bounds the pull queue.")


class HumanClient(NetworkClient):
    """A participant without an LLM: a person at a UI, a bridge, a scripted seeder.

    Consume inbound envelopes by push (``on_envelope``), pull (``next_envelope``)
    or streaming (``async for env in client.envelopes()``).

    Push and pull combine: every envelope goes to the push callbacks, then to the pull
    queue. The queue keeps envelopes with ``pull=None`` (the default) and ``pull=True``;
    with ``pull=False`` it keeps none (a push-only client that wants no copies). It holds
    at most ``max_queued_envelopes`` envelopes and ``max_queued_bytes`` bytes (their wire
    size); when a new envelope would exceed either, the oldest are dropped (the newest is
    always kept), counted in :attr:`dropped` and logged once per overflow (not logged for
    a default client with push callbacks that never pulled). A dropped envelope is still
    in the channel's WAL (:meth:`read_wal`).
    """

    def __init__(
        self,
        hub: HubClient,
        agent_id: str,
        credential: str,
        passport: Passport,
        *,
        auto_ack_invites: bool = True,
        pull: bool | None = None,
        max_queued_envelopes: int = DEFAULT_MAX_QUEUED_ENVELOPES,
        max_queued_bytes: int = DEFAULT_MAX_QUEUED_BYTES,
    ) -> None:
        check_queue_bounds(max_queued_envelopes, max_queued_bytes)
        super().__init__(hub, agent_id, credential, passport)
        self.auto_ack_invites = auto_ack_invites
        self.pull = pull
        """Whether the pull queue keeps envelopes: None (default) and True keep them, False keeps none."""
        self.max_queued_envelopes = max_queued_envelopes
        self.max_queued_bytes = max_queued_bytes
        self.dropped = 0
        """Envelopes the full pull queue dropped (oldest first) since the client was created."""
        self._callbacks: list[EnvelopeCallback] = []
        self._inbox: deque[Envelope] = deque()
        self._sizes: deque[int] = deque()
        """The wire size of each envelope of :attr:`_inbox` (a deque of its own: a (envelope, size)
        pair per queued envelope would be one more object for the garbage collector to keep track of
        for as long as it is queued)."""
        self._inbox_bytes = 0
        self._overflowing = False
        self._arrived = asyncio.Condition()
        self._waiting = 0
        """Pullers waiting on :attr:`_arrived` (none: an arrival needs no lock nor notify)."""
        self._closed = False
        self._pulled = False
        self._wake: asyncio.Task[None] | None = None
        """Wakes the pullers once the stream stopped for good (see :attr:`stream_error`)."""

    @property
    def queued(self) -> int:
        """Envelopes waiting in the pull queue."""
        return len(self._inbox)

    @property
    def queued_bytes(self) -> int:
        """Wire bytes of the envelopes waiting in the pull queue."""
        return self._inbox_bytes

    def _keeps_pulled(self) -> bool:
        return self.pull is not False

    def _quiet_overflow(self) -> bool:
        """Whether an overflow goes unlogged: a default client consuming by push that never pulled."""
        return self.pull is None and bool(self._callbacks) and not self._pulled

    def on_envelope(self, callback: EnvelopeCallback) -> None:
        """Add a push callback (called for every inbound envelope, in registration order).

        ``callback`` may be a coroutine function (awaited before the next envelope) or a plain
        function. The pull queue keeps working beside it (``next_envelope`` / ``envelopes``);
        a client that only pushes and never pulls keeps just the newest envelopes, within the
        queue's bounds, and drops older ones without a warning (``pull=False`` keeps none).
        (Pass the callback to ``register_human(on_envelope=...)`` to have it before the first
        envelope arrives.)"""
        self._callbacks.append(callback)

    def remove_envelope_callback(self, callback: EnvelopeCallback) -> None:
        """Remove a push callback."""
        with contextlib.suppress(ValueError):
            self._callbacks.remove(callback)

    def _dispatch(self, wire: envelope_pb2.Envelope, size: int) -> Awaitable[None] | None:
        envelope = envelope_from_wire(wire)
        if envelope.event_type == EV_MSG_CHUNK:
            return self._chunk(envelope)
        return self._receive_now(envelope, size)

    async def _handle(self, envelope: Envelope) -> None:
        if envelope.event_type == EV_MSG_CHUNK:
            await self._chunk(envelope)
            return
        pending = self._receive_now(envelope, len(envelope_to_wire(envelope).SerializeToString()))
        if pending is not None:
            await pending

    def _receive_now(self, envelope: Envelope, size: int) -> Awaitable[None] | None:
        """Hand ``envelope`` to the invite auto-ack, the push callbacks and the pull queue, in this
        call as far as none of them needs awaiting; returns the rest to await (None: all done). Plain
        callbacks and a pull queue nobody waits on cost no coroutine per envelope."""
        if self.auto_ack_invites and envelope.event_type == EV_CHANNEL_INVITE:
            return self._ack_then_receive(envelope, size)
        callbacks = list(self._callbacks)
        for i, callback in enumerate(callbacks):
            try:
                result = callback(envelope)  # call_back's work, without a coroutine of its own per envelope
            except Exception:
                log.exception("envelope callback %r failed", callback)
                continue
            if result is not None and inspect.isawaitable(result):
                return self._receive_rest(envelope, size, callbacks, i, result)
        return self._queue_now(envelope, size)

    async def _ack_then_receive(self, envelope: Envelope, size: int) -> None:
        try:
            await self.ack_invite(envelope.channel_id)
        except AgentNetError as err:
            log.warning("could not ack invite to %s: %s", envelope.channel_id, err.message)
        await self._receive_rest(envelope, size, list(self._callbacks), -1, None)

    async def _receive_rest(
        self,
        envelope: Envelope,
        size: int,
        callbacks: list[EnvelopeCallback],
        index: int,
        pending: Awaitable[Any] | None,
    ) -> None:
        """Await ``pending`` (what ``callbacks[index]`` returned), then run the callbacks after it and
        queue ``envelope`` for pulling."""
        if pending is not None:
            try:
                await pending
            except Exception:
                log.exception("envelope callback %r failed", callbacks[index])
        for callback in callbacks[index + 1 :]:
            try:
                result = callback(envelope)
                if result is not None and inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("envelope callback %r failed", callback)
        queued = self._queue_now(envelope, size)
        if queued is not None:
            await queued

    def _queue_now(self, envelope: Envelope, size: int) -> Awaitable[None] | None:
        """Put ``envelope`` in the pull queue (if it keeps any); what to await when a puller waits."""
        if not self._keeps_pulled():
            return None
        if not self._waiting:
            # Nobody waits to be told; a puller holds the lock only while it waits (or takes, without
            # awaiting), so it is free and the next puller finds the envelope in the queue.
            self._enqueue(envelope, size)
            return None
        return self._enqueue_notify(envelope, size)

    async def _enqueue_notify(self, envelope: Envelope, size: int) -> None:
        async with self._arrived:
            self._enqueue(envelope, size)
            self._arrived.notify_all()

    def _enqueue(self, envelope: Envelope, size: int) -> None:
        """Append, dropping the oldest while either bound is exceeded (the new one always stays)."""
        self._inbox.append(envelope)
        self._sizes.append(size)
        self._inbox_bytes += size
        dropped = 0
        while len(self._inbox) > 1 and (
            len(self._inbox) > self.max_queued_envelopes or self._inbox_bytes > self.max_queued_bytes
        ):
            old, old_size = self._inbox.popleft(), self._sizes.popleft()
            self._inbox_bytes -= old_size
            dropped += 1
            if not self._overflowing and not self._quiet_overflow():
                self._overflowing = True
                log.warning(
                    "%s: pull queue full (%d envelopes / %d bytes at most); dropping the oldest, first %s seq %d "
                    "(still in the channel's WAL). Pull faster, raise max_queued_envelopes / max_queued_bytes, "
                    "or use on_envelope without pulling.",
                    self.name,
                    self.max_queued_envelopes,
                    self.max_queued_bytes,
                    old.channel_id,
                    old.seq,
                )
        self.dropped += dropped

    def _take(self, index: int) -> Envelope:
        envelope, size = self._inbox[index], self._sizes[index]
        del self._inbox[index], self._sizes[index]
        self._inbox_bytes -= size
        self._overflowing = False  # a consumer keeps up again: the next overflow is logged anew
        return envelope

    def _check_pullable(self) -> None:
        if not self._keeps_pulled():
            raise FailedPrecondition(
                f"{self.name} was created with pull=False and keeps no pull queue; consume with on_envelope "
                "(or register without pull=False to both push and pull)."
            )
        self._pulled = True

    async def next_envelope(
        self, *, predicate: Callable[[Envelope], bool] | None = None, timeout: float | None = None
    ) -> Envelope:
        """The next inbound envelope matching ``predicate`` (any when None); Timeout after ``timeout`` seconds."""

        def take() -> Envelope | None:
            for i, env in enumerate(self._inbox):
                if predicate is None or predicate(env):
                    return self._take(i)
            return None

        self._check_pullable()
        async with self._arrived:
            try:
                async with asyncio.timeout(timeout):
                    while (found := take()) is None:
                        if self._closed:
                            raise Timeout("the client disconnected before a matching envelope arrived")
                        if self.stream_error is not None:
                            raise self.stream_error
                        await self._wait_arrival()
            except TimeoutError:
                raise Timeout(f"no matching envelope within {timeout:g}s") from None
        return found

    async def wait_reply(self, question: Envelope, *, timeout: float | None = None) -> Envelope:
        """The reply to ``question`` (an envelope this client posted; from the pull queue).

        Ends early with a typed error when no reply is coming: :class:`~netkernel.errors.TurnFailed`
        when the answering agent reported that its turn on ``question`` failed (its model call, a tool
        or its handler raised; the message carries its error class and redacted message),
        :class:`~netkernel.errors.ChannelClosed` when the channel ended first, Timeout after
        ``timeout`` seconds."""
        return await wait_reply(self, question, timeout=timeout)

    async def ask(self, target: str, text: str, *, timeout: float | None = None, **open_kwargs: Any) -> Envelope:
        """Ask ``target`` one question in a new consulting channel and return its reply envelope
        (``reply.text``); :meth:`wait_reply`'s errors when none is coming (``TurnFailed`` at once when
        the target's turn fails). ``open_kwargs`` go to :meth:`open` (``knobs``, ``ttl``, ...)."""
        channel = await self.open(type=CONSULTING_TYPE, target=target, **open_kwargs)
        question = await self.send(channel.channel_id, text)
        return await self.wait_reply(question, timeout=timeout)

    async def envelopes(self) -> AsyncIterator[Envelope]:
        """Every inbound envelope, until :meth:`disconnect`."""
        self._check_pullable()
        while True:
            async with self._arrived:
                while not self._inbox and not self._closed and self.stream_error is None:
                    await self._wait_arrival()
                if not self._inbox:
                    if self.stream_error is not None and not self._closed:
                        raise self.stream_error
                    return
                env = self._take(0)
            yield env

    async def _wait_arrival(self) -> None:
        """Wait on :attr:`_arrived` (its lock held), counted in :attr:`_waiting`."""
        self._waiting += 1
        try:
            await self._arrived.wait()
        finally:
            self._waiting -= 1

    def _stream_ended(self, error: AgentNetError) -> None:
        super()._stream_ended(error)
        self._wake = asyncio.get_running_loop().create_task(self._wake_pullers())  # kept: not collected early

    async def _wake_pullers(self) -> None:
        async with self._arrived:
            self._arrived.notify_all()

    async def disconnect(self) -> None:
        """Stop receiving and end :meth:`envelopes` iterations."""
        await super().disconnect()
        async with self._arrived:
            self._closed = True
            self._arrived.notify_all()
