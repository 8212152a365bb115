"""Batched Connect frames: a client whose Hello sets max_batch gets what is queued for it
packed into `batch` frames (in the order single frames would have come, every delivery
counted in flight, within the byte bound); a client that does not ask gets single frames."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

from agentnet.v1 import connect_pb2, envelope_pb2

from hubsvc.core.delivery import Session
from hubsvc.core.options import HubOptions
from tests.clock import FakeClock
from tests.hubsvc.harness import Participant, RunningHub, conversation, data_of, running_hub

Frame = connect_pb2.ConnectResponse
URGENT, NORMAL, BACKGROUND = (
    envelope_pb2.PRIORITY_URGENT,
    envelope_pb2.PRIORITY_NORMAL,
    envelope_pb2.PRIORITY_BACKGROUND,
)


def session(*, max_in_flight: int = 1000, max_batch: int = 1, max_batch_bytes: int = 1024 * 1024) -> Session:
    """A live (replay finished) session of "bob" with no channels yet."""
    s = Session(
        "bob",
        "s1",
        max_in_flight=max_in_flight,
        max_queued=10_000,
        clock=FakeClock(),
        max_batch=max_batch,
        max_batch_bytes=max_batch_bytes,
    )
    s.finish_replay({})
    return s


def wire(
    channel_id: str,
    seq: int,
    priority: envelope_pb2.Priority.ValueType = NORMAL,
    text: str = "x",
    *,
    created_at: str = "",
    ttl_seconds: int | None = None,
) -> envelope_pb2.Envelope:
    """An envelope from alice, as committed."""
    env = envelope_pb2.Envelope(
        channel_id=channel_id,
        seq=seq,
        sender_id="alice",
        envelope_id=f"{channel_id}-{seq}",
        event_type="ag2.msg.text",
        event_data_json='{"text":"' + text + '"}',
        priority=priority,
        created_at=created_at,
    )
    if ttl_seconds is not None:
        env.ttl_seconds = ttl_seconds
    return env


def offer(s: Session, *wires: envelope_pb2.Envelope) -> None:
    for w in wires:
        s.offer(w, w.ByteSize())


async def frames(s: Session, n: int) -> list[Frame]:
    """The next ``n`` frames (each must be ready: batches never wait to fill)."""
    out = []
    for _ in range(n):
        frame = await asyncio.wait_for(s.next_frame(), 5)
        assert frame is not None
        out.append(frame)
    return out


def deliveries(frames_: list[Frame]) -> list[connect_pb2.Delivery]:
    out: list[connect_pb2.Delivery] = []
    for f in frames_:
        kind = f.WhichOneof("frame")
        if kind == "delivery":
            out.append(f.delivery)
        elif kind == "batch":
            out.extend(f.batch.deliveries)
    return out


def mixed_backlog() -> list[envelope_pb2.Envelope]:
    """Two channels, all three priorities, interleaved."""
    prios = [NORMAL, BACKGROUND, URGENT, NORMAL, URGENT, BACKGROUND, NORMAL, NORMAL, URGENT, NORMAL, BACKGROUND, NORMAL]
    return [wire("c1" if i % 3 else "c2", i + 1, p) for i, p in enumerate(prios)]


async def test_batches_carry_what_single_frames_would_in_the_same_order_and_chain() -> None:
    single, batched = session(), session(max_batch=5)
    offer(single, *mixed_backlog())
    offer(batched, *mixed_backlog())
    one_by_one = await frames(single, 12)
    assert {f.WhichOneof("frame") for f in one_by_one} == {"delivery"}
    packed = await frames(batched, 3)
    assert [len(f.batch.deliveries) for f in packed] == [5, 5, 2]
    assert deliveries(packed) == deliveries(one_by_one)
    got = deliveries(packed)
    # urgent first, FIFO within a priority
    assert [d.envelope.priority for d in got] == [URGENT] * 3 + [NORMAL] * 6 + [BACKGROUND] * 3
    assert [d.envelope.seq for d in got[:3]] == [3, 5, 9]
    # prev_seq chains each channel in seq order, whatever the arrival order
    for channel in ("c1", "c2"):
        chain = sorted((d.envelope.seq, d.prev_seq) for d in got if d.envelope.channel_id == channel)
        assert [prev for _, prev in chain] == [0] + [seq for seq, _ in chain[:-1]]
    assert batched.buffered_bytes == 0


async def test_a_batch_never_waits_to_fill() -> None:
    s = session(max_batch=100)
    offer(s, wire("c1", 1))
    [frame] = await frames(s, 1)
    assert frame.WhichOneof("frame") == "delivery"  # a batch of one is a single frame
    offer(s, wire("c1", 2), wire("c1", 3))
    [frame] = await frames(s, 1)
    assert [d.envelope.seq for d in frame.batch.deliveries] == [2, 3]


async def test_max_in_flight_counts_deliveries_not_frames() -> None:
    s = session(max_batch=10, max_in_flight=3)
    offer(s, *(wire("c1", seq) for seq in range(1, 7)))
    [first] = await frames(s, 1)
    assert [d.envelope.seq for d in first.batch.deliveries] == [1, 2, 3]
    waiting = asyncio.create_task(s.next_frame())
    for _ in range(5):
        await asyncio.sleep(0)
    assert not waiting.done()  # three deliveries are in flight: nothing more until an ack
    s.ack("c1", 1)
    frame = await asyncio.wait_for(waiting, 5)
    assert frame is not None and frame.delivery.envelope.seq == 4
    for seq in (2, 3, 4):
        s.ack("c1", seq)
    [last] = await frames(s, 1)
    assert [d.envelope.seq for d in last.batch.deliveries] == [5, 6]
    assert s.cursor("c1") == 4


async def test_a_batch_stays_within_the_byte_bound_and_a_larger_envelope_goes_alone() -> None:
    small = [wire("c1", seq, text="y" * 200) for seq in (1, 2, 3, 4, 6, 7, 8)]
    size = small[0].ByteSize()
    s = session(max_batch=100, max_batch_bytes=3 * size)
    offer(s, *small[:4], wire("c1", 5, text="z" * 2000), *small[4:])
    got = await frames(s, 4)
    # the fourth would pass the bound; the large one goes alone; a batch of one is a single frame
    assert [f.WhichOneof("frame") for f in got] == ["batch", "delivery", "delivery", "batch"]
    assert [[d.envelope.seq for d in f.batch.deliveries] for f in (got[0], got[3])] == [[1, 2, 3], [6, 7, 8]]
    assert sum(d.envelope.ByteSize() for d in got[0].batch.deliveries) <= 3 * size
    assert [got[1].delivery.envelope.seq, got[2].delivery.envelope.seq] == [4, 5]
    assert s.buffered_bytes == 0


async def test_post_results_lead_a_batch_and_a_pending_pong_goes_before_deliveries() -> None:
    s = session(max_batch=10)
    offer(s, wire("c1", 1), wire("c1", 2))
    for request_id in ("r1", "r2"):
        s.control(Frame(post_result=connect_pb2.PostResult(request_id=request_id)))
    [frame] = await frames(s, 1)
    assert [r.request_id for r in frame.batch.post_results] == ["r1", "r2"]
    assert [d.envelope.seq for d in frame.batch.deliveries] == [1, 2]
    offer(s, wire("c1", 3), wire("c1", 4))
    s.control(Frame(post_result=connect_pb2.PostResult(request_id="r3")))
    s.pong(7)
    got = await frames(s, 3)
    assert [f.WhichOneof("frame") for f in got] == ["post_result", "pong", "batch"]
    assert [d.envelope.seq for d in got[2].batch.deliveries] == [3, 4]


async def test_a_redirect_goes_alone_and_first_never_packed_into_a_batch() -> None:
    # A Redirect queued among post results and deliveries (docs/scale-out.md "Session steering") must
    # reach a batching client as its own frame: a batch carries only post results and deliveries.
    s = session(max_batch=10)
    offer(s, wire("c1", 1))
    s.control(Frame(post_result=connect_pb2.PostResult(request_id="r1")))
    s.redirect("10.0.0.2:5001", "1 of your 1 live channels are held at 10.0.0.2:5001")
    s.control(Frame(post_result=connect_pb2.PostResult(request_id="r2")))
    s.redirect("10.0.0.3:5001", "a newer one replaces the unsent one")
    first, second = await frames(s, 2)
    assert first.WhichOneof("frame") == "redirect" and first.redirect.address == "10.0.0.3:5001"
    assert [r.request_id for r in second.batch.post_results] == ["r1", "r2"]
    assert [d.envelope.seq for d in second.batch.deliveries] == [1]
    assert s.queued_frames == 0


async def test_expired_slots_inside_a_batch() -> None:
    clock = FakeClock()
    s = Session("bob", "s1", max_in_flight=100, max_queued=100, clock=clock, max_batch=10)
    s.finish_replay({})
    stale = wire("c1", 2, created_at="2020-01-01T00:00:00Z", ttl_seconds=1)
    offer(s, wire("c1", 1), stale, wire("c1", 3))
    [frame] = await frames(s, 1)
    got = list(frame.batch.deliveries)
    assert [(d.envelope.seq, d.expired) for d in got] == [(1, False), (2, True), (3, False)]
    assert not got[1].envelope.event_data_json and got[1].prev_seq == 1


async def _backlog(hub: RunningHub, n: int) -> tuple[Participant, Participant, str, list[envelope_pb2.Envelope]]:
    """alice and bob in a conversation; bob offline while alice posts ``n`` texts."""
    alice, bob, cid = await conversation(hub.target)
    await bob.disconnect()
    sent = [await alice.say(cid, f"m{i}") for i in range(n)]
    bob.inbox = asyncio.Queue()
    bob.chain.clear()
    bob.frames.clear()
    return alice, bob, cid, sent


async def test_a_client_without_the_opt_in_gets_single_frames(hub: RunningHub) -> None:
    alice, bob, _, sent = await _backlog(hub, 20)
    await bob.connect()
    got = await bob.until(sent[-1].envelope_id)
    assert [data_of(e)["text"] for e in got if e.event_type == "ag2.msg.text"] == [f"m{i}" for i in range(20)]
    assert {f.WhichOneof("frame") for f in bob.frames} == {"delivery"}
    await alice.close()
    await bob.close()


async def test_replay_comes_in_batches_with_the_same_chain(hub: RunningHub) -> None:
    alice, bob, cid, sent = await _backlog(hub, 20)
    bob.auto_ack = False
    welcome = await bob.connect(max_batch=8)
    got = await bob.until(sent[-1].envelope_id)
    assert [data_of(e)["text"] for e in got if e.event_type == "ag2.msg.text"] == [f"m{i}" for i in range(20)]
    batches = [f.batch for f in bob.frames if f.WhichOneof("frame") == "batch"]
    assert batches and all(len(b.deliveries) <= 8 for b in batches)
    assert all(d.replay for b in batches for d in b.deliveries)
    mine = [(prev, seq) for c, prev, seq in bob.chain if c == cid]
    assert mine[0][0] == welcome.cursors[cid]
    assert all(prev == before for (_, before), (prev, _) in itertools.pairwise(mine))
    # one Ack frame for the whole backlog moves the cursor past all of it
    bob.ack(cid, *(seq for _, seq in mine))
    await bob.sync()
    await bob.disconnect()
    bob.inbox = asyncio.Queue()
    welcome = await bob.connect(max_batch=8)
    assert welcome.cursors[cid] == sent[-1].seq
    await alice.say(cid, "after")
    assert data_of(await bob.next_of("ag2.msg.text"))["text"] == "after"
    await alice.close()
    await bob.close()


async def test_the_hub_caps_the_batch_a_client_asks_for(tmp_path: Path) -> None:
    async with running_hub(tmp_path / "hub.db", HubOptions(max_batch=4)) as hub:
        alice, bob, _, sent = await _backlog(hub, 12)
        await bob.connect(max_batch=1000)
        await bob.until(sent[-1].envelope_id)
        sizes = [len(f.batch.deliveries) for f in bob.frames if f.WhichOneof("frame") == "batch"]
        assert sizes and max(sizes) <= 4
        await alice.close()
        await bob.close()
