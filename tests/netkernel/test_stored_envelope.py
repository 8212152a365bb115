"""envelope_from_wal: an envelope of the hub's WAL whose event_data is parsed only when read,
and wire_recipients: who an envelope goes to, read from the wire form once."""

from __future__ import annotations

import dataclasses

import pytest
from agentnet.v1 import envelope_pb2
from hypothesis import given
from hypothesis import strategies as st

from netkernel.envelope import EV_TEXT, Envelope
from netkernel.errors import InvalidArgument
from netkernel.wire import envelope_from_wal, envelope_from_wire, wire_recipients, wire_visible_to


def wire(event_data_json: str, **fields: object) -> envelope_pb2.Envelope:
    """A stamped wire envelope carrying ``event_data_json``."""
    return envelope_pb2.Envelope(
        channel_id="c1",
        sender_id="a1",
        event_type=EV_TEXT,
        event_data_json=event_data_json,
        envelope_id="e1",
        created_at="2024-01-01T00:00:00Z",
        seq=7,
        priority=envelope_pb2.PRIORITY_NORMAL,
        **fields,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    "text",
    ['{"text":"hi"}', "", "{}", '{"n":18446744073709551617,"f":1.5,"deep":[[{"x":null}]]}', '{"t":"\\u00e9"}'],
)
def test_a_stored_envelope_equals_the_eagerly_parsed_one(text: str) -> None:
    msg = wire(text, task_id="t", idempotency_key="k", depth=2)
    lazy, eager = envelope_from_wal(msg), envelope_from_wire(msg)
    assert lazy == eager and eager == lazy
    assert lazy.event_data == eager.event_data
    assert type(lazy.event_data) is dict
    assert lazy.event_data is lazy.event_data  # parsed once, then the same object for every reader
    assert dataclasses.astuple(lazy) == dataclasses.astuple(eager)
    assert repr(lazy).removeprefix("Stored") == repr(eager)


def test_empty_event_data_is_a_fresh_dict_per_envelope() -> None:
    a, b = envelope_from_wal(wire("")), envelope_from_wal(wire(""))
    a.event_data["x"] = 1
    assert b.event_data == {}


def test_writing_event_data_replaces_the_stored_json() -> None:
    env = envelope_from_wal(wire('{"text":"stored"}'))
    env.event_data = {"text": "new"}
    assert env.event_data == {"text": "new"}
    copy = dataclasses.replace(env, seq=8)
    assert (copy.event_data, copy.seq) == ({"text": "new"}, 8)


def test_a_stored_envelope_differs_when_a_field_differs() -> None:
    lazy = envelope_from_wal(wire('{"text":"a"}'))
    assert lazy != envelope_from_wire(wire('{"text":"b"}'))
    assert lazy != dataclasses.replace(envelope_from_wire(wire('{"text":"a"}')), seq=1)
    assert lazy != "not an envelope"


@pytest.mark.parametrize("text", ["[1]", "not json"])
def test_bad_stored_json_fails_on_read_as_the_eager_parse_does(text: str) -> None:
    env = envelope_from_wal(wire(text))  # building it reads nothing
    with pytest.raises(InvalidArgument) as lazy_error:
        _ = env.event_data
    with pytest.raises(InvalidArgument) as eager_error:
        envelope_from_wire(wire(text))
    assert str(lazy_error.value) == str(eager_error.value)


def test_a_plain_envelope_is_unaffected() -> None:
    env = Envelope(channel_id="c", sender_id="s", audience=None, event_type=EV_TEXT, event_data={"text": "x"})
    assert env.event_data == {"text": "x"}
    assert type(envelope_from_wire(wire("{}"))) is Envelope


PEOPLE = ("a1", "a2", "a3", "a4")


@given(st.lists(st.sampled_from(PEOPLE), unique=True), st.booleans(), st.sampled_from(PEOPLE))
def test_recipients_are_the_participants_that_see_it_except_the_sender(
    audience: list[str], broadcast: bool, sender: str
) -> None:
    msg = wire("{}")
    msg.sender_id = sender
    if not broadcast:
        msg.audience.agent_ids.extend(audience)
    expected = [p for p in PEOPLE if p != sender and wire_visible_to(msg, p)]
    assert wire_recipients(msg, PEOPLE) == expected


