"""The delivery stream's own bookkeeping, without a hub: cursors move along the hub's prev_seq
chains (in order, and when an envelope overtook older ones), and the window of envelope ids that
hands each envelope to the dispatcher once (with its wire size) keeps the newest ids and forgets the oldest;
untraced turns still make the trace context each envelope carries current for its handler."""

from __future__ import annotations

import pytest
from agentnet.v1 import connect_pb2, envelope_pb2
from opentelemetry import trace

from agentsdk.network import _delivery
from agentsdk.network._cursors import CursorBook
from agentsdk.network._delivery import DeliveryStream
from agentsdk.transport import HubConnection
from tests.eventually import assert_eventually


class MemoryStore:
    def __init__(self) -> None:
        self.saved: list[dict[str, int]] = []

    def load(self) -> dict[str, int]:
        return {"c": 2}

    def save(self, cursors: dict[str, int]) -> None:
        self.saved.append(dict(cursors))


def test_a_cursor_moves_along_its_chain_in_order_and_after_an_overtaking_envelope() -> None:
    store = MemoryStore()
    book = CursorBook(store)
    assert book.processed("c", 2, 3) and book.cursor("c") == 3  # the next of the chain
    assert not book.processed("c", 1, 2)  # at or below the cursor: nothing moves, nothing saved
    assert not book.processed("c", 5, 7)  # an urgent one overtook 4 and 5: the cursor waits for them
    assert book.cursor("c") == 3
    assert book.processed("c", 3, 5) and book.cursor("c") == 7  # 5 closes the gap: up to 7 at once
    assert book.processed("c", 7, 8) and book.cursor("c") == 8
    assert book.processed("d", 0, 4) and book.cursor("d") == 4  # another channel, its own chain
    assert store.saved == [{"c": 3}, {"c": 7}, {"c": 8}, {"c": 8, "d": 4}]  # saved on every move only


def delivery(envelope_id: str, seq: int) -> connect_pb2.Delivery:
    envelope = envelope_pb2.Envelope(channel_id="c", envelope_id=envelope_id, seq=seq, event_type="ag2.msg.text")
    return connect_pb2.Delivery(envelope=envelope, prev_seq=seq - 1)


async def test_the_stream_hands_an_envelope_over_once_within_its_window_of_newest_ids(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_delivery, "SEEN_IDS", 3)
    handed: list[str] = []

    def dispatch(env: envelope_pb2.Envelope, size: int) -> None:
        assert size == env.ByteSize()  # the envelope's wire size, measured once by the stream
        handed.append(env.envelope_id)

    conn = HubConnection("127.0.0.1:1")
    stream = DeliveryStream(conn, "credential", dispatch)
    try:
        for seq, envelope_id in enumerate(["a", "b", "a", "c", "d", "b", "e", "a"], start=1):
            stream._route(delivery(envelope_id, seq))
        # "a" again while remembered: dropped; "b" again after "c" and "d" came: still remembered;
        # "a" after "b", "c", "d" and "e" pushed it out of the window of 3: handed over again.
        await assert_eventually(lambda: len(handed) == 6)
        assert handed == ["a", "b", "c", "d", "e", "a"]
        assert list(stream._seen) == ["d", "e", "a"]
    finally:
        await stream.stop()
        await conn.close()


async def test_each_envelope_of_a_run_of_untraced_turns_carries_its_own_trace_context_to_the_handler() -> None:
    """Without tracing, whether a turn needs a span is asked once per run of turns the stream handles
    without waiting; an envelope that carries a trace context still gets it current in its handler,
    and the turns after it do not."""
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    seen: list[str] = []

    def dispatch(env: envelope_pb2.Envelope, size: int) -> None:
        context = trace.get_current_span().get_span_context()
        seen.append(f"{context.trace_id:032x}" if context.is_valid else "")

    conn = HubConnection("127.0.0.1:1")
    stream = DeliveryStream(conn, "credential", dispatch)
    try:
        assert not conn.tracing
        traced = delivery("b", 2)
        traced.envelope.trace_id = traceparent
        for d in (delivery("a", 1), traced, delivery("c", 3)):
            stream._route(d)  # one batch: handled in one run
        await assert_eventually(lambda: len(seen) == 3)
        assert seen == ["", "0af7651916cd43dd8448eb211c80319c", ""]
    finally:
        await stream.stop()
        await conn.close()
