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
