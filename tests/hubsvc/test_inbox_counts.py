"""Inboxes.staged_run (hydrate counts a channel's WAL a run at a time) counts as staged does, envelope
by envelope, and both count what a recipient has not answered (docs/governance.md "Inbox caps")."""

from __future__ import annotations

from agentnet.v1 import envelope_pb2
from hypothesis import given, settings
from hypothesis import strategies as st

from hubsvc.governance.inbox import Inboxes

PEOPLE = ("a1", "a2", "a3")
CHANNELS = ("c1", "c2")
EVENT_TYPES = ("ag2.msg.text", "ag2.packet", "myapp.note", "ag2.channel.invite_ack", "ag2.context.set")
COUNTED = {"ag2.msg.text", "ag2.packet", "myapp.note"}
ANSWERS = {"ag2.msg.text", "ag2.packet"}


def inboxes() -> Inboxes:
    return Inboxes(lambda agent_id: None, lambda agent_id: agent_id)


@st.composite
def wals(draw: st.DrawFn) -> list[envelope_pb2.Envelope]:
    """One channel's WAL (seq 1, 2, …): broadcast or addressed envelopes of several kinds from the hub or a
    participant."""
    wal = []
    for seq in range(1, draw(st.integers(0, 30)) + 1):
        msg = envelope_pb2.Envelope(
            channel_id="c",
            sender_id=draw(st.sampled_from(("hub", *PEOPLE))),
            seq=seq,
            event_type=draw(st.sampled_from(EVENT_TYPES)),
        )
        if draw(st.booleans()):
            msg.audience.agent_ids.extend(draw(st.lists(st.sampled_from(PEOPLE), unique=True)))
        wal.append(msg)
    return wal


def unanswered(wal: list[envelope_pb2.Envelope], agent_id: str) -> int:
    """The rule itself: counted envelopes visible to ``agent_id``, not its own, after its last answer."""
    answered = max((w.seq for w in wal if w.sender_id == agent_id and w.event_type in ANSWERS), default=0)
    return sum(
        1
        for w in wal
        if w.seq > answered
        and w.sender_id != agent_id
        and w.event_type in COUNTED
        and (not w.HasField("audience") or agent_id in w.audience.agent_ids)
    )


@settings(max_examples=200, deadline=None)
@given(
    st.fixed_dictionaries({c: wals() for c in CHANNELS}),
    st.lists(st.integers(0, 30), max_size=4),
)
def test_counting_a_run_at_once_counts_as_each_in_turn(
    wal: dict[str, list[envelope_pb2.Envelope]], cuts: list[int]
) -> None:
    each, in_runs = inboxes(), inboxes()
    for channel_id, wires in wal.items():
        for wire in wires:
            each.staged(channel_id, PEOPLE, wire)
        bounds = sorted(c for c in cuts if c <= len(wires))
        for low, high in zip([0, *bounds], [*bounds, len(wires)], strict=True):
            in_runs.staged_run(channel_id, PEOPLE, wires[low:high])
    expected = [sum(unanswered(wires, p) for wires in wal.values()) for p in PEOPLE]
    assert [each.pending(p) for p in PEOPLE] == expected
    assert [in_runs.pending(p) for p in PEOPLE] == expected
    for channel_id in CHANNELS:
        each.release(channel_id)
        in_runs.release(channel_id)
        assert [each.pending(p) for p in PEOPLE] == [in_runs.pending(p) for p in PEOPLE]
    assert [each.pending(p) for p in PEOPLE] == [0, 0, 0]
