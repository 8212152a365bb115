"""ReplicaService: one replica forwards a participant's posts to another, which answers them exactly
as that participant's own posts (docs/scale-out.md "Forwarding between replicas").

Two replicas as real gRPC servers in this process on one redis-server; the forwarding side is the
replica's own :class:`~hubsvc.replica_peers.ReplicaPeers`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import grpc
import pytest
from agentnet.v1 import connect_pb2, hub_pb2, replica_pb2, replica_pb2_grpc

from hubsvc.replica_peers import REPLICA_KEY_HEADER, ReplicaPeers
from netkernel.errors import InvalidArgument, NotFound, NotYourTurn, Unauthenticated, Unavailable
from tests.hubsvc import harness
from tests.hubsvc.harness import RunningHub, conversation, make_envelope, open_channel, register
from tests.hubsvc.test_replicas import REDIS_DB, Replicas, on
from tests.redis_server import free_port


@pytest.fixture
def on_redis_server(request: pytest.FixtureRequest) -> Iterator[None]:
    """Hubs built by the harness use the session's redis-server (forwarding does not depend on the layout)."""
    with harness.on_redis(request, "redis", REDIS_DB):
        yield


@pytest.fixture
async def replicas(on_redis_server: None, tmp_path: Path) -> AsyncIterator[Replicas]:
    async with AsyncExitStack() as stack:
        yield Replicas(stack, tmp_path / "hub.db")


def peers_of(hub: RunningHub) -> ReplicaPeers:
    """The replica's own client of the other replicas."""
    assert hub.server.peers is not None, "a hub on a shared store calls the other replicas"
    return hub.server.peers


def text_post(request_id: str, channel_id: str, text: str, key: str = "") -> connect_pb2.Post:
    env = make_envelope(channel_id, "ag2.msg.text", {"text": text})
    if key:
        env.idempotency_key = key
    return connect_pb2.Post(request_id=request_id, envelope=env)


async def test_a_forwarded_post_is_admitted_delivered_and_idempotent(replicas: Replicas) -> None:
    a = await replicas.start()
    b = await replicas.start()
    alice = await register(a.target, "alice")
    bob = on(b, await register(a.target, "bob"))
    await alice.connect()
    await bob.connect()
    channel_id = await open_channel(alice, "conversation", [bob])

    # a forwards alice's post to b, which admits it as alice's own.
    [result] = await peers_of(a).forward(b.target, alice.agent_id, [text_post("r1", channel_id, "hi", "k1")])
    assert result.request_id == "r1" and result.WhichOneof("result") == "envelope"
    assert result.envelope.sender_id == alice.agent_id and not result.duplicate
    got = await bob.next_of("ag2.msg.text")
    assert (got.envelope_id, got.seq) == (result.envelope.envelope_id, result.envelope.seq)

    # The retry with the same key is the duplicate, whichever replica answers it.
    [again] = await peers_of(a).forward(b.target, alice.agent_id, [text_post("r2", channel_id, "hi", "k1")])
    assert again.duplicate and again.envelope.envelope_id == result.envelope.envelope_id
    direct = await alice.post(channel_id, "ag2.msg.text", {"text": "hi"}, idempotency_key="k1")
    assert direct.envelope_id == result.envelope.envelope_id
    await alice.close()
    await bob.close()


