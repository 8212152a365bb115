"""PostBatch on a real hub: several posts in one Connect frame, each handled exactly as a single
Post would be (in order, admitted or refused on its own, its own PostResult only once committed),
the frame itself bounded by the hub's --max-batch (Welcome.max_post_batch)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import grpc
import pytest
from agentnet.v1 import connect_pb2, envelope_pb2

from agentsdk.errors import error_from_rpc
from hubsvc.core.options import HubOptions
from hubsvc.storage import HubStore
from tests.hubsvc.arbiters import Desk
from tests.hubsvc.harness import (
    EV_TEXT,
    Participant,
    RunningHub,
    conversation,
    data_of,
    list_audit,
    make_envelope,
    make_store,
    open_channel,
    register,
    running_hub,
)


def text(channel_id: str, body: str, **fields: object) -> envelope_pb2.Envelope:
    return make_envelope(channel_id, EV_TEXT, {"text": body}, **fields)


def refusal(result: connect_pb2.PostResult) -> str:
    """The refusal's reason ("" when the post was admitted)."""
    return result.error.reason if result.WhichOneof("result") == "error" else ""


async def stored_ids(store: HubStore, channel_id: str) -> set[str]:
    """The envelope ids the hub's store holds for the channel (read through a second store client)."""
    return {envelope_pb2.Envelope.FromString(data).envelope_id for data in await store.read_wal(channel_id, 0, 0, 0)}


async def test_welcome_reports_the_largest_post_batch(tmp_path: Path) -> None:
    async with running_hub(tmp_path / "hub.db", HubOptions(max_batch=17)) as hub:
        alice = await register(hub.target, "alice")
        welcome = await alice.connect()
        assert welcome.max_post_batch == 17
        await alice.close()


async def test_a_batch_is_admitted_in_order_with_one_result_each(conv: tuple[Participant, Participant, str]) -> None:
    alice, bob, cid = conv
    results = await alice.post_batch([text(cid, f"m{i}") for i in range(20)])
    assert [refusal(r) for r in results] == [""] * 20
    seqs = [r.envelope.seq for r in results]
    assert seqs == list(range(seqs[0], seqs[0] + 20))
    assert [data_of(r.envelope)["text"] for r in results] == [f"m{i}" for i in range(20)]
    got = await bob.until(results[-1].envelope.envelope_id)
    assert [data_of(e)["text"] for e in got if e.event_type == EV_TEXT] == [f"m{i}" for i in range(20)]


async def test_a_post_refused_mid_batch_gets_its_error_and_the_others_are_admitted(hub: RunningHub) -> None:
    alice, bob, cid = await conversation(hub.target)
    carol = await register(hub.target, "carol")
    await carol.connect()
    other = await open_channel(bob, "conversation", [carol])  # alice is not a participant
    batch = [
        text(cid, "a"),
        text(cid, "b", audience=[carol.agent_id]),  # not a participant of cid: refused by the channel's rules
        text(cid, "c", trace_id="t" * 5000),  # over a field limit: refused before admission
        text(other, "d"),  # a channel alice is not in
        text(cid, "e"),
    ]
    results = await alice.post_batch(batch)
    assert [refusal(r) for r in results] == ["", "INVALID_ARGUMENT", "INVALID_ARGUMENT", "NOT_PARTICIPANT", ""]
    assert results[2].error.metadata["field"] == "envelope.trace_id"
    assert results[4].envelope.seq == results[0].envelope.seq + 1
    got = await bob.until(results[4].envelope.envelope_id)
    assert [data_of(e)["text"] for e in got if e.event_type == EV_TEXT] == ["a", "e"]
    refused = [r for r in await list_audit(hub, kind="post_refused") if r.actor_id == alice.agent_id]
    assert len(refused) == 3  # every refusal is audited (the field limit's too), as for single posts
    for p in (alice, bob, carol):
        await p.close()


