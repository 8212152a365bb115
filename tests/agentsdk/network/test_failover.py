"""Client failover: an SDK client given several hub targets moves to a standby hub on the same
Redis store when its hub is SIGKILLed, and nothing is lost or handled twice (issue #17).

Real processes: a redis-server, hub A and then hub B (``python -m hubsvc --store redis://``,
started by ``tests/replicas.py``), both on loopback; the clients list B's port before anything
listens there. Once with one sequential poster, once under load (several channels, several
posts in flight in each)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import grpc
import pytest
from agentnet.v1 import hub_pb2

from agentsdk.errors import InvalidArgument, Timeout, Unavailable
from agentsdk.network.hub_client import HubClient
from agentsdk.targets import hub_target
from agentsdk.tls import TlsConfig
from agentsdk.transport import HubConnection, unary
from localprocs.redis_server import free_port
from netkernel.envelope import EV_TEXT, Envelope
from netkernel.identity import Passport
from tests.eventually import assert_eventually
from tests.redis_server import RedisServer
from tests.replicas import replicas

DOWN = grpc.ChannelConnectivity.TRANSIENT_FAILURE
DB = 5
"""The DB number of these tests (flushed after each)."""


@pytest.fixture
def url(redis_server: RedisServer) -> Iterator[str]:
    yield redis_server.url(DB)
    redis_server.flush(DB)


def test_several_targets_become_one_pick_first_target_and_bad_lists_are_refused() -> None:
    assert hub_target("localhost:50051").grpc_target == "localhost:50051"
    assert hub_target("dns:///hub.example:50051").grpc_target == "dns:///hub.example:50051"
    both = hub_target(["127.0.0.1:5001", " 10.0.0.2:5002"])
    assert both.grpc_target == "ipv4:127.0.0.1:5001,10.0.0.2:5002" and both.several
    assert hub_target("127.0.0.1:5001,127.0.0.1:5002").grpc_target == "ipv4:127.0.0.1:5001,127.0.0.1:5002"
    assert hub_target(["[::1]:5001", "[::1]:5002"]).grpc_target == "ipv6:[::1]:5001,[::1]:5002"
    assert hub_target(["127.0.0.1:5001"]).grpc_target == "127.0.0.1:5001"
    refused = {
        "": "the hub target is empty",
        "[]": "the list of hub targets is empty",
        "hub-a:5001,hub-b:5001": "must be IP addresses, not host names",
        "127.0.0.1:5001,127.0.0.1": "needs 'IP:port'",
        "127.0.0.1:5001,127.0.0.1:99999": "the port must be a number from 1 to 65535",
        "127.0.0.1:5001,[::1]:5001": "mix IPv4 and IPv6",
    }
    for given, message in refused.items():
        with pytest.raises(InvalidArgument) as info:
            hub_target([] if given == "[]" else given)
        assert message in str(info.value), given
    with pytest.raises(InvalidArgument) as tls:
        HubConnection(["127.0.0.1:5001", "127.0.0.1:5002"], TlsConfig())
    assert "needs TlsConfig(server_name=...)" in str(tls.value)


async def test_a_post_to_a_replica_a_redirect_named_does_not_wait_for_it_to_come_back() -> None:
    """A post to the addresses given waits for a hub to be reachable (up to its deadline); one sent to
    a replica a Redirect named fails at once when nothing answers there, so the SDK sends it to the
    addresses given instead of waiting out its deadline for a replica that died."""
    dead = f"127.0.0.1:{free_port()}"  # nothing listens there
    request = hub_pb2.PostEnvelopeRequest()
    async with HubConnection(dead) as home:
        with pytest.raises(Timeout):
            await unary(home.stub.PostEnvelope, request, hub_pb2.PostEnvelopeResponse, timeout=1.0)
        with pytest.raises(Unavailable):
            await unary(home.peer(dead).stub.PostEnvelope, request, hub_pb2.PostEnvelopeResponse, timeout=20.0)


@pytest.mark.parametrize(
    ("pairs", "in_flight", "per_poster"),
    [(1, 1, 40), (4, 8, 48)],
    ids=["one-sequential-poster", "under-load-4-channels-8-in-flight-each"],
)
async def test_clients_given_two_targets_move_to_the_standby_hub_and_lose_nothing(
    url: str, tmp_path: Path, pairs: int, in_flight: int, per_poster: int
) -> None:
    """Hub A serves ``pairs`` conversations, each posted into by ``in_flight`` concurrent tasks
    of its opener; A is SIGKILLed in the middle and standby B starts on the spare port."""
    with replicas(url, tmp_path, 1, standbys=1) as hubs:
        targets = hubs.targets  # B's port is listed before anything listens there
        handled: list[list[Envelope]] = [[] for _ in range(pairs)]
        async with AsyncExitStack() as stack:
            clients = [
                await stack.enter_async_context(HubClient.connect(targets if i % 2 else ",".join(targets)))
                for i in range(2 * pairs)
            ]
            senders = [
                await clients[2 * i].register_human(Passport(name=f"alice{i}", kind="human")) for i in range(pairs)
            ]
            receivers = [
                await clients[2 * i + 1].register_human(Passport(name=f"bob{i}", kind="human")) for i in range(pairs)
            ]
            for i, receiver in enumerate(receivers):
                receiver.on_envelope(_recorder(handled[i]))
            chans = [await senders[i].open(type="conversation", target=f"bob{i}") for i in range(pairs)]
            posted = [[await senders[i].send(chans[i].channel_id, f"before {i}")] for i in range(pairs)]
            await assert_eventually(lambda: all(len(h) == 1 for h in handled))

            async def post_stream(i: int, task: int) -> list[Envelope]:
                return [await senders[i].send(chans[i].channel_id, f"during {i}.{task}.{n}") for n in range(per_poster)]

            posters = [asyncio.create_task(post_stream(i, t)) for i in range(pairs) for t in range(in_flight)]
            total = pairs * in_flight * per_poster
            # A dies in the middle of the load (a loaded machine gets there slowly: the wait is generous).
            await assert_eventually(
                lambda: _assert_len([e for h in handled for e in h], pairs + total // 3), timeout=60
            )
            assert not all(p.done() for p in posters)  # the kill lands in the middle of the load
            hubs.kill(0)
            # No client finds a hub at either address before B starts: posts wait and retry meanwhile.
            for hub in clients:
                await assert_eventually(lambda hub=hub: hub.connection.channel.get_state() == DOWN, timeout=30)
            await asyncio.to_thread(hubs.restart, 1)
            during = await asyncio.wait_for(asyncio.gather(*posters), 120)  # posts in flight when A died: retried on B
            for k, acked in enumerate(during):
                posted[k // in_flight] += acked
            replies = [await receivers[i].send(chans[i].channel_id, "after the move") for i in range(pairs)]
            for i in range(pairs):
                posted[i].append(await senders[i].send(chans[i].channel_id, "last"))
            await assert_eventually(lambda: all(len(handled[i]) >= len(posted[i]) for i in range(pairs)), timeout=60)

            for i in range(pairs):
                # Every post acknowledged to the sender reached the receiver's handler exactly once, in seq order.
                by_seq = sorted(posted[i], key=lambda e: e.seq)
                assert [e.envelope_id for e in handled[i]] == [p.envelope_id for p in by_seq]
                # The WAL (read through hub B) holds each post exactly once, seqs contiguous: a post
                # retried with its idempotency key after A died was not admitted a second time.
                wal = await receivers[i].read_wal(chans[i].channel_id)
                assert [e.seq for e in wal] == list(range(1, len(wal) + 1))
                texts = [e for e in wal if e.event_type == EV_TEXT]
                assert sorted(e.text for e in texts) == sorted([p.text for p in posted[i]] + ["after the move"])
                keys = [e.idempotency_key for e in texts if e.sender_id == senders[i].agent_id]
                assert None not in keys and len(set(keys)) == len(keys) == len(posted[i])
                assert {e.envelope_id for e in texts} >= {p.envelope_id for p in posted[i]} | {replies[i].envelope_id}
        assert hubs.stop_all() == [None, 0]


def _recorder(into: list[Envelope]) -> Callable[[Envelope], Awaitable[None]]:
    async def record(env: Envelope) -> None:
        if env.event_type == EV_TEXT:
            into.append(env)

    return record


def _assert_len(items: list[Envelope], n: int) -> bool:
    assert len(items) >= n, len(items)
    return True
