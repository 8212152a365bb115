"""One AG2 WebSocket connection: the identities bound to it, their hub streams, and its frames.

A connection may hold several identities (AG2's ``HubClient`` registers any number of agents over
one link); each has its own hub credential and ``Connect`` stream. A request runs as the identity
it names (``sender_id``, ``creator_id``, ``agent_id`` …) or, for channel ops, as a bound
participant of the channel; discovery reads before any identity is bound run as the gateway's
directory identity (:mod:`ag2gateway.identities`).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from agentnet.v1 import envelope_pb2

from ag2gateway import frames, ids, records
from ag2gateway.delivery import IdentityStream
from ag2gateway.hub import HubLink
from ag2gateway.identities import Identities
from ag2gateway.ops.channels import post_parts, posted_id
from ag2gateway.ops.registry import bad_params, start
from ag2gateway.outbox import Outbox
from ag2gateway.refusals import Ag2Refusal, code_of
from agentsdk.rpc import HubRpc
from netkernel.errors import AgentNetError, NotFound, NotParticipant, PermissionDenied

log = logging.getLogger(__name__)

MAX_IDENTITIES = 64
"""Identities one connection may bind; more is refused (access_denied)."""
MAX_BACKLOG = 16
"""Inbound messages one connection holds while an earlier one waits; more stop its socket being read."""
MAX_OPENING = 1024
"""``create_channel`` ops one connection may have waiting for their invitees' acks; more are refused."""


class Slots:
    """A counting semaphore that can be taken without waiting (:meth:`take`), in the caller's turn."""

    def __init__(self, count: int) -> None:
        self._free = count
        self._waiters: deque[asyncio.Future[None]] = deque()

    def take(self) -> bool:
        """Take a slot if one is free and nobody waits for one."""
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return True
        return False

    async def acquire(self) -> None:
        """Take a slot, waiting for one (in turn)."""
        if self.take():
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed a slot as it was cancelled: pass it on
            elif waiter in self._waiters:
                self._waiters.remove(waiter)
            raise

    def release(self) -> None:
        """Free a slot: it goes to the first waiter, if any."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1


class Bound:
    """One identity bound to the connection."""

    def __init__(self, agent_id: str, rpc: HubRpc, stream: IdentityStream) -> None:
        self.agent_id = agent_id
        self.rpc = rpc
        self.stream = stream
        self.since: str | None = ""
        """The hello's since_envelope_id: replayed envelopes at or below it are acked, not sent."""
        self.notified: dict[str, int] = {}
        """channel_id -> the highest seq sent to the client as a notify on this attach."""
        self.receipted: dict[str, int] = {}
        """channel_id -> the highest seq the client acknowledged with a receipt on this attach."""
        self.ready = asyncio.Event()
        """Set once the client may get notifies for it (after the welcome of a hello, as AG2's hub sends them)."""