async def test_a_channel_that_ends_mid_batch_refuses_the_rest(hub: RunningHub) -> None:
    alice = await register(hub.target, "alice")
    bob = await register(hub.target, "bob")
    await alice.connect()
    await bob.connect()
    cid = await open_channel(alice, "conversation", [bob], knobs={"max_turns": 3})
    results = await alice.post_batch([text(cid, f"m{i}") for i in range(5)])
    assert [refusal(r) for r in results] == ["", "", "", "CHANNEL_CLOSED", "CHANNEL_CLOSED"]
    closed = await bob.next_of("ag2.channel.closed")
    assert closed.seq == results[2].envelope.seq + 1
    await alice.close()
    await bob.close()


async def test_an_idempotent_retry_inside_a_batch_is_its_duplicate(conv: tuple[Participant, Participant, str]) -> None:
    alice, bob, cid = conv
    first, retry, other, again = await alice.post_batch(
        [
            text(cid, "once", idempotency_key="k1"),
            text(cid, "once", idempotency_key="k1"),
            text(cid, "two", idempotency_key="k2"),
            text(cid, "once", idempotency_key="k1"),
        ]
    )
    assert not first.duplicate and not other.duplicate
    assert retry.duplicate and again.duplicate
    assert retry.envelope.envelope_id == again.envelope.envelope_id == first.envelope.envelope_id
    assert other.envelope.seq == first.envelope.seq + 1
    # and across frames: a later batch retrying k2 gets the committed original
    (later,) = await alice.post_batch([text(cid, "two", idempotency_key="k2")])
    assert later.duplicate and later.envelope.envelope_id == other.envelope.envelope_id
    got = await bob.until(other.envelope.envelope_id)
    assert [data_of(e)["text"] for e in got if e.event_type == EV_TEXT] == ["once", "two"]


async def _ended_by(alice: Participant, batch: connect_pb2.PostBatch) -> grpc.aio.AioRpcError:
    alice._outbox.put_nowait(connect_pb2.ConnectRequest(post_batch=batch))
    assert alice._reader is not None
    await alice._reader
    assert alice.stream_error is not None
    return alice.stream_error


async def test_an_empty_or_oversized_batch_ends_the_stream_and_admits_nothing(tmp_path: Path) -> None:
    async with running_hub(tmp_path / "hub.db", HubOptions(max_batch=4)) as hub:
        alice, bob, cid = await conversation(hub.target)
        alice.auto_ack = False  # no frame of alice's may race the stream's end (the client would see INTERNAL)
        for count in (0, 5):
            await alice.disconnect()
            await alice.connect()
            posts = [connect_pb2.Post(request_id=str(i), envelope=text(cid, f"m{i}")) for i in range(count)]
            err = await _ended_by(alice, connect_pb2.PostBatch(posts=posts))
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert error_from_rpc(err).metadata["field"] == "post_batch.posts"
            assert "post_batch.posts" in (err.details() or "")
        await alice.disconnect()
        await alice.connect()
        marker = await alice.say(cid, "marker")
        got = await bob.until(marker.envelope_id)
        assert [data_of(e)["text"] for e in got if e.event_type == EV_TEXT] == ["marker"]
        await alice.close()
        await bob.close()


async def test_acks_riding_in_a_post_batch_are_applied_like_an_ack_frame(tmp_path: Path) -> None:
    async with running_hub(tmp_path / "hub.db") as hub:
        alice, bob, cid = await conversation(hub.target)
        assert bob.welcome is not None and bob.welcome.post_batch_ack
        last = await alice.say(cid, "before")
        await bob.until(last.envelope_id)
        await bob.disconnect()
        bob.auto_ack = False  # bob acks only inside his own PostBatch frames
        await bob.connect(max_in_flight=1)  # the hub sends the next delivery only once the last is acked
        sent = [(await alice.say(cid, f"m{i}")).envelope_id for i in range(3)]
        seen: list[str] = []
        while sent[-1] not in seen:
            delivery = await asyncio.wait_for(bob.inbox.get(), 10)
            seen.append(delivery.envelope.envelope_id)
            ack = connect_pb2.Ack(entries=[connect_pb2.AckEntry(channel_id=cid, seq=delivery.envelope.seq)])
            (result,) = await bob.post_batch([text(cid, f"re {delivery.envelope.seq}")], ack)
            assert refusal(result) == ""
        assert seen[-3:] == sent
        await alice.close()
        await bob.close()


