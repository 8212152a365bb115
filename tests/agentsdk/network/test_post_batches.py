"""The SDK's send path with PostBatch: posts queued together go out in one frame (never waiting to
fill one, never reordered against acks and pings), acks ride with the posts written within their
delay where the hub reads them there, and many concurrent posts all succeed, in order, against a hub
that takes batches and one that does not."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from agentnet.v1 import connect_pb2, envelope_pb2

from agentsdk.network._acks import AckCoalescer
from agentsdk.network._delivery import DeliveryStream
from agentsdk.network._outbox import MAX_BATCH_BYTES, Outbox
from agentsdk.transport import HubConnection
from hubsvc.core.options import HubOptions
from tests.eventually import assert_eventually
from tests.hubsvc.harness import EV_TEXT, conversation, data_of, make_envelope, running_hub

Frame = connect_pb2.ConnectRequest


def post(request_id: str) -> Frame:
    return Frame(post=connect_pb2.Post(request_id=request_id, envelope=envelope_pb2.Envelope(channel_id="c")))


def ack(seq: int) -> Frame:
    return Frame(ack=connect_pb2.Ack(entries=[connect_pb2.AckEntry(channel_id="c", seq=seq)]))


def shape(frame: Frame) -> str | list[str] | int:
    """A post's request id, a batch's request ids, an ack's seq."""
    kind = frame.WhichOneof("frame")
    if kind == "post":
        return frame.post.request_id
    if kind == "post_batch":
        return [p.request_id for p in frame.post_batch.posts]
    return frame.ack.entries[0].seq


@asynccontextmanager
async def started_stream(target: str, credential: str) -> AsyncIterator[DeliveryStream]:
    """A bare SDK delivery stream of ``credential`` (its deliveries dropped), started, stopped on exit."""

    async def dispatch(env: envelope_pb2.Envelope, size: int) -> None:
        pass

    conn = HubConnection(target)
    stream = DeliveryStream(conn, credential, dispatch)
    try:
        await stream.start()
        yield stream
    finally:
        await stream.stop()
        await conn.close()


async def written(outbox: Outbox) -> list[str | list[str] | int]:
    outbox.put(None)
    return [shape(f) async for f in outbox.frames()]


async def test_posts_queued_together_are_packed_up_to_the_limit_in_order() -> None:
    outbox = Outbox()
    outbox.limit = 3
    for frame in (post("1"), post("2"), post("3"), post("4"), post("5"), ack(7), post("6"), ack(8), post("7")):
        outbox.put(frame)
    assert await written(outbox) == [["1", "2", "3"], ["4", "5"], 7, "6", 8, "7"]


async def test_a_batch_holds_at_most_max_batch_bytes_of_posts() -> None:
    """Large posts queued together are split into frames of at most MAX_BATCH_BYTES (a larger one alone)."""

    def big(request_id: str, size: int) -> Frame:
        frame = post(request_id)
        frame.post.envelope.event_data_json = "x" * size
        return frame

    third = MAX_BATCH_BYTES // 3
    outbox = Outbox()
    outbox.limit = 100
    for frame in (big("1", third), big("2", third), big("3", third), big("4", MAX_BATCH_BYTES), post("5")):
        outbox.put(frame)
    assert await written(outbox) == [["1", "2"], "3", "4", "5"]


