"""Hydrate reads a run of stored WAL records as columns (:class:`hubsvc.core.stored_run.StoredRun`):
for any WAL, split into runs anywhere, every adapter's batch fold, the channel's fold and the inbox
count give exactly what folding each envelope in turn gives (hypothesis properties).

The WALs are the adapter properties' random channels, read back from their stored bytes, with
random depths, idempotency keys (an empty one too), audiences (an empty one too) and, in some,
records without a sender or an event type, whose runs are read record by record."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from agentnet.v1 import envelope_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hubsvc.adapters import ADAPTERS
from hubsvc.core.channel import ChannelRuntime
from hubsvc.core.stored_run import StoredRun
from hubsvc.governance.inbox import Inboxes
from netkernel.envelope import SUBSTANTIVE_EVENT_TYPES
from netkernel.wire import envelope_from_wire, envelope_to_wire
from tests.hubsvc.test_adapter_properties import NOW, runs

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

KINDS = st.sampled_from([("consulting", 2), ("conversation", 2), ("discussion", 5), ("workflow", 5)])


@st.composite
def stored_wals(draw: st.DrawFn) -> tuple[Any, list[bytes]]:
    """(spec, the stored records of one random channel's WAL, seq 1, 2, …)."""
    type_, max_n = draw(KINDS)
    run = draw(runs(type_, 2, max_n))
    spec = run.spec
    if draw(st.booleans()):  # an expectation: the channel keeps a track, which reads every envelope
        spec = replace(spec, knobs={**spec.knobs, "expectations": {"max_silence": {"seconds": 60, "action": "audit"}}})
    broken = draw(st.booleans())  # some records lack a field the columns read
    records = []
    for i, env in enumerate(run.wal):
        wire = envelope_to_wire(env)
        wire.seq, wire.envelope_id = i + 1, f"e{i}"
        wire.depth = draw(st.sampled_from([0, 0, 1, 3]))
        if draw(st.integers(0, 3)) == 0:
            wire.idempotency_key = draw(st.sampled_from(["", "k1", "k2"]))
        if draw(st.integers(0, 3)) == 0:
            wire.audience.SetInParent()
            wire.audience.agent_ids.extend(draw(st.lists(st.sampled_from(spec.participants), unique=True)))
        if broken and draw(st.integers(0, 5)) == 0:
            # No sender only where no fold reads one (a workflow routes on a substantive envelope's sender).
            substantive = wire.event_type in SUBSTANTIVE_EVENT_TYPES
            wire.ClearField("event_type" if substantive or draw(st.booleans()) else "sender_id")
        records.append(wire.SerializeToString())
    return spec, records


def split(records: list[bytes], cuts: list[int]) -> list[list[bytes]]:
    """``records`` cut at ``cuts`` (empty runs included)."""
    bounds = sorted(min(c, len(records)) for c in cuts)
    return [records[low:high] for low, high in zip([0, *bounds], [*bounds, len(records)], strict=True)]


def wires(records: list[bytes]) -> list[envelope_pb2.Envelope]:
    return [envelope_pb2.Envelope.FromString(r) for r in records]


@SETTINGS
@given(stored_wals(), st.lists(st.integers(0, 40), max_size=4))
def test_a_stored_run_holds_each_records_fields(wal: tuple[Any, list[bytes]], cuts: list[int]) -> None:
    """The columns are the records' fields, whether read from the laid-out records or record by record."""
    _, records = wal
    for part in split(records, cuts):
        run, messages = StoredRun(part), wires(part)
        assert run.event_types == [w.event_type for w in messages]
        assert run.seqs == [w.seq for w in messages]
        assert run.senders == [w.sender_id for w in messages]
        assert run.deep == any(w.depth for w in messages)
        assert run.keyed() == [w for w in messages if w.HasField("idempotency_key")]
        audiences = {i: list(w.audience.agent_ids) for i, w in enumerate(messages) if w.HasField("audience")}
        assert {i: list(a) for i, a in run.audiences().items()} == audiences
        assert run.wires == messages
        assert list(run) == [envelope_from_wire(w) for w in messages]


@SETTINGS
@given(stored_wals(), st.lists(st.integers(0, 40), max_size=4))
def test_every_adapters_batch_fold_of_stored_runs_is_its_fold_of_each(
    wal: tuple[Any, list[bytes]], cuts: list[int]
) -> None:
    """fold_run of StoredRuns (it reads their event types, or their envelopes) equals fold of each in turn."""
    spec, records = wal
    adapter = ADAPTERS[spec.type]
    each = adapter.initial_state(spec)
    for wire in wires(records):
        each = adapter.fold(spec, each, envelope_from_wire(wire))
    state = adapter.initial_state(spec)
    for part in split(records, cuts):
        before = copy.deepcopy(state)
        new_state = adapter.fold_run(spec, state, StoredRun(part))
        assert state == before, "fold_run mutated its input state"
        state = new_state
    assert state == each


def runtime(spec: Any) -> ChannelRuntime:
    return ChannelRuntime.pending(spec, ADAPTERS[spec.type], intent="", invite_ack_timeout=30.0, ttl=None, now=NOW)


@SETTINGS
@given(stored_wals(), st.lists(st.integers(0, 40), max_size=4))
def test_a_channel_folded_from_stored_runs_is_the_channel_folded_envelope_by_envelope(
    wal: tuple[Any, list[bytes]], cuts: list[int]
) -> None:
    """ChannelRuntime.fold_stored and Inboxes.staged_columns over StoredRuns (hydrate) give the channel
    and the inbox counts that fold and staged of each envelope give."""
    spec, records = wal
    each, in_runs = runtime(spec), runtime(spec)
    counted_each, counted_in_runs = Inboxes(lambda _: None, str), Inboxes(lambda _: None, str)
    for wire in wires(records):
        each.fold(envelope_from_wire(wire), NOW)
        counted_each.staged(spec.channel_id, spec.participants, wire)
    for part in split(records, cuts):
        run = StoredRun(part)
        in_runs.fold_stored(run, NOW)
        counted_in_runs.staged_columns(
            spec.channel_id, spec.participants, run.seqs, run.senders, run.event_types, run.audiences()
        )
    assert in_runs.state == each.state
    assert in_runs.meta == each.meta
    assert in_runs.last_seq == each.last_seq
    assert in_runs.last_turn == each.last_turn
    assert in_runs.track == each.track
    assert list(in_runs.depths.items()) == list(each.depths.items())
    assert list(in_runs.idempotent.items()) == list(each.idempotent.items())
    assert [counted_in_runs.pending(p) for p in spec.participants] == [
        counted_each.pending(p) for p in spec.participants
    ]