class Connection:
    """The gateway side of one AG2 ``WsLink``."""

    def __init__(
        self,
        hub: HubLink,
        identities: Identities,
        outbox: Outbox,
        *,
        max_in_flight_requests: int,
        max_opening: int = MAX_OPENING,
        pause: Callable[[], None] | None = None,
        resume: Callable[[], None] | None = None,
        hold: tuple[Callable[[], None], Callable[[], None]] | None = None,
    ) -> None:
        self.hub = hub
        self.identities = identities
        self.outbox = outbox
        self.endpoint_id = uuid.uuid4().hex
        self.bound: dict[str, Bound] = {}
        self.memory = records.IdMemory()
        self._channel_agent: dict[str, str] = {}
        self._requests = Slots(max_in_flight_requests)
        self._opening = 0
        self._max_opening = max_opening
        """``create_channel`` ops waiting for their channel to open (they hold no request slot)."""
        self._tasks: set[asyncio.Task[None]] = set()
        self._pause, self._resume = pause, resume
        self._hold = hold
        """Hold the frames sent meanwhile and write them together (a hub batch's answers and notifies)."""
        self._paused = False
        self._backlog: deque[str | bytes] | None = None
        """Messages read while an earlier one waits (None: none waits, the next is handled as read)."""
        self._waiting: Awaitable[None] | None = None
        """The rest of the message that waits, while one does."""

    # -- frames ----------------------------------------------------------------------------------

    def send_soon(self, frame: dict[str, Any]) -> Awaitable[None] | None:
        """Send one outbound frame: at once when the socket takes it without waiting (None), else the
        awaitable that queues it (it waits while the outbox is full)."""
        data = frames.encode(frame)
        if self.outbox.put_now(data):
            return None
        return self.outbox.put(data)

    async def send(self, frame: dict[str, Any]) -> None:
        """Queue one outbound frame (waits while the outbox is full)."""
        pending = self.send_soon(frame)
        if pending is not None:
            await pending

    def feed(self, raw: str | bytes) -> None:
        """One inbound WebSocket message, in the turn it was read: handled now when nothing in it has to
        wait (a post, a receipt, a ping, most requests), else after the messages before it, in order.
        While more than :data:`MAX_BACKLOG` wait, the connection's socket is not read (``pause``)."""
        if self._backlog is not None:
            self._backlog.append(raw)
            if len(self._backlog) >= MAX_BACKLOG:
                self._set_paused(True)
            return
        try:
            pending = self.take(raw)
        except Exception:
            log.exception("handling a frame failed")
            return
        if pending is not None:
            self._backlog = deque()
            self._waiting = pending
            task = asyncio.create_task(self._drain(pending))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _drain(self, pending: Awaitable[None] | None) -> None:
        """Finish a message that had to wait, then handle the ones read meanwhile, in order."""
        backlog = self._backlog
        assert backlog is not None
        try:
            while pending is not None:
                self._waiting = pending
                try:
                    await pending
                except Exception:
                    log.exception("handling a frame failed")
                pending = None
                while pending is None and backlog:
                    if self._paused and len(backlog) <= MAX_BACKLOG // 4:
                        self._set_paused(False)
                    try:
                        pending = self.take(backlog.popleft())
                    except Exception:
                        log.exception("handling a frame failed")
        finally:
            self._backlog = self._waiting = None
            self._set_paused(False)

    def _set_paused(self, paused: bool) -> None:
        if paused is self._paused:
            return
        self._paused = paused
        control = self._pause if paused else self._resume
        if control is not None:
            control()

    async def handle(self, raw: str | bytes) -> None:
        """One inbound WebSocket message, handled to its end before returning (as :meth:`feed`, waiting)."""
        pending = self.take(raw)
        if pending is not None:
            await pending

    def take(self, raw: str | bytes) -> Awaitable[None] | None:
        """Handle one inbound message as far as it goes without waiting: None when done, else the
        awaitable of the rest (to finish before the next message is taken)."""
        try:
            frame = frames.decode(raw)
        except frames.FrameError as err:
            if err.request_id is not None:
                return self.send_soon(frames.response_error(err.request_id, frames.PROTOCOL_ERROR, err.message))
            return self.send_soon(frames.error(frames.PROTOCOL_ERROR, err.message))
        if isinstance(frame, frames.Request):
            if frame.op == "create_channel":
                return self._open(frame)
            if not self._requests.take():  # bounds the ops one connection runs at once
                return self._request_later(frame)
            return self._begin(frame)
        if isinstance(frame, frames.Receipt):
            self._receipt(frame)
            return None
        if isinstance(frame, frames.Hello):
            return self._hello(frame)
        if isinstance(frame, frames.Ping):
            return self.send_soon(frames.pong())
        return None

    async def _request_later(self, frame: frames.Request) -> None:
        await self._requests.acquire()
        pending = self._begin(frame)
        if pending is not None:
            await pending

    def _open(self, frame: frames.Request) -> Awaitable[None] | None:
        """A ``create_channel``: it waits until every invitee acked, and the acks may come over this very
        connection, so it holds none of the request slots they need (a connection whose slots were all
        held by opens would wait for acks queued behind them); at most ``max_opening`` at once."""
        if self._opening >= self._max_opening:
            return self._respond(
                frame,
                Ag2Refusal(
                    frames.PROTOCOL_ERROR,
                    f"{self._max_opening} channels are already being opened on this connection; wait for one to open",
                ),
            )
        self._opening += 1
        try:
            pending = start(self, frame.op, frame.params)
        except Exception as err:
            pending = _failed(err)
        task = asyncio.create_task(self._request(frame, pending, self._opened))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return None

    def _opened(self) -> None:
        self._opening -= 1

    def _begin(self, frame: frames.Request) -> Awaitable[None] | None:
        """Start a request that holds one of the connection's request slots (freed once it is answered)."""
        if frame.op == "post_envelope":
            return self._post(frame)
        try:
            pending = start(self, frame.op, frame.params)  # its first part now: a post is queued in read order
        except Exception as err:
            pending = _failed(err)
        task = asyncio.create_task(self._request(frame, pending, self._requests.release))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return None

    def _post(self, frame: frames.Request) -> Awaitable[None] | None:
        """A ``post_envelope``: queued on the sender's stream now, in the order read; its response is
        sent by that stream as it reads the post's result (no task per post, no loop turn to wake one)."""
        try:
            try:
                sender, env = post_parts(frame.params)
            except (KeyError, TypeError, ValueError) as err:
                raise bad_params(frame.op, err) from None
            stream = self.identity(sender).stream
        except Exception as err:
            self._requests.release()
            return self._respond(frame, err)

        def answer(outcome: envelope_pb2.Envelope | Exception) -> Awaitable[None] | None:
            try:
                sending = self._respond(
                    frame,
                    posted_id(self, outcome, str(sender)) if isinstance(outcome, envelope_pb2.Envelope) else outcome,
                )
            except BaseException:
                self._requests.release()
                raise
            if sending is None:
                self._requests.release()
                return None
            return self._release_after(sending)

        stream.post_then(env, answer)
        return None

    async def _release_after(self, sending: Awaitable[None]) -> None:
        """Frees a post's request slot once its response, which had to wait, is queued."""
        try:
            await sending
        finally:
            self._requests.release()

    def _respond(self, frame: frames.Request, outcome: Any) -> Awaitable[None] | None:
        """Send a request's response: its result, or the error code and message of an exception (None: sent;
        else the awaitable that queues it)."""
        if isinstance(outcome, Exception):
            if not isinstance(outcome, AgentNetError | Ag2Refusal):
                log.exception("op %s failed", frame.op, exc_info=outcome)
            code, message = code_of(outcome)
            return self.send_soon(frames.response_error(frame.request_id, code, message))
        return self.send_soon(frames.response_ok(frame.request_id, outcome))

    async def _request(self, frame: frames.Request, pending: Awaitable[Any], release: Callable[[], None]) -> None:
        try:
            try:
                result = await pending
            except Exception as err:
                result = err
            sending = self._respond(frame, result)
            if sending is not None:
                await sending
        finally:
            release()
            if inspect.iscoroutine(pending):
                pending.close()  # cancelled before it ran (the connection closed): not left unawaited

    async def _hello(self, frame: frames.Hello) -> None:
        try:
            record, credential = await self.identities.attach(frame.name, frame.auth_scheme, frame.auth_claim)
            bound = await self.bind(record.agent_id, credential, since=frame.since_envelope_id, ready=False)
        except Exception as err:
            code, message = code_of(err)
            await self.send(frames.error(code, message))
            return
        await self.send(frames.welcome(self.endpoint_id, datetime.now(UTC).isoformat()))
        bound.ready.set()

    def _receipt(self, frame: frames.Receipt) -> None:
        bound = self.bound.get(frame.recipient_id)
        seq = ids.seq_of(frame.envelope_id)
        if bound is None or seq is None or not frame.channel_id or frame.status != "ack":
            if frame.status == "nack":
                log.warning("nack from %s for %s: %s", frame.recipient_id, frame.envelope_id, frame.reason[:200])
            return  # as AG2's hub: a receipt it cannot attribute is dropped; a nack leaves the cursor
        if seq > bound.receipted.get(frame.channel_id, 0):
            bound.receipted[frame.channel_id] = seq
        bound.stream.ack(frame.channel_id, seq)

    # -- identities --------------------------------------------------------------------------------

    async def bind(self, agent_id: str, credential: str, *, since: str | None = "", ready: bool = True) -> Bound:
        """Bind an identity to this connection and start its hub stream (a rebind replaces the old one);
        ``ready=False`` holds its notifies until the caller sets ``Bound.ready``."""
        old = self.bound.pop(agent_id, None)
        if old is not None:
            await old.stream.close()
        if len(self.bound) >= MAX_IDENTITIES:
            raise Ag2Refusal(frames.ACCESS_DENIED, f"a connection holds at most {MAX_IDENTITIES} identities")
        rpc = self.hub.rpc(credential)

        async def deliver(env: envelope_pb2.Envelope, replay: bool, first: bool) -> None:
            await self._deliver(agent_id, env, replay and first)

        stream = IdentityStream(rpc, agent_id, deliver, hold=self._hold)
        bound = Bound(agent_id, rpc, stream)
        bound.since = since
        if ready:
            bound.ready.set()
        self.bound[agent_id] = bound
        try:
            await stream.start()
        except Exception:
            self.bound.pop(agent_id, None)
            raise
        return bound

    async def unbind(self, agent_id: str) -> None:
        """Stop an identity's stream (after Unregister)."""
        bound = self.bound.pop(agent_id, None)
        if bound is not None:
            await bound.stream.close()

    async def _deliver(self, agent_id: str, env: envelope_pb2.Envelope, replay: bool) -> None:
        """Send one delivery as a notify; a replay of the attach's first stream honours its since_envelope_id."""
        bound = self.bound.get(agent_id)
        if bound is None:
            return
        if not bound.ready.is_set():
            await bound.ready.wait()
        self._channel_agent.setdefault(env.channel_id, agent_id)
        if env.seq <= bound.notified.get(env.channel_id, 0):
            # Sent on this attach already: the hub replays it because its stored cursor is behind (it
            # restarted before storing the ack). Not sent twice; acked again if the client has receipted
            # it (the new hub session knows nothing of the old one's acks), else its receipt will be.
            if env.seq <= bound.receipted.get(env.channel_id, 0):
                bound.stream.ack(env.channel_id, env.seq)
            return
        data = records.envelope_to_ag2(env, self.memory)
        if replay and (bound.since is None or (bound.since and data["envelope_id"] <= bound.since)):
            if bound.since is not None:
                bound.stream.ack(env.channel_id, env.seq)  # the client says it has it
            return
        bound.notified[env.channel_id] = env.seq
        pending = self.send_soon(frames.notify(data, agent_id))
        if pending is not None:
            await pending

    def identity(self, agent_id: Any) -> Bound:
        """A bound identity (access_denied for one not bound here)."""
        bound = self.bound.get(agent_id) if isinstance(agent_id, str) else None
        if bound is None:
            raise Ag2Refusal(frames.ACCESS_DENIED, f"connection is not bound to agent {agent_id!r}")
        return bound

    def as_agent(self, agent_id: Any) -> HubRpc:
        """The RPCs of a bound identity (access_denied for one not bound here)."""
        return self.identity(agent_id).rpc

    def reader(self) -> HubRpc:
        """Who runs a discovery read: the first bound identity, else the gateway's directory identity."""
        for bound in self.bound.values():
            return bound.rpc
        return self.identities.directory_rpc()

    def learn_channel(self, channel_id: str, agent_id: str) -> None:
        """Note which bound identity takes part in ``channel_id``."""
        self._channel_agent[channel_id] = agent_id

    def channel_candidates(self, channel_id: Any) -> list[HubRpc]:
        """The bound identities to try for an op on ``channel_id``: the one known to take part first."""
        if not isinstance(channel_id, str) or not channel_id:
            raise Ag2Refusal(frames.PROTOCOL_ERROR, "params.channel_id must be a non-empty string")
        if not self.bound:
            raise Ag2Refusal(frames.ACCESS_DENIED, "connection has no bound agent")
        known = self._channel_agent.get(channel_id)
        order = sorted(self.bound.values(), key=lambda b: b.agent_id != known)
        return [b.rpc for b in order]

    async def on_channel(self, channel_id: Any, call: Any) -> Any:
        """Run ``call(rpc)`` as a bound participant of the channel (tried in turn)."""
        last: Exception | None = None
        for rpc in self.channel_candidates(channel_id):
            try:
                return await call(rpc)
            except (NotParticipant, PermissionDenied, NotFound) as err:
                last = err
        assert last is not None
        raise last

    async def as_any_bound(self, call: Any) -> Any:
        """Run ``call(rpc)`` as each bound identity in turn until one may (AG2's task ops name no owner:
        the bound identity that owns the task answers); the last refusal when none may."""
        last: Exception | None = None
        for bound in list(self.bound.values()):
            try:
                return await call(bound.rpc)
            except Exception as err:
                last = err
        raise last or Ag2Refusal(frames.ACCESS_DENIED, "connection has no bound agent")

    async def close(self) -> None:
        """The client went away: stop every op and hub stream (unacked deliveries replay on the next attach)."""
        for task in list(self._tasks):
            task.cancel()
        waiting = self._waiting
        if inspect.iscoroutine(waiting) and inspect.getcoroutinestate(waiting) == inspect.CORO_CREATED:
            waiting.close()  # its task was cancelled before it began: not left unawaited
        for bound in list(self.bound.values()):
            await bound.stream.close()
            bound.stream.cancel_answers()
        self.bound.clear()
        self.outbox.close()


async def _failed(err: Exception) -> Any:
    """An op that failed as it began: raised where its response is made."""
    raise err