async def test_too_many_riding_acks_end_the_stream_and_admit_nothing(tmp_path: Path) -> None:
    async with running_hub(tmp_path / "hub.db", HubOptions(max_stream_entries=2)) as hub:
        alice, bob, cid = await conversation(hub.target)
        alice.auto_ack = False  # no frame of alice's may race the stream's end
        ack = connect_pb2.Ack(entries=[connect_pb2.AckEntry(channel_id=cid, seq=s) for s in (1, 2, 3)])
        batch = connect_pb2.PostBatch(posts=[connect_pb2.Post(request_id="1", envelope=text(cid, "no"))], ack=ack)
        err = await _ended_by(alice, batch)
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_from_rpc(err).metadata["field"] == "post_batch.ack.entries"
        await alice.connect()
        marker = await alice.say(cid, "marker")
        got = await bob.until(marker.envelope_id)
        assert [data_of(e)["text"] for e in got if e.event_type == EV_TEXT] == ["marker"]
        refused = await list_audit(hub, kind="request_refused")
        assert [json.loads(r.detail_json)["field"] for r in refused if r.actor_id == alice.agent_id] == [
            "post_batch.ack.entries"
        ]
        await alice.close()
        await bob.close()


async def test_results_come_only_once_the_batch_is_committed(hub: RunningHub) -> None:
    alice, bob, cid = await conversation(hub.target)
    reader = make_store(hub.db)  # the same SQLite file or Redis keys, through a connection of its own
    await reader.open()
    try:
        futures = alice.send_batch([text(cid, f"m{i}") for i in range(30)])
        for fut in futures:
            result = await asyncio.wait_for(fut, 10)
            assert result.envelope.envelope_id in await stored_ids(reader, cid)  # stored when the result arrives
    finally:
        await reader.close()
    await alice.close()
    await bob.close()


@pytest.mark.sqlite_only("the write failure comes from a trigger added to the SQLite file")
async def test_a_failed_write_fails_every_post_of_its_batch_and_leaves_no_gap(hub: RunningHub) -> None:
    alice, bob, cid = await conversation(hub.target)
    before = await alice.say(cid, "before")
    con = sqlite3.connect(hub.db, timeout=10)
    try:
        con.execute(
            "CREATE TRIGGER boom BEFORE INSERT ON wal WHEN NEW.text = 'boom' BEGIN SELECT RAISE(ABORT, 'boom'); END"
        )
        con.commit()
    finally:
        con.close()
    results = await alice.post_batch([text(cid, "x"), text(cid, "boom"), text(cid, "y")])
    assert [refusal(r) for r in results] == ["UNAVAILABLE"] * 3  # one bundle: nothing of it was written
    after = await alice.say(cid, "after")  # the channel was rebuilt from the store: no seq gap
    assert after.seq == before.seq + 1
    await alice.close()
    await bob.close()


async def test_with_an_arbiter_each_post_of_a_batch_is_asked_on_its_own(tmp_path: Path) -> None:
    desk = Desk()
    async with running_hub(tmp_path / "hub.db", arbiter=desk) as hub:
        alice, bob, cid = await conversation(hub.target)
        batch = [text(cid, "a"), make_envelope(cid, "secret.plan", {}), text(cid, "b")]
        results = await alice.post_batch(batch)
        assert [refusal(r) for r in results] == ["", "RULE_DENIED", ""]
        assert [d.event_type for d in desk.seen if d.action == "post"][-3:] == [EV_TEXT, "secret.plan", EV_TEXT]
        assert results[2].envelope.seq == results[0].envelope.seq + 1
        await alice.close()
        await bob.close()