FIELDS = tuple(f.name for f in dataclasses.fields(Envelope))
optional_text = st.one_of(st.none(), st.sampled_from(["", "x", "é"]))


@st.composite
def wires(draw: st.DrawFn) -> envelope_pb2.Envelope:
    """A stamped wire envelope with any of its optional fields set (an empty string is set too)."""
    msg = wire(draw(st.sampled_from(["", "{}", '{"text":"hi"}', '{"n":[1,{"m":2.5}]}'])))
    msg.depth = draw(st.integers(0, 3))
    msg.priority = draw(st.sampled_from(list(envelope_pb2.Priority.values())))
    for name in ("task_id", "causation_id", "trace_id", "idempotency_key"):
        value = draw(optional_text)
        if value is not None:
            setattr(msg, name, value)
    if draw(st.booleans()):
        msg.ttl_seconds = draw(st.integers(0, 5))
    if draw(st.booleans()):
        msg.audience.agent_ids.extend(draw(st.lists(st.sampled_from(PEOPLE), unique=True)))
    return msg


@given(wires(), st.permutations(FIELDS), st.integers(0, len(FIELDS)))
def test_every_field_read_in_any_order_is_the_eager_one(msg: envelope_pb2.Envelope, order: list[str], n: int) -> None:
    """The view reads a field from the wire message until event_data or audience is read; either way each is exact."""
    lazy, eager = envelope_from_wal(msg), envelope_from_wire(msg)
    for name in order[:n]:
        assert getattr(lazy, name) == getattr(eager, name), name
    assert lazy == eager
    assert dataclasses.astuple(lazy) == dataclasses.astuple(eager)


@given(wires(), st.lists(st.sampled_from(FIELDS), max_size=3), st.sampled_from(FIELDS), st.permutations(FIELDS))
def test_writing_any_field_keeps_it_and_every_other(
    msg: envelope_pb2.Envelope, read_first: list[str], written: str, order: list[str]
) -> None:
    lazy, eager = envelope_from_wal(msg), envelope_from_wire(msg)
    for name in read_first:
        getattr(lazy, name)
    value: object = {"new": 1} if written == "event_data" else ["a9"] if written == "audience" else 99
    setattr(lazy, written, value)
    setattr(eager, written, value)
    for name in order:
        assert getattr(lazy, name) == getattr(eager, name), name
    assert msg == envelope_pb2.Envelope.FromString(msg.SerializeToString())  # the wire message is untouched
    assert lazy.seq == 99 if written == "seq" else msg.seq


def test_a_read_audience_is_kept_like_any_list() -> None:
    msg = wire("{}")
    msg.audience.agent_ids.extend(["a2"])
    env = envelope_from_wal(msg)
    assert env.audience is not None
    env.audience.append("a3")
    assert env.audience == ["a2", "a3"] and list(msg.audience.agent_ids) == ["a2"]


def test_replacing_a_field_of_an_unread_one_gives_a_plain_copy() -> None:
    env = envelope_from_wal(wire('{"text":"stored"}', task_id="t"))
    copy = dataclasses.replace(env, seq=8)
    assert copy == dataclasses.replace(envelope_from_wire(wire('{"text":"stored"}', task_id="t")), seq=8)
    assert env.seq == 7


def test_an_unknown_priority_fails_on_read_as_the_eager_conversion_does() -> None:
    msg = wire("{}")
    msg.priority = 42  # type: ignore[assignment]
    env = envelope_from_wal(msg)
    assert env.seq == 7
    with pytest.raises(InvalidArgument) as lazy_error:
        _ = env.priority
    with pytest.raises(InvalidArgument) as eager_error:
        envelope_from_wire(msg)
    assert str(lazy_error.value) == str(eager_error.value)
    assert env.event_data == {}
    with pytest.raises(InvalidArgument):
        _ = env.audience  # copying every field fails the same way, and changes nothing
    assert env.seq == 7