async def test_refusals_come_back_as_the_owner_gave_them(replicas: Replicas) -> None:
    a = await replicas.start()
    b = await replicas.start()
    alice = await register(a.target, "alice")
    bob = on(b, await register(a.target, "bob"))
    await alice.connect()
    await bob.connect()
    channel_id = await open_channel(alice, "discussion", [bob])
    first = await alice.say(channel_id, "first")
    await bob.next_of("ag2.msg.text")

    # alice again, before bob answered: refused on b directly and through a's forward alike.
    with pytest.raises(NotYourTurn) as direct:
        await on(b, alice).rpc(
            "PostEnvelope",
            hub_pb2.PostEnvelopeRequest(envelope=make_envelope(channel_id, "ag2.msg.text", {"text": "again"})),
        )
    huge = connect_pb2.Post(request_id="x" * 300, envelope=make_envelope(channel_id, "ag2.msg.text", {"text": "y"}))
    results = await peers_of(a).forward(
        b.target,
        alice.agent_id,
        [text_post("r1", channel_id, "again"), huge, text_post("r3", channel_id, "and again")],
    )
    assert [r.WhichOneof("result") for r in results] == ["error", "error", "error"]
    refused = results[0].error
    assert (refused.reason, refused.message) == ("NOT_YOUR_TURN", direct.value.message)
    assert dict(refused.metadata) == direct.value.metadata
    assert results[1].error.reason == "INVALID_ARGUMENT" and "request_id" in results[1].error.message
    assert results[2].error.reason == "NOT_YOUR_TURN"

    # bob's answer through a forward to b is admitted after alice's turn.
    [answer] = await peers_of(b).forward(a.target, bob.agent_id, [text_post("r4", channel_id, "answer")])
    assert answer.WhichOneof("result") == "envelope", answer.error
    # Nothing refused was written: the answer takes the seq after the first.
    assert (answer.envelope.sender_id, answer.envelope.seq) == (bob.agent_id, first.seq + 1)
    await alice.close()
    await bob.close()


async def test_calls_without_the_replica_key_are_refused_and_change_nothing(replicas: Replicas) -> None:
    a = await replicas.start()
    alice, bob, channel_id = await conversation(a.target)
    request = replica_pb2.ForwardPostsRequest(sender_id=alice.agent_id, posts=[text_post("r", channel_id, "forged")])
    async with grpc.aio.insecure_channel(a.target) as channel:
        stub = replica_pb2_grpc.ReplicaServiceStub(channel)
        for metadata in (
            (),
            ((REPLICA_KEY_HEADER, "not-the-key"),),
            (("authorization", f"Bearer {alice.credential}"),),
        ):
            with pytest.raises(Unauthenticated, match="replica key"):
                await harness.call(stub.ForwardPosts(request, metadata=metadata, timeout=10))
    marker = await alice.say(channel_id, "marker")
    assert marker.seq == (await bob.next_of("ag2.msg.text")).seq  # nothing forged was admitted before it
    await alice.close()
    await bob.close()


async def test_malformed_calls_are_refused(replicas: Replicas) -> None:
    a = await replicas.start()
    b = await replicas.start()
    alice = await register(a.target, "alice")
    with pytest.raises(InvalidArgument, match="posts") as empty:
        await peers_of(a).forward(b.target, alice.agent_id, [])
    assert empty.value.metadata["field"] == "posts"
    too_many = [text_post(str(i), "c", "x") for i in range(b.core.options.max_batch + 1)]
    with pytest.raises(InvalidArgument, match="posts"):
        await peers_of(a).forward(b.target, alice.agent_id, too_many)
    with pytest.raises(NotFound, match="sender_id"):
        await peers_of(a).forward(b.target, "no-such-agent", [text_post("r", "c", "x")])
    with pytest.raises(NotFound, match="sender_id"):
        await peers_of(a).forward(b.target, "", [text_post("r", "c", "x")])


async def test_a_replica_that_does_not_answer_is_unavailable_to_retry(replicas: Replicas) -> None:
    a = await replicas.start()
    alice = await register(a.target, "alice")
    gone = f"127.0.0.1:{free_port()}"
    with pytest.raises(Unavailable) as err:
        await peers_of(a).forward(gone, alice.agent_id, [text_post("r", "c", "x")])
    assert err.value.metadata == {"cause": "replica_unreachable", "replica": gone}
    assert "idempotency key" in err.value.message


async def test_a_hub_alone_on_sqlite_serves_no_replica_service(tmp_path: Path) -> None:
    async with harness.running_hub(tmp_path / "hub.db") as hub:
        assert hub.server.peers is None
        async with grpc.aio.insecure_channel(hub.target) as channel:
            stub = replica_pb2_grpc.ReplicaServiceStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.ForwardPosts(replica_pb2.ForwardPostsRequest(), timeout=10)
    assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED
