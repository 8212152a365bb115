"""Inboxes.staged_run (hydrate counts a channel's WAL a run at a time) counts as staged does, envelope by envelope."""

from __future__ import annotations

from agentnet.v1 import envelope_pb2
from hypothesis import given, settings
from hypothesis import strategies as st

from hubsvc.governance.inbox import Inboxes

PEOPLE = ("a1", "a2", "a3")
CHANNELS = ("c1", "c2")


def inboxes() -> Inboxes:
    return Inboxes(lambda agent_id: None, lambda agent_id: agent_id)


@st.composite
def wals(draw: st.DrawFn) -> list[envelope_pb2.Envelope]:
    """One channel's WAL (seq 1, 2, …): broadcast or addressed envelopes from the hub or a participant."""
    wal = []
    for seq in range(1, draw(st.integers(0, 30)) + 1):
        msg = envelope_pb2.Envelope(channel_id="c", sender_id=draw(st.sampled_from(("hub", *PEOPLE))), seq=seq)
        if draw(st.booleans()):
            msg.audience.agent_ids.extend(draw(st.lists(st.sampled_from(PEOPLE), unique=True)))
        wal.append(msg)
    return wal


@settings(max_examples=200, deadline=None)
@given(
    st.fixed_dictionaries({c: wals() for c in CHANNELS}),
    st.dictionaries(st.tuples(st.sampled_from(PEOPLE), st.sampled_from(CHANNELS)), st.integers(0, 30)),
    st.lists(st.integers(0, 30), max_size=4),
    st.lists(st.tuples(st.sampled_from(PEOPLE), st.sampled_from(CHANNELS), st.integers(0, 35)), max_size=8),
)
def test_counting_a_run_at_once_counts_as_each_in_turn(
    wal: dict[str, list[envelope_pb2.Envelope]],
    floors: dict[tuple[str, str], int],
    cuts: list[int],
    moves: list[tuple[str, str, int]],
) -> None:
    each, in_runs = inboxes(), inboxes()
    for box in (each, in_runs):
        for (agent_id, channel_id), cursor in floors.items():
            box.load_floor(agent_id, channel_id, cursor)
    for channel_id, wires in wal.items():
        for wire in wires:
            each.staged(channel_id, PEOPLE, wire)
        bounds = sorted(c for c in cuts if c <= len(wires))
        for low, high in zip([0, *bounds], [*bounds, len(wires)], strict=True):
            in_runs.staged_run(channel_id, PEOPLE, wires[low:high])
    assert [each.pending(p) for p in PEOPLE] == [in_runs.pending(p) for p in PEOPLE]
    # The counted seqs match too: the same cursor moves uncount the same envelopes.
    for agent_id, channel_id, cursor in moves:
        each.cursor(agent_id, channel_id, cursor)
        in_runs.cursor(agent_id, channel_id, cursor)
        assert [each.pending(p) for p in PEOPLE] == [in_runs.pending(p) for p in PEOPLE]
    for channel_id in CHANNELS:
        each.release(channel_id)
        in_runs.release(channel_id)
        assert [each.pending(p) for p in PEOPLE] == [in_runs.pending(p) for p in PEOPLE]