async def test_posts_queued_by_request_id_and_envelope_pack_like_post_frames() -> None:
    """``Outbox.post`` (what the SDK's send path queues: no Post frame of its own) packs in order
    with Post frames, splits by bytes the same way, and goes alone as a plain Post."""
    outbox = Outbox()
    outbox.limit = 3
    third = MAX_BATCH_BYTES // 3
    envelopes = {str(i): envelope_pb2.Envelope(channel_id="c", event_data_json=f'{{"i":{i}}}') for i in range(1, 7)}
    envelopes["5"].event_data_json = "x" * third
    envelopes["6"].event_data_json = "x" * (2 * third)
    outbox.post("1", envelopes["1"])
    outbox.put(post("2"))
    outbox.post("3", envelopes["3"])
    outbox.post("4", envelopes["4"])  # a fourth: the next batch
    outbox.put(ack(9))
    outbox.post("5", envelopes["5"])
    outbox.post("6", envelopes["6"])  # with 5, over MAX_BATCH_BYTES: each alone
    outbox.put(None)
    frames = [f async for f in outbox.frames()]
    assert [shape(f) for f in frames] == [["1", "2", "3"], "4", 9, "5", "6"]
    written = [p for f in frames for p in ([f.post] if f.HasField("post") else f.post_batch.posts)]
    for p in written:
        if p.request_id != "2":
            assert p.envelope == envelopes[p.request_id]  # the envelope as queued, copied into the frame
    alone = Outbox()
    alone.limit = 100
    alone.post("7", envelopes["1"])
    frame = await asyncio.wait_for(alone.next(), 5)
    assert frame is not None and frame.WhichOneof("frame") == "post"
    assert frame.post.request_id == "7" and frame.post.envelope == envelopes["1"]


async def test_a_hub_without_post_batch_gets_single_posts() -> None:
    for limit in (0, 1):
        outbox = Outbox()
        outbox.limit = limit
        for frame in (post("1"), post("2"), ack(3)):
            outbox.put(frame)
        assert await written(outbox) == ["1", "2", 3]


async def test_the_outbox_never_waits_to_fill_a_batch() -> None:
    outbox = Outbox()
    outbox.limit = 100
    outbox.put(post("1"))
    assert shape(await asyncio.wait_for(outbox.next(), 5)) == "1"  # alone: sent as it is, at once
    outbox.put(post("2"))
    outbox.put(post("3"))
    assert shape(await asyncio.wait_for(outbox.next(), 5)) == ["2", "3"]


def entries(ack: connect_pb2.Ack) -> list[tuple[str, int]]:
    return [(e.channel_id, e.seq) for e in ack.entries]


async def test_pending_acks_ride_in_the_next_post_written() -> None:
    sent: list[connect_pb2.Ack] = []
    acks = AckCoalescer(sent.append)
    acks.delay = 60.0  # longer than the test: only a post (or flush_at) takes them
    outbox = Outbox()
    outbox.limit, outbox.carry = 4, acks.take
    acks.add("c", 1)
    acks.add("c", 2)
    await asyncio.sleep(0)
    assert sent == []  # not at the end of the turn: waiting for a post
    outbox.put(post("1"))
    frame = await asyncio.wait_for(outbox.next(), 5)
    assert frame.WhichOneof("frame") == "post_batch"  # a batch of one post, to carry the acks
    assert [p.request_id for p in frame.post_batch.posts] == ["1"]
    assert entries(frame.post_batch.ack) == [("c", 1), ("c", 2)]
    acks.flush()
    assert sent == []  # nothing was left to go in a frame of its own
    outbox.put(post("2"))
    outbox.put(post("3"))
    acks.add("c", 3)
    frame = await asyncio.wait_for(outbox.next(), 5)
    assert [p.request_id for p in frame.post_batch.posts] == ["2", "3"] and entries(frame.post_batch.ack) == [("c", 3)]
    outbox.put(post("4"))
    assert shape(await asyncio.wait_for(outbox.next(), 5)) == "4"  # no ack pending: a plain Post


async def test_an_ack_with_no_post_to_ride_goes_alone_after_the_delay() -> None:
    sent: list[connect_pb2.Ack] = []
    acks = AckCoalescer(sent.append)
    acks.delay = 0.05
    acks.add("c", 1)
    acks.add("c", 2)
    await asyncio.sleep(0)
    assert sent == []
    await assert_eventually(lambda: sent)
    assert [entries(a) for a in sent] == [[("c", 1), ("c", 2)]]


