"""The replica harness (``tests/replicas.py``): replicas on one Redis, one SIGKILLed and started
again on its port; the clients of the killed replica come back to it and lose nothing, while
the other replica serves throughout."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from agentsdk.network.hub_client import HubClient
from netkernel.envelope import EV_TEXT, Envelope
from netkernel.identity import Passport
from tests.eventually import assert_eventually
from tests.redis_server import RedisServer
from tests.replicas import replicas

DB = 6
"""The DB number of these tests (flushed after each)."""


@pytest.fixture
def url(redis_server: RedisServer) -> Iterator[str]:
    yield redis_server.url(DB)
    redis_server.flush(DB)


async def test_a_replica_killed_and_started_again_on_its_port_serves_its_clients_again(
    url: str, tmp_path: Path
) -> None:
    with replicas(url, tmp_path, 2) as hubs:
        assert hubs.running(0) and hubs.running(1) and hubs.ports[0] != hubs.ports[1]
        handled: list[Envelope] = []
        async with HubClient.connect(hubs.target(1)) as one, HubClient.connect(hubs.target(1)) as other:
            alice = await one.register_human(Passport(name="alice", kind="human"))
            bob = await other.register_human(Passport(name="bob", kind="human"))

            async def record(env: Envelope) -> None:
                if env.event_type == EV_TEXT:
                    handled.append(env)

            bob.on_envelope(record)
            ch = await alice.open(type="conversation", target="bob")
            posted = [await alice.send(ch.channel_id, "before")]
            await assert_eventually(lambda: len(handled) == 1)

            assert hubs.kill(1) == -9
            assert not hubs.running(1) and hubs.running(0)
            await assert_eventually(
                lambda: one.connection.channel.get_state() == grpc.ChannelConnectivity.TRANSIENT_FAILURE, timeout=30
            )
            port = hubs.ports[1]
            await asyncio.to_thread(hubs.restart, 1)  # hydrates from Redis what replica 1 stored before it died
            assert hubs.ports[1] == port and hubs.running(1)
            posted.append(await alice.send(ch.channel_id, "after"))  # waits for the replica, then posts
            await assert_eventually(lambda: len(handled) == 2, timeout=30)
            assert [e.envelope_id for e in handled] == [p.envelope_id for p in posted]
            assert [e.text for e in await bob.read_wal(ch.channel_id) if e.event_type == EV_TEXT] == ["before", "after"]
        assert hubs.stop_all() == [0, 0]
