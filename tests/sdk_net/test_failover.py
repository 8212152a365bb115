"""Client failover: an SDK client given several hub targets moves to a standby hub on the same
Redis store when its hub is SIGKILLed, and nothing is lost or handled twice (issue #17).

Real processes: a redis-server, hub A and then hub B (``python -m hubsvc --store redis://``),
both on loopback; the client lists B's port before anything listens there."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from agentsdk.errors import InvalidArgument
from agentsdk.network.hub_client import HubClient
from agentsdk.targets import hub_target
from agentsdk.tls import TlsConfig
from agentsdk.transport import HubConnection
from netkernel.envelope import EV_TEXT, Envelope
from netkernel.identity import Passport
from tests.eventually import assert_eventually
from tests.procs import ROOT, ServiceProcess, start_service
from tests.redis_server import RedisServer, free_port

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


def start_hub(url: str, data_dir: Path, port: int = 0) -> ServiceProcess:
    return start_service("hubsvc", ["--store", url, "--data-dir", str(data_dir)], cwd=ROOT, port=port)


async def test_a_client_given_two_targets_moves_to_the_standby_hub_and_loses_nothing(url: str, tmp_path: Path) -> None:
    hub_a = start_hub(url, tmp_path)
    spare = free_port()  # hub B's port: nothing listens there yet
    targets = [f"127.0.0.1:{hub_a.port}", f"127.0.0.1:{spare}"]
    hub_b: ServiceProcess | None = None
    handled: list[Envelope] = []
    try:
        async with HubClient.connect(targets) as one, HubClient.connect(",".join(targets)) as other:
            alice = await one.register_human(Passport(name="alice", kind="human"))
            bob = await other.register_human(Passport(name="bob", kind="human"))

            async def record(env: Envelope) -> None:
                if env.event_type == EV_TEXT:
                    handled.append(env)

            bob.on_envelope(record)
            ch = await alice.open(type="conversation", target="bob")
            posted = [await alice.send(ch.channel_id, f"before {i}") for i in range(5)]
            await assert_eventually(lambda: _assert_len(handled, 5))

            async def post_stream() -> list[Envelope]:
                return [await alice.send(ch.channel_id, f"during {i}") for i in range(40)]

            poster = asyncio.create_task(post_stream())
            await assert_eventually(lambda: _assert_len(handled, 15))  # A dies in the middle of the stream
            hub_a.terminate(signal.SIGKILL)
            # Both clients find no hub at either address before B starts: posts wait and retry meanwhile.
            for hub in (one, other):
                await assert_eventually(lambda hub=hub: hub.connection.channel.get_state() == DOWN, timeout=30)
            hub_b = await asyncio.to_thread(start_hub, url, tmp_path, spare)
            posted += await asyncio.wait_for(poster, 60)  # posts in flight when A died were retried on B
            reply = await bob.send(ch.channel_id, "after the move")  # bob's posts succeed again
            posted += [await alice.send(ch.channel_id, "last")]
            await assert_eventually(lambda: _assert_len(handled, len(posted)), timeout=30)

            # Every post acknowledged to alice reached bob's handler exactly once, in seq order.
            assert [e.envelope_id for e in handled] == [p.envelope_id for p in posted]
            assert [e.seq for e in handled] == sorted(e.seq for e in handled)
            # The WAL (read through hub B) holds each post exactly once, seqs contiguous.
            wal = await bob.read_wal(ch.channel_id)
            assert [e.seq for e in wal] == list(range(1, len(wal) + 1))
            texts = [e.text for e in wal if e.event_type == EV_TEXT]
            assert sorted(texts) == sorted([p.text for p in posted] + ["after the move"])
            assert reply.envelope_id in [e.envelope_id for e in wal]
    finally:
        hub_a.terminate(signal.SIGKILL)
        if hub_b is not None:
            assert hub_b.terminate(signal.SIGTERM) == 0


def _assert_len(items: list[Envelope], n: int) -> bool:
    assert len(items) >= n, len(items)
    return True
