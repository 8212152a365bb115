"""``--redis-wait-replicas``: a commit is acknowledged only once that many Redis replicas have it.

Real servers: a primary and a replica started with ``--replicaof``. With the replica linked,
posts are acknowledged; with it stopped, a post fails UNAVAILABLE saying it is stored on the
primary but not confirmed, the channel is rebuilt from what the primary holds, and the retry
with the same idempotency key is answered with the stored envelope (nothing lost, nothing twice).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
import pytest
from agentnet.v1 import envelope_pb2, hub_pb2, hub_pb2_grpc, identity_pb2

from hubsvc.server import start_hub
from hubsvc.storage.redis_store import RedisHubStore
from netkernel.errors import Unavailable, error_from_rpc
from tests.eventually import assert_eventually
from tests.hubsvc import harness
from tests.hubsvc.harness import EV_TEXT, Participant, RunningHub, conversation, make_envelope
from tests.redis_server import RedisServer, connected_replicas, start_redis_replica, start_redis_server

UNCONFIRMED = "stored on the Redis primary but not confirmed by its replicas"


@pytest.fixture
def primary(tmp_path: Path) -> Iterator[RedisServer]:
    server = start_redis_server(tmp_path / "primary")
    try:
        yield server
    finally:
        server.stop()


@asynccontextmanager
async def hub_waiting(primary: RedisServer, replicas: int) -> AsyncIterator[RunningHub]:
    """A hub on ``primary`` whose commits wait for ``replicas`` Redis replicas (at most 1 s: a linked
    replica on loaded cores can take longer than a fraction of a second to confirm)."""
    store = RedisHubStore(primary.url(0), wait_replicas=replicas, wait_timeout=1.0)
    server = await start_hub(store, operator_token=harness.OPERATOR_TOKEN)
    try:
        yield RunningHub(server, Path("unused"))
    finally:
        await server.stop(0.5)


def post(channel_id: str, text: str, key: str) -> hub_pb2.PostEnvelopeRequest:
    return hub_pb2.PostEnvelopeRequest(envelope=make_envelope(channel_id, EV_TEXT, {"text": text}, idempotency_key=key))


async def test_posts_are_acknowledged_once_a_replica_has_them(primary: RedisServer, tmp_path: Path) -> None:
    replica = start_redis_replica(tmp_path / "replica", primary)
    try:
        async with hub_waiting(primary, 1) as hub:
            alice, bob, channel_id = await conversation(hub.target)
            sent = await alice.rpc("PostEnvelope", post(channel_id, "hello", "k1"))
            assert not sent.duplicate
            await alice.close()
            await bob.close()
    finally:
        replica.stop()


async def test_more_replicas_than_connected_fail_the_post_unavailable_and_the_retry_is_answered_once(
    primary: RedisServer, tmp_path: Path
) -> None:
    replica = start_redis_replica(tmp_path / "replica", primary)
    try:
        async with hub_waiting(primary, 1) as hub:
            alice, bob, channel_id = await conversation(hub.target)
            async with hub_waiting(primary, 2) as greedy:  # a hub replica asking for 2: only 1 is connected
                await check_unconfirmed_then_retried(greedy, Participant(greedy.target, alice.record, alice.credential),
                                                     channel_id)  # fmt: skip
            await alice.close()
            await bob.close()
    finally:
        replica.stop()


async def test_a_registration_stored_but_unconfirmed_says_so_and_its_keyed_retry_gets_the_same_identity(
    primary: RedisServer,
) -> None:
    async with hub_waiting(primary, 1) as hub, grpc.aio.insecure_channel(hub.target) as channel:  # no replica runs
        stub = hub_pb2_grpc.HubServiceStub(channel)
        request = hub_pb2.RegisterRequest(
            passport=identity_pb2.Passport(name="carol"), idempotency_key="7f3c9a51d2e84b06a1c5e9f0b3d7a2c4"
        )
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await stub.Register(request, timeout=10)
        # Its own write, not "already registered": the name is carol's because this very call stored it.
        refusal = error_from_rpc(failed.value)
        assert isinstance(refusal, Unavailable) and UNCONFIRMED in str(refusal), refusal
        again = await stub.Register(request, timeout=10)
        assert again.agent.passport.name == "carol"
        assert [row.agent_id for row in [await hub.core.store.get_agent_named("carol")] if row] == [
            again.agent.agent_id
        ]


async def test_a_stopped_replica_fails_the_post_unavailable_and_the_retry_is_answered_once(
    primary: RedisServer, tmp_path: Path
) -> None:
    replica = start_redis_replica(tmp_path / "replica", primary)
    async with hub_waiting(primary, 1) as hub:
        alice, bob, channel_id = await conversation(hub.target)
        await alice.rpc("PostEnvelope", post(channel_id, "while the replica runs", "k0"))
        replica.stop()
        await assert_eventually(lambda: connected_replicas(primary) == 0)
        await check_unconfirmed_then_retried(hub, alice, channel_id)
        await alice.close()
        await bob.close()


async def check_unconfirmed_then_retried(hub: RunningHub, alice: Participant, channel_id: str) -> None:
    """A post fails UNAVAILABLE (stored, unconfirmed); its retry with the same key is the stored envelope."""
    with pytest.raises(Unavailable, match=UNCONFIRMED) as failed:
        await alice.rpc("PostEnvelope", post(channel_id, "unconfirmed", "k1"))
    assert "same idempotency key" in str(failed.value)

    async def retried() -> hub_pb2.PostEnvelopeResponse:
        return await alice.rpc("PostEnvelope", post(channel_id, "unconfirmed", "k1"))

    again = await assert_eventually(retried)  # once the channel is rebuilt from the primary
    assert again.duplicate
    assert again.envelope.seq == max(e.seq for e in await texts(hub, channel_id, "unconfirmed"))
    assert len(await texts(hub, channel_id, "unconfirmed")) == 1  # stored once: nothing lost, nothing twice


async def texts(hub: RunningHub, channel_id: str, text: str) -> list[envelope_pb2.Envelope]:
    """The EV_TEXT envelopes saying ``text`` in the channel's WAL, as the primary holds it."""
    found = [envelope_pb2.Envelope.FromString(data) for data in await hub.core.store.read_wal(channel_id, 0, 0, 0)]
    return [e for e in found if e.event_type == EV_TEXT and json.loads(e.event_data_json).get("text") == text]