async def test_acks_wait_no_longer_once_flush_at_are_pending() -> None:
    sent: list[connect_pb2.Ack] = []
    acks = AckCoalescer(sent.append, flush_at=3)
    acks.delay = 60.0
    acks.add("c", 1)
    acks.add("c", 2)
    await asyncio.sleep(0)
    assert sent == []
    acks.add("c", 3)
    await asyncio.sleep(0)  # the end of this turn, not the delay
    assert [entries(a) for a in sent] == [[("c", 1), ("c", 2), ("c", 3)]]
    one = AckCoalescer(sent.append, flush_at=1)  # a tiny max_in_flight: no ack may wait
    one.delay = 60.0
    one.add("c", 4)
    await asyncio.sleep(0)
    assert entries(sent[-1]) == [("c", 4)]


async def test_a_hub_without_post_batch_gets_no_riding_acks() -> None:
    acks = AckCoalescer(lambda ack: None)
    acks.delay = 60.0
    outbox = Outbox()
    outbox.limit, outbox.carry = 0, acks.take  # Welcome.max_post_batch 0: PostBatch not understood
    acks.add("c", 1)
    outbox.put(post("1"))
    assert shape(await asyncio.wait_for(outbox.next(), 5)) == "1"
    ack = acks.take()
    assert ack is not None and entries(ack) == [("c", 1)]  # still pending: it goes in an Ack frame


@pytest.mark.parametrize("max_batch", [256, 1])
async def test_many_concurrent_posts_all_succeed_in_order(tmp_path: Path, max_batch: int) -> None:
    async with running_hub(tmp_path / "hub.db", HubOptions(max_batch=max_batch)) as hub:
        alice, bob, cid = await conversation(hub.target)
        await alice.disconnect()
        async with started_stream(hub.target, alice.credential) as stream:
            envelopes = [make_envelope(cid, EV_TEXT, {"text": f"m{i}"}) for i in range(120)]
            admitted = await asyncio.gather(*(stream.post(env) for env in envelopes))
            seqs = [e.seq for e in admitted]
            assert seqs == list(range(seqs[0], seqs[0] + 120))  # admitted in the order posted
            assert [data_of(e)["text"] for e in admitted] == [f"m{i}" for i in range(120)]
            # Each post carried a key of its own (32 hex digits), which the hub kept; a post that
            # brings its own key keeps it, and a retry under it returns the original.
            keys = [e.idempotency_key for e in admitted]
            assert len(set(keys)) == 120 and all(len(k) == 32 and int(k, 16) >= 0 for k in keys)
            again = make_envelope(cid, EV_TEXT, {"text": "m0 again"})
            again.idempotency_key = keys[0]
            assert (await stream.post(again)).envelope_id == admitted[0].envelope_id
            got = await bob.until(admitted[-1].envelope_id)
            assert [data_of(e)["text"] for e in got if e.event_type == EV_TEXT] == [f"m{i}" for i in range(120)]
        await bob.close()


async def test_a_post_cancelled_in_the_turn_its_result_arrives_ends_cancelled(tmp_path: Path) -> None:
    """Cancelling a post (a handler stopped by ``disconnect``) is never lost, even when the hub's
    result arrives in the same event-loop turn: ``asyncio.wait_for`` (Python 3.11) returned the result
    then and swallowed the cancellation, so a stopping client's handler task went on to wait for
    its next envelope and ``disconnect`` gave up on it after 5 s."""
    async with running_hub(tmp_path / "hub.db") as hub:
        alice, bob, cid = await conversation(hub.target)
        await alice.disconnect()
        async with started_stream(hub.target, alice.credential) as stream:
            post = asyncio.create_task(stream.post(make_envelope(cid, EV_TEXT, {"text": "hi"})))
            await asyncio.sleep(0)  # the post is written and waits for its result (a round trip away)
            [result] = stream._results.values()
            accepted: list[bool] = []
            result.add_done_callback(lambda _: accepted.append(post.cancel()))  # as its result arrives
            await asyncio.wait({post}, timeout=10)
            assert len(accepted) == 1 and post.done()
            assert post.cancelled() or not accepted[0]  # a cancel the task took is never lost
        await bob.close()
