"""Test harness: a real hub on a real port, and a small stub-level participant.

The participant talks to the hub only through the generated stubs (the Python
SDK is a separate layer), exactly as a bridge in another language would.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import itertools
import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from agentnet.v1 import connect_pb2, envelope_pb2, hub_pb2, hub_pb2_grpc, identity_pb2
from grpc_status import rpc_status

from agentsdk.errors import error_from_reason, error_from_rpc
from hubsvc.core.channel import ChannelRuntime
from hubsvc.core.hub import HubCore
from hubsvc.core.options import HubOptions
from hubsvc.core.ownership import Ownership
from hubsvc.core.partition_map import desired
from hubsvc.governance.policy import Policy
from hubsvc.server import HubServer, start_hub
from hubsvc.storage import HubStore, SqliteHubStore
from hubsvc.storage.redis_store import RedisHubStore
from tests.eventually import assert_eventually
from tests.redis_server import RedisCluster, RedisServer

__all__ = ["assert_eventually"]  # re-exported: the hub tests import it from here

EV_TEXT = "ag2.msg.text"
OPERATOR_TOKEN = "operator-token-for-tests"
RPC_DEADLINE = 10.0
"""Seconds a harness call may go unanswered: a hub that hangs fails the test here, not as a pytest timeout."""
WELCOME_DEADLINE = 30.0
"""Seconds a Connect may wait for its Welcome (the replay's marks come from the store: slow on loaded cores)."""


@dataclass
class StoreChoice:
    """The store kind hubs of the running test use (set per test by tests/hubsvc/conftest.py)."""

    kind: str = "sqlite"
    """"sqlite" or "redis"."""
    redis_url: str = ""
    replicas: int = 1
    """(redis) Replicas each hub is: 1 is a hub alone; more divide the channels (``partitions``)."""
    partitions: int | None = None
    """(redis, ``replicas`` > 1) The partition count the replicas divide (``--partitions``)."""
    spread: bool = False
    """(``replicas`` > 1) Each registered participant talks to the next replica in turn, so a channel
    is held where its opener talks and elsewhere for the others; else every client talks to a
    front replica that holds no channel, so every channel is held elsewhere."""
    together: bool = False
    """(``spread``) This test's participants all talk to the front replica (a test marked
    ``clients_on_one_replica``: what it checks differs by design when they talk to several)."""

    @property
    def divided(self) -> bool:
        """Whether each hub is several replicas dividing the channels."""
        return self.replicas > 1


UNSET_CAN_SEND = (
    "Delivery.can_send is computed by the holder's adapter; a replica that only follows the channel "
    "leaves it unset (ask CanSend), docs/scale-out.md"
)
"""The reason of ``clients_on_one_replica`` on tests of ``Delivery.can_send``."""

DIVIDED_KINDS = {
    "redis-divided": (2, 1, False),
    "redis-replicas": (3, 16, True),
    "redis-cluster-spread-replicas": (3, 16, True),
}
"""Store kind → (replicas, partitions, spread) of the kinds whose hubs are replicas dividing the channels."""


STORE = StoreChoice()


@contextmanager
def on_redis(request: pytest.FixtureRequest, kind: str, db: int) -> Iterator[None]:
    """While it lasts, hubs built here use the session's redis-server (database ``db``, ``kind``
    "redis", or a divided kind without "cluster" in its name) or its local Redis Cluster (a kind
    naming "cluster"; with "spread" in it, the layout that spreads channels over the shards,
    ``?spread=1``); emptied afterwards."""
    flush: Callable[[], None]
    if "cluster" not in kind:
        server: RedisServer = request.getfixturevalue("redis_server")
        url, flush = server.url(db), functools.partial(server.flush, db)
    else:
        cluster: RedisCluster = request.getfixturevalue("redis_cluster")
        url, flush = cluster.url() + ("?spread=1" if "spread" in kind else ""), cluster.flush
    STORE.kind, STORE.redis_url = "redis", url
    STORE.replicas, STORE.partitions, STORE.spread = DIVIDED_KINDS.get(kind, (1, None, False))
    try:
        yield
    finally:
        STORE.kind, STORE.redis_url, STORE.replicas, STORE.partitions, STORE.spread = "sqlite", "", 1, None, False
        flush()


def make_store(db: Path) -> HubStore:
    """The store of the current kind for ``db``: the SQLite file itself, or the Redis keys under a
    prefix derived from the path (the same path reopens the same data, as a restart does)."""
    if STORE.kind == "redis":
        digest = hashlib.sha256(str(db).encode()).hexdigest()[:16]
        return RedisHubStore(STORE.redis_url, prefix=f"hubtest:{digest}:", partitions=STORE.partitions)
    return SqliteHubStore(db)


class RunningHub:
    """An in-process hub served on 127.0.0.1:<port> (built by the same factory as ``python -m hubsvc``).

    On a divided store kind (:data:`DIVIDED_KINDS`) the hub is several replicas on one store:
    ``server`` (and ``core``, ``port``, ``target``) is the front replica tests talk to,
    :attr:`replicas` all of them; ask :meth:`holder` for the one holding a channel."""

    def __init__(self, server: HubServer, db: Path, replicas: list[HubServer] | None = None) -> None:
        self.operator_token = OPERATOR_TOKEN
        self.server = server
        self.core = server.core
        self.port = server.port
        self.db = db
        self.replicas: list[HubServer] = replicas or [server]
        """Every replica of this hub, the front one first (just ``server`` for a hub alone)."""

    @property
    def target(self) -> str:
        return self.server.target

    @property
    def cores(self) -> list[HubCore]:
        """The core of every replica."""
        return [s.core for s in self.replicas]

    def live_channels(self) -> list[ChannelRuntime]:
        """The live channels every replica holds (each is held by one)."""
        return [ch for core in self.cores for ch in core.channels.live()]

    def holder(self, channel_id: str) -> HubServer:
        """The replica holding ``channel_id`` now (the hub itself when alone)."""
        held = [s for s in self.replicas if s.core.placement.holds(channel_id)]
        if len(held) != 1:
            raise AssertionError(f"channel {channel_id} is held by {len(held)} replicas, not one (moving?)")
        return held[0]

    def set_policy(self, policy: Policy) -> None:
        """Replace the governance policy of every replica (as an operator's policy file reaches each)."""
        for core in self.cores:
            core.governance.replace(policy)

    def serving(self, who: Participant) -> HubServer:
        """The replica ``who`` talks to."""
        return next(s for s in self.replicas if s.target == who.target)


_SPREAD: dict[str, Iterator[str]] = {}
"""Front replica's target → the replicas' targets in turn, for a hub whose participants are spread."""


@asynccontextmanager
async def running_hub(db: Path, options: HubOptions | None = None, **kwargs: Any) -> AsyncIterator[RunningHub]:
    """Start a hub on a free port with the test's store kind (:data:`STORE`); stop it afterwards."""
    if STORE.divided:
        async with _replicas(db, options, **kwargs) as hub:
            yield hub
        return
    server = await start_hub(make_store(db), operator_token=OPERATOR_TOKEN, options=options, **kwargs)
    try:
        yield RunningHub(server, db)
    finally:
        await server.stop(0.5)


@asynccontextmanager
async def _replicas(db: Path, options: HubOptions | None, **kwargs: Any) -> AsyncIterator[RunningHub]:
    """:attr:`StoreChoice.replicas` replicas dividing the store's partitions, every one started with the
    same options, policy, clock and the rest (as an operator configures every replica alike), once each
    holds its rendezvous share. Spread: the first replica is the front one and registrations go to each
    in turn; else the front one is a replica that holds no partition."""
    # Short rounds (partitions settle fast), leases of the default TTL (a loaded core's stall keeps them).
    options = dataclasses.replace(options or HubOptions(), replica_ttl=5.0, replica_refresh=0.2)
    servers: list[HubServer] = []
    try:
        for _ in range(STORE.replicas):
            servers.append(await start_hub(make_store(db), operator_token=OPERATOR_TOKEN, options=options, **kwargs))
        await assert_eventually(lambda: _settled(servers), timeout=15)
        if STORE.spread:
            front = servers[0]
            if not STORE.together:
                _SPREAD[front.target] = itertools.cycle([s.target for s in servers])
        else:
            front = next(s for s in servers if not _ownership(s).held)
        try:
            yield RunningHub(front, db, [front, *(s for s in servers if s is not front)])
        finally:
            _SPREAD.pop(front.target, None)
    finally:
        for server in reversed(servers):
            await server.stop(0.5)


def _ownership(server: HubServer) -> Ownership:
    ownership = server.core.placement.ownership
    assert ownership is not None, "a divided store kind's replica has no partitions"
    return ownership


async def _settled(servers: list[HubServer]) -> bool:
    """Each of ``servers`` holds just the partitions rendezvous hashing gives it among the live replicas
    of the store (a test may run two such hubs on one store, as more replicas of one deployment)."""
    liveness = servers[0].core.store.liveness
    assert liveness is not None, "a divided store kind's replica has no liveness keys"
    ids = list(await liveness.replicas())
    for server in servers:
        ownership = _ownership(server)
        want = desired(ownership.replica_id, ownership.count, ids)
        assert set(ownership.held) == want, f"replica {ownership.replica_id} holds {sorted(ownership.held)}, not {want}"
    return True


async def list_audit(hub: RunningHub, **request: Any) -> list[hub_pb2.AuditRecord]:
    """The audit log read with the operator token."""
    async with grpc.aio.insecure_channel(hub.target) as ch:
        stub = hub_pb2_grpc.HubServiceStub(ch)
        metadata = (("authorization", f"Bearer {hub.operator_token}"),)
        response = await call(
            stub.ListAudit(hub_pb2.ListAuditRequest(**request), metadata=metadata, timeout=RPC_DEADLINE),
            deadline=RPC_DEADLINE,
            what="ListAudit",
        )
    return list(response.records)


async def call(coro: Any, *, deadline: float | None = None, what: str = "the call") -> Any:
    """Await a stub call, re-raising failures as the domain exception class.

    ``deadline`` names the client-side deadline the call was made with: when it passes
    without an answer the test fails with an ``AssertionError`` saying so (a hub's own
    ``DEADLINE_EXCEEDED`` refusal carries its ErrorInfo and stays the domain error).
    """
    try:
        return await coro
    except grpc.aio.AioRpcError as err:
        if deadline is not None and _is_client_deadline(err):
            raise AssertionError(
                f"{what} got no answer within the harness's {deadline:g} s deadline: the hub hangs "
                "(pass timeout= for a call that may legitimately take longer)"
            ) from None
        raise error_from_rpc(err) from None


def _is_client_deadline(err: grpc.aio.AioRpcError) -> bool:
    """The call's own deadline passed (no ErrorInfo from the hub)."""
    return err.code() == grpc.StatusCode.DEADLINE_EXCEEDED and rpc_status.from_call(err) is None


async def collect(stream: Any) -> list[Any]:
    """Drain a server stream, re-raising failures as the domain exception class."""
    try:
        return [item async for item in stream]
    except grpc.aio.AioRpcError as err:
        raise error_from_rpc(err) from None


class Participant:
    """One registered identity with a channel, a stub and (optionally) a Connect stream."""

    def __init__(self, target: str, record: identity_pb2.AgentRecord, credential: str) -> None:
        self.target = target
        self.channel = grpc.aio.insecure_channel(target)
        self.stub = hub_pb2_grpc.HubServiceStub(self.channel)
        self.record = record
        self.credential = credential
        self.agent_id = record.agent_id
        self.name = record.passport.name
        self.metadata = (("authorization", f"Bearer {credential}"),)
        self.inbox: asyncio.Queue[connect_pb2.Delivery] = asyncio.Queue()
        self.results: dict[str, asyncio.Future[connect_pb2.PostResult]] = {}
        self._pongs: dict[int, asyncio.Future[None]] = {}
        self.welcome: connect_pb2.Welcome | None = None
        self.stream_error: grpc.aio.AioRpcError | None = None
        self._outbox: asyncio.Queue[connect_pb2.ConnectRequest | None] = asyncio.Queue()
        self._reader: asyncio.Task[None] | None = None
        self._ids = itertools.count(1)
        self.auto_ack = True
        self.auto_accept_invites = False
        self.deadline = RPC_DEADLINE
        """Seconds :meth:`rpc` waits when no ``timeout`` is given."""
        self.chain: list[tuple[str, int, int]] = []
        """(channel_id, prev_seq, seq) of every delivery, in arrival order."""
        self.expired: list[envelope_pb2.Envelope] = []
        """Content-less slots of envelopes whose TTL ran out before delivery."""
        self.frames: list[connect_pb2.ConnectResponse] = []
        """Every post_result, delivery and batch frame received, in order."""
        self.redirects: list[connect_pb2.Redirect] = []
        """Every Redirect frame received (sent only to a stream whose Hello set follows_redirects)."""

    async def rpc(self, method: str, request: Any, *, timeout: float | None = None, **kwargs: Any) -> Any:
        """Call a unary RPC with this participant's credential.

        Without ``timeout`` the call gets :attr:`deadline` and a hang fails the test with
        an ``AssertionError``; an explicit ``timeout`` is the caller's deadline and its expiry
        raises the domain ``Timeout`` like any client's would.
        """
        stub_method = getattr(self.stub, method)
        if timeout is not None:
            return await call(stub_method(request, metadata=self.metadata, timeout=timeout, **kwargs))
        pending = stub_method(request, metadata=self.metadata, timeout=self.deadline, **kwargs)
        return await call(pending, deadline=self.deadline, what=method)

    async def connect(
        self,
        cursors: dict[str, int] | None = None,
        max_in_flight: int = 0,
        max_batch: int = 0,
        *,
        follows_redirects: bool = False,
    ) -> connect_pb2.Welcome:
        """Open the Connect stream and wait for Welcome (``follows_redirects``: Redirect frames are
        recorded in :attr:`redirects`; the stream stays where it is)."""
        self._outbox = asyncio.Queue()
        hello = connect_pb2.Hello(
            credential=self.credential,
            cursors=cursors or {},
            max_in_flight=max_in_flight,
            max_batch=max_batch,
            follows_redirects=follows_redirects,
        )
        self._outbox.put_nowait(connect_pb2.ConnectRequest(hello=hello))

        async def frames() -> AsyncIterator[connect_pb2.ConnectRequest]:
            while True:
                item = await self._outbox.get()
                if item is None:
                    return
                yield item

        call_ = self.stub.Connect(frames())
        welcomed: asyncio.Future[connect_pb2.Welcome] = asyncio.get_running_loop().create_future()

        async def read() -> None:
            try:
                async for frame in call_:
                    kind = frame.WhichOneof("frame")
                    if kind == "welcome":
                        welcomed.set_result(frame.welcome)
                    elif kind == "post_result":
                        self.frames.append(frame)
                        self._on_result(frame.post_result)
                    elif kind == "delivery":
                        self.frames.append(frame)
                        await self._on_delivery(frame.delivery)
                    elif kind == "batch":
                        self.frames.append(frame)
                        for result in frame.batch.post_results:
                            self._on_result(result)
                        for delivery in frame.batch.deliveries:
                            await self._on_delivery(delivery)
                    elif kind == "redirect":
                        self.redirects.append(frame.redirect)
                    elif kind == "pong":
                        pong = self._pongs.pop(frame.pong.nonce, None)
                        if pong is not None and not pong.done():
                            pong.set_result(None)
            except grpc.aio.AioRpcError as err:
                self.stream_error = err
                if not welcomed.done():
                    welcomed.set_exception(error_from_rpc(err))
                self._fail_pending(err)
            except asyncio.CancelledError:
                call_.cancel()
                raise

        self._reader = asyncio.create_task(read())
        try:
            self.welcome = await asyncio.wait_for(welcomed, WELCOME_DEADLINE)
        except TimeoutError:
            raise AssertionError(f"no Welcome within {WELCOME_DEADLINE:g} s of Hello: the hub hangs") from None
        return self.welcome

    def _fail_pending(self, err: grpc.aio.AioRpcError) -> None:
        """Fail the posts and pings still waiting on a stream that broke (e.g. the hub was killed): their
        answers can no longer come, so they raise the stream's error now instead of at their own timeout."""
        waiting: list[asyncio.Future[Any]] = [*self.results.values(), *self._pongs.values()]
        self.results.clear()
        self._pongs.clear()
        for fut in waiting:
            if not fut.done():
                fut.set_exception(error_from_rpc(err))

    def _on_result(self, result: connect_pb2.PostResult) -> None:
        fut = self.results.pop(result.request_id, None)
        if fut is not None and not fut.done():
            fut.set_result(result)

    async def _on_delivery(self, delivery: connect_pb2.Delivery) -> None:
        env = delivery.envelope
        self.chain.append((env.channel_id, delivery.prev_seq, env.seq))
        if delivery.expired:
            self.expired.append(env)
            if self.auto_ack:
                self.ack(env.channel_id, env.seq)
            return
        if self.auto_accept_invites and env.event_type == "ag2.channel.invite":
            self.spawn_post(env.channel_id, "ag2.channel.invite_ack", {})
        await self.inbox.put(delivery)
        if self.auto_ack:
            self.ack(env.channel_id, env.seq)

    def spawn_post(self, channel_id: str, event_type: str, data: dict[str, Any]) -> None:
        asyncio.get_running_loop().create_task(self.post(channel_id, event_type, data))

    def ack(self, channel_id: str, *seqs: int) -> None:
        """Send one Ack frame acking ``seqs`` of the channel."""
        entries = [connect_pb2.AckEntry(channel_id=channel_id, seq=seq) for seq in seqs]
        self._outbox.put_nowait(connect_pb2.ConnectRequest(ack=connect_pb2.Ack(entries=entries)))

    async def sync(self) -> None:
        """Round-trip a Ping: once its Pong is back, the hub has handled every frame sent before (e.g. acks)."""
        nonce = next(self._ids)
        pong: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pongs[nonce] = pong
        self._outbox.put_nowait(connect_pb2.ConnectRequest(ping=connect_pb2.Ping(nonce=nonce)))
        await asyncio.wait_for(pong, RPC_DEADLINE)

    async def disconnect(self) -> None:
        """End the stream; re-raise whatever broke the stream's reader (other than ending it here)."""
        self._outbox.put_nowait(None)
        reader, self._reader = self._reader, None
        if reader is None:
            return
        reader.cancel()
        try:
            await reader
        except asyncio.CancelledError:
            if not reader.cancelled():
                raise  # this coroutine itself was cancelled

    async def post(
        self, channel_id: str, event_type: str = EV_TEXT, data: dict[str, Any] | None = None, **fields: Any
    ) -> envelope_pb2.Envelope:
        """Post on the stream and wait for the PostResult; raises the domain error on refusal."""
        request_id = str(next(self._ids))
        fut: asyncio.Future[connect_pb2.PostResult] = asyncio.get_running_loop().create_future()
        self.results[request_id] = fut
        env = make_envelope(channel_id, event_type, data, **fields)
        self._outbox.put_nowait(connect_pb2.ConnectRequest(post=connect_pb2.Post(request_id=request_id, envelope=env)))
        result = await asyncio.wait_for(fut, 60)  # generous: thousands of posts in flight on a loaded machine
        if result.WhichOneof("result") == "error":
            e = result.error
            raise error_from_reason(e.reason, e.message, dict(e.metadata), code=e.code)
        return result.envelope

    def send_batch(
        self, envelopes: list[envelope_pb2.Envelope], ack: connect_pb2.Ack | None = None
    ) -> list[asyncio.Future[connect_pb2.PostResult]]:
        """Send ``envelopes`` in one PostBatch frame (with ``ack`` riding in it if given); the futures
        of their PostResults, in order."""
        posts, futures = [], []
        for env in envelopes:
            request_id = str(next(self._ids))
            fut: asyncio.Future[connect_pb2.PostResult] = asyncio.get_running_loop().create_future()
            self.results[request_id] = fut
            futures.append(fut)
            posts.append(connect_pb2.Post(request_id=request_id, envelope=env))
        self._outbox.put_nowait(connect_pb2.ConnectRequest(post_batch=connect_pb2.PostBatch(posts=posts, ack=ack)))
        return futures

    async def post_batch(
        self, envelopes: list[envelope_pb2.Envelope], ack: connect_pb2.Ack | None = None
    ) -> list[connect_pb2.PostResult]:
        """Send ``envelopes`` in one PostBatch frame (with ``ack`` riding in it if given) and wait for
        every PostResult (refusals included), in order."""
        return list(await asyncio.wait_for(asyncio.gather(*self.send_batch(envelopes, ack)), 10))

    async def say(self, channel_id: str, text: str, **fields: Any) -> envelope_pb2.Envelope:
        """Post EV_TEXT."""
        return await self.post(channel_id, EV_TEXT, {"text": text}, **fields)

    async def next(
        self, predicate: Callable[[envelope_pb2.Envelope], bool] | None = None, timeout: float = 10.0
    ) -> envelope_pb2.Envelope:
        """The next delivered envelope matching ``predicate``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            delivery = await asyncio.wait_for(self.inbox.get(), max(0.01, deadline - loop.time()))
            if predicate is None or predicate(delivery.envelope):
                return delivery.envelope

    async def next_of(self, event_type: str, timeout: float = 10.0) -> envelope_pb2.Envelope:
        """The next delivered envelope of ``event_type``."""
        return await self.next(lambda e: e.event_type == event_type, timeout)

    async def until(self, envelope_id: str, timeout: float = 10.0) -> list[envelope_pb2.Envelope]:
        """Everything delivered up to and including the envelope ``envelope_id``, in arrival order.

        Post a marker after the envelopes under test and take ``until(marker)``: what arrived
        before the marker is what the test asserts on, with no sleep to guess when delivery ended.
        """
        out: list[envelope_pb2.Envelope] = []
        while not out or out[-1].envelope_id != envelope_id:
            out.append(await self.next(timeout=timeout))
        return out

    def drain(self) -> list[envelope_pb2.Envelope]:
        """Everything delivered and not yet taken."""
        out = []
        while not self.inbox.empty():
            out.append(self.inbox.get_nowait().envelope)
        return out

    async def close(self) -> None:
        """Disconnect (re-raising a broken reader's error) and close the gRPC channel."""
        try:
            await self.disconnect()
        finally:
            await self.channel.close()


def make_envelope(
    channel_id: str, event_type: str, data: dict[str, Any] | None = None, **fields: Any
) -> envelope_pb2.Envelope:
    """A wire envelope; ``audience=[...]`` sets an explicit audience."""
    audience = fields.pop("audience", None)
    env = envelope_pb2.Envelope(
        channel_id=channel_id, event_type=event_type, event_data_json=json.dumps(data or {}), **fields
    )
    if audience is not None:
        env.audience.agent_ids.extend(audience)
    return env


async def register(
    target: str,
    name: str,
    *,
    human: bool = False,
    capabilities: list[str] | None = None,
    via: grpc.aio.Channel | None = None,
    **passport: Any,
) -> Participant:
    """Register an identity and return its participant (not yet connected).

    ``via`` is an open channel to ``target`` to register over (a test registering hundreds of
    identities shares one instead of opening a connection for each); by default a channel of its own."""
    if via is None:
        target = next(_SPREAD[target]) if target in _SPREAD else target
        async with grpc.aio.insecure_channel(target) as ch:
            return await register(target, name, human=human, capabilities=capabilities, via=ch, **passport)
    stub = hub_pb2_grpc.HubServiceStub(via)
    p = identity_pb2.Passport(name=name, **passport)
    resume = identity_pb2.Resume(claimed_capabilities=capabilities or [])
    if human:
        pending = stub.RegisterHuman(hub_pb2.RegisterHumanRequest(passport=p, resume=resume), timeout=RPC_DEADLINE)
    else:
        pending = stub.Register(hub_pb2.RegisterRequest(passport=p, resume=resume), timeout=RPC_DEADLINE)
    resp = await call(pending, deadline=RPC_DEADLINE, what="Register")
    return Participant(target, resp.agent, resp.credential)


async def open_channel(
    opener: Participant, type: str, targets: list[Participant], *, knobs: dict[str, Any] | None = None, **kwargs: Any
) -> str:
    """Open a channel, let every target ack its invite, wait until OPENED; returns the channel id."""
    request = hub_pb2.OpenChannelRequest(
        type=type, targets=[t.agent_id for t in targets], knobs_json=json.dumps(knobs or {}), **kwargs
    )
    resp = await opener.rpc("OpenChannel", request)
    channel_id = resp.channel.channel_id
    for t in targets:
        invite = await t.next(lambda e: e.event_type == "ag2.channel.invite" and e.channel_id == channel_id)
        await t.post(channel_id, "ag2.channel.invite_ack", {})
    await opener.next(lambda e: e.event_type == "ag2.channel.opened" and e.channel_id == channel_id)
    del invite
    return channel_id


async def conversation(target: str) -> tuple[Participant, Participant, str]:
    """alice and bob, registered and connected, in an opened conversation channel."""
    alice = await register(target, "alice")
    bob = await register(target, "bob")
    await alice.connect()
    await bob.connect()
    return alice, bob, await open_channel(alice, "conversation", [bob])


def data_of(env: envelope_pb2.Envelope) -> dict[str, Any]:
    """The envelope's event_data."""
    return json.loads(env.event_data_json) if env.event_data_json else {}