async def test_retries_past_the_window_of_recent_keys_are_answered_from_the_store(
    conv: tuple[Participant, Participant, str],
) -> None:
    """Once a channel's window of recent keys (4096) has forgotten some, a batch asks the store for its keys
    in one lookup: a retry of a forgotten key, one the window still holds and a fresh one are each exact."""
    alice, bob, cid = conv
    originals: list[connect_pb2.PostResult] = []
    for start in range(0, 4200, 256):
        originals += await alice.post_batch(
            [text(cid, f"m{i}", idempotency_key=f"k{i}") for i in range(start, min(start + 256, 4200))]
        )
    assert [refusal(r) for r in originals] == [""] * 4200
    old, recent, fresh, fresh_again = await alice.post_batch(
        [
            text(cid, "m0", idempotency_key="k0"),  # forgotten by the window: the store answers
            text(cid, "m4199", idempotency_key="k4199"),  # still in the window
            text(cid, "new", idempotency_key="fresh"),
            text(cid, "new", idempotency_key="fresh"),  # the same new key twice in one batch
        ]
    )
    assert old.duplicate and old.envelope.envelope_id == originals[0].envelope.envelope_id
    assert recent.duplicate and recent.envelope.envelope_id == originals[-1].envelope.envelope_id
    assert not fresh.duplicate and fresh.envelope.seq == originals[-1].envelope.seq + 1
    assert fresh_again.duplicate and fresh_again.envelope.envelope_id == fresh.envelope.envelope_id
    got = await bob.until(fresh.envelope.envelope_id)
    assert [data_of(e)["text"] for e in got if e.event_type == EV_TEXT][-2:] == ["m4199", "new"]


async def test_after_a_restart_the_keys_the_window_forgot_are_still_found(tmp_path: Path) -> None:
    """Hydrate folds every stored key through the channel's window, so its filter of forgotten keys
    holds them again: a single post retrying the oldest key is its duplicate, a fresh key is new."""
    db = tmp_path / "hub.db"
    async with running_hub(db) as hub:
        alice, bob, cid = await conversation(hub.target)
        originals: list[connect_pb2.PostResult] = []
        for start in range(0, 4200, 256):
            originals += await alice.post_batch(
                [text(cid, f"m{i}", idempotency_key=f"k{i}") for i in range(start, min(start + 256, 4200))]
            )
        await alice.close()
        await bob.close()
    async with running_hub(db) as hub:
        live = hub.holder(cid).core.channels.get(cid)
        assert live is not None and live.idempotent.evicted and live.idempotent.forgotten.nbytes > 0
        alice = Participant(hub.target, alice.record, alice.credential)
        await alice.connect()
        again = await alice.say(cid, "m0", idempotency_key="k0")
        assert again.envelope_id == originals[0].envelope.envelope_id and again.seq == originals[0].envelope.seq
        fresh = await alice.say(cid, "new", idempotency_key="fresh")
        assert fresh.seq == originals[-1].envelope.seq + 1
        await alice.close()


async def test_the_store_finds_many_idempotency_keys_at_once(tmp_path: Path) -> None:
    async with running_hub(tmp_path / "hub.db") as hub:
        alice, _bob, cid = await conversation(hub.target)
        written = await alice.post_batch([text(cid, f"m{i}", idempotency_key=f"k{i}") for i in range(3)])
        store = hub.core.store
        found = await store.find_idempotent_many(cid, alice.agent_id, ["k0", "k2", "nope"])
        assert {k: envelope_pb2.Envelope.FromString(v).envelope_id for k, v in found.items()} == {
            "k0": written[0].envelope.envelope_id,
            "k2": written[2].envelope.envelope_id,
        }
        assert await store.find_idempotent_many(cid, "someone-else", ["k0"]) == {}
        await alice.close()
