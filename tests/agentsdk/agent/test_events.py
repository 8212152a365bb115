"""Events serialise to JSON dicts and back; a Stream round-trips through JSONL."""

from __future__ import annotations

import json

import pytest

from agentsdk.events import (
    AggregationCompleted,
    AggregationFailed,
    AggregationStarted,
    BaseEvent,
    CompactionCompleted,
    CompactionFailed,
    CompactionStarted,
    CompactionSummary,
    EventLogFailed,
    HaltEvent,
    ModelMessage,
    ModelRequest,
    ObserverAlert,
    SystemPrompt,
    TextInput,
    ToolCall,
    ToolCallEvent,
    ToolResultEvent,
    Usage,
    describe_error,
    event_from_dict,
)
from agentsdk.stream import Stream

ALL_EVENTS: list[BaseEvent] = [
    SystemPrompt("be brief"),
    TextInput("hello"),
    ModelRequest([TextInput("a"), ToolResultEvent("call_1", "add", "3", is_error=False)]),
    ModelMessage(
        "sure",
        tool_calls=[ToolCall("call_1", "add", {"a": 1, "nested": {"type": "Usage", "x": [1]}})],
        usage=Usage(10, 5, 15),
        model="m",
        finish_reason="tool_calls",
    ),
    ModelMessage(tool_calls=[ToolCall("call_2", "f", {}, raw_arguments="{oops")]),
    ToolCallEvent("call_1", "add", {"type": "TextInput", "text": "not an event"}),
    ToolResultEvent("call_1", "add", "boom", is_error=True),
    CompactionSummary("they talked", events_dropped=12),
    CompactionStarted(events_before=40),
    CompactionCompleted(40, 10, usage=Usage(1, 2, 3)),
    CompactionFailed("RuntimeError: x"),
    AggregationStarted("working_memory"),
    AggregationCompleted("working_memory", usage=None),
    AggregationFailed("ValueError: y"),
    EventLogFailed("OSError: disk full"),
    HaltEvent("fatal alert"),
    ObserverAlert("fatal", "loop detected", source="watchdog"),
]


@pytest.mark.parametrize("event", ALL_EVENTS, ids=lambda e: e.event_type)
def test_every_event_round_trips_through_json(event: BaseEvent) -> None:
    data = event.to_dict()
    assert data["type"] == type(event).__name__
    assert data["id"] == event.id and data["created_at"].endswith("Z")
    again = event_from_dict(json.loads(json.dumps(data)))
    assert again == event
    assert type(again) is type(event)


def test_free_form_arguments_are_not_decoded_as_records() -> None:
    event = ToolCallEvent("c", "t", {"type": "TextInput", "text": "x"})
    again = event_from_dict(event.to_dict())
    assert isinstance(again, ToolCallEvent)
    assert again.arguments == {"type": "TextInput", "text": "x"}


def test_ids_are_unique_and_keyword_only() -> None:
    a, b = TextInput("x"), TextInput("x")
    assert a.id != b.id
    assert TextInput("x", id="fixed").id == "fixed"


def test_unknown_event_type_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown event type 'Nope'"):
        event_from_dict({"type": "Nope"})
    with pytest.raises(ValueError, match="unknown event type 'Usage'"):
        event_from_dict({"type": "Usage"})  # a record, not an event


def test_stream_jsonl_round_trip() -> None:
    stream = Stream(events=list(ALL_EVENTS))
    text = stream.to_jsonl()
    assert text.count("\n") == len(ALL_EVENTS)
    again = Stream.from_jsonl(text + "\n", stream_id=stream.stream_id)
    assert again == stream
    assert list(again) == ALL_EVENTS and len(again) == len(ALL_EVENTS)


def test_stream_jsonl_bad_line_names_the_line() -> None:
    good = TextInput("ok").to_dict()
    with pytest.raises(ValueError, match="line 2"):
        Stream.from_jsonl(json.dumps(good) + "\n" + '{"type": "Mystery"}\n')
    with pytest.raises(ValueError, match="line 1"):
        Stream.from_jsonl("[1, 2]\n")


def test_stream_append_extend_and_fresh_ids() -> None:
    s1, s2 = Stream(), Stream()
    assert s1.stream_id != s2.stream_id
    s1.append(TextInput("a"))
    s1.extend([TextInput("b"), TextInput("c")])
    assert [e.text for e in s1 if isinstance(e, TextInput)] == ["a", "b", "c"]
    assert s2.events == []


def test_model_request_text_and_usage_sum_and_describe_error() -> None:
    assert ModelRequest([TextInput("a"), TextInput("b")]).text == "a\nb"
    assert Usage(1, 2, 3) + Usage(10, 20, 30) == Usage(11, 22, 33)
    assert describe_error(ValueError("bad")) == "ValueError: bad"
    assert describe_error(KeyError()) == "KeyError"
