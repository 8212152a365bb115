"""Images sent to the model as OpenAI image content parts, and streamed completions, through the
real openai client against the local OpenAI-compatible test server (the request it received)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from agentsdk import Agent, OpenAIConfig
from agentsdk.config import events_to_messages
from agentsdk.events import (
    ImageInput,
    ModelMessage,
    ModelMessageChunk,
    ModelRequest,
    TextInput,
    ToolCall,
    event_from_dict,
)
from agentsdk.stream import Stream
from agentsdk.testing import ScriptedOpenAIServer, text_pieces

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(32))


async def test_ask_sends_images_as_image_url_parts(server: ScriptedOpenAIServer, config: OpenAIConfig) -> None:
    server.add("A cat and a chart.")
    agent = Agent("seer", config=config)
    reply = await agent.ask(
        [
            TextInput("What is in these?"),
            ImageInput("https://example.com/cat.png", detail="low"),
            ImageInput(data=PNG, media_type="image/png"),
        ]
    )
    assert reply.body == "A cat and a chart."
    user = server.requests[0]["messages"][-1]
    assert user == {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is in these?"},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png", "detail": "low"}},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()}},
        ],
    }


def test_text_only_requests_keep_plain_string_content() -> None:
    messages = events_to_messages([], [ModelRequest([TextInput("a"), TextInput("b")])])
    assert messages == [{"role": "user", "content": "a\nb"}]


def test_image_events_round_trip_through_json(tmp_path: Path) -> None:
    path = tmp_path / "dot.png"
    path.write_bytes(PNG)
    image = ImageInput.from_path(path)
    assert (image.media_type, image.data) == ("image/png", PNG)
    request = ModelRequest([TextInput("look"), image, ImageInput("https://example.com/x.gif")])
    back = event_from_dict(request.to_dict())
    assert isinstance(back, ModelRequest) and back.parts == request.parts
    assert Stream.from_jsonl(Stream(events=[request]).to_jsonl()).events[0] == request
    with pytest.raises(ValueError, match="media_type"):
        ImageInput.from_path(tmp_path / "notes.unknownext")


def test_image_event_data_round_trip() -> None:
    image = ImageInput(data=PNG, media_type="image/png", detail="high")
    item = image.to_event_data()
    assert item == {"data": base64.b64encode(PNG).decode(), "media_type": "image/png", "detail": "high"}
    back = ImageInput.from_event_data(item)
    assert (back.url, back.data, back.media_type, back.detail) == ("", PNG, "image/png", "high")
    assert ImageInput("https://e.x/a.png").to_event_data() == {"url": "https://e.x/a.png"}


async def test_streaming_model_publishes_chunks_and_returns_the_whole_message(server: ScriptedOpenAIServer) -> None:
    text = "Streaming is working, piece by piece."
    server.add(ToolCall.create("lookup", {"q": "x"}), text)
    config = OpenAIConfig(
        model="gpt-test", base_url=server.base_url, api_key="test", max_retries=0, timeout=10, streaming=True
    )

    def lookup(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    agent = Agent("streamer", config=config, tools=[lookup])
    observed: list[ModelMessageChunk] = []
    handed: list[ModelMessageChunk] = []
    agent.subscribe(lambda e: observed.append(e) if isinstance(e, ModelMessageChunk) else None)

    async def on_chunk(chunk: ModelMessageChunk) -> None:
        handed.append(chunk)

    reply = await agent.ask("go", on_chunk=on_chunk)
    await config.aclose()

    assert reply.body == text
    assert [r.content for r in reply.tool_results] == ["found x"]  # tool call pieces joined by index
    assert [c.content for c in handed] == text_pieces(text) and len(handed) > 3
    assert {c.call for c in handed} == {1}  # the second model call of the turn (after the tool round)
    assert [c.id for c in observed] == [c.id for c in handed]
    assert not any(isinstance(e, ModelMessageChunk) for e in reply.stream.events)  # transient
    final = reply.events[-1]
    assert isinstance(final, ModelMessage) and final.usage is not None and final.usage.total_tokens > 0
    for request in server.requests:
        assert request["stream"] is True and request["stream_options"] == {"include_usage": True}


def test_images_in_token_estimates_and_summary_transcripts() -> None:
    from agentsdk.aggregate import render_transcript
    from agentsdk.policies import IMAGE_CHARS, event_chars

    request = ModelRequest(
        [TextInput("look"), ImageInput("https://e.x/a.png"), ImageInput(data=PNG, media_type="image/png")]
    )
    assert event_chars(request) == 4 + 2 * IMAGE_CHARS
    transcript = render_transcript([request])
    assert transcript.splitlines() == [
        "User: look",
        "User: [image https://e.x/a.png]",
        f"User: [image: image/png, {len(PNG)} bytes]",
    ]
