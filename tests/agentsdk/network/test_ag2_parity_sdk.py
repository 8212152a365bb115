"""SDK features AG2's network has (ag2 1.2.1): images in envelopes and views, a streamed reply
(chunks to the channel, ``receive_chunk`` / ``on_chunk``), ``add_example``, the fallback skill's
description, the registered passport's kind and ``name_for(id, default=)``. A real hub, and
the real openai client against the local OpenAI-compatible test server."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from agentsdk import Agent, OpenAIConfig
from agentsdk.network import (
    EV_CHANNEL_CLOSED,
    EV_MSG_CHUNK,
    EV_TEXT,
    Envelope,
    Hub,
    HumanClient,
    ImageInput,
    NetworkClient,
    Passport,
    Resume,
    ResumeExample,
    parse_skill_frontmatter,
)
from agentsdk.testing import ScriptedOpenAIServer
from netkernel.errors import InvalidArgument
from netkernel.images import MAX_IMAGES_PER_ENVELOPE
from tests.agentsdk.network.llm import llm
from tests.eventually import assert_eventually

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
PNG_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()


def image_parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [p for p in content if p.get("type") == "image_url"] if isinstance(content, list) else []


async def reply_of(user: Any, channel_id: str) -> Envelope:
    return await user.next_envelope(  # type: ignore[no-any-return]
        predicate=lambda e: e.channel_id == channel_id and e.event_type == EV_TEXT and e.sender_id != user.agent_id,
        timeout=20,
    )


# -- images ---------------------------------------------------------------------------------


async def test_images_reach_the_model_as_image_parts_now_and_in_the_history(
    hub: Hub, servers: list[ScriptedOpenAIServer]
) -> None:
    server, config = llm(servers, "A cat.", "The chart shows growth.")
    await hub.register(Agent("seer", config=config), Passport(name="seer"))
    user = await hub.register_human(Passport(name="user", kind="human"))
    ch = await user.open(type="conversation", target="seer")

    first = await user.send(
        ch.channel_id, "What is this?", images=[ImageInput("https://example.com/cat.png", detail="low")]
    )
    assert first.event_data["images"] == [{"url": "https://example.com/cat.png", "detail": "low"}]
    await reply_of(user, ch.channel_id)
    now = server.requests[0]["messages"][-1]
    assert now["role"] == "user" and now["content"][0] == {"type": "text", "text": "What is this?"}
    assert image_parts(now) == [
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png", "detail": "low"}}
    ]

    await ch.send("", images=[{"data": base64.b64encode(PNG).decode(), "media_type": "image/png"}])  # Channel.send
    await assert_eventually(lambda: len(server.requests) == 2)
    second = server.requests[1]["messages"]
    history = [m for m in second if m["role"] == "user"]
    assert image_parts(history[0])[0]["image_url"]["url"] == "https://example.com/cat.png"  # the view kept it
    assert image_parts(history[-1]) == [{"type": "image_url", "image_url": {"url": PNG_URL}}]  # image-only turn


async def test_named_views_label_an_image_only_message(hub: Hub, servers: list[ScriptedOpenAIServer]) -> None:
    server, config = llm(servers, "noted", "noted too")
    await hub.register(Agent("a", config=config), Passport(name="a"))
    _, second_config = llm(servers, rule=lambda _: "ok")
    await hub.register(Agent("b", config=second_config), Passport(name="b"))
    user = await hub.register_human(Passport(name="user", kind="human"))
    ch = await user.open(type="discussion", target=["a", "b"], knobs={"max_rounds": 1})
    await user.send(ch.channel_id, "", images=[ImageInput("https://example.com/a.png")])
    await assert_eventually(lambda: len(server.requests) >= 1)
    last = server.requests[0]["messages"][-1]
    assert last["content"] == [
        {"type": "text", "text": "[user]:"},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
    ]


@pytest.mark.parametrize(
    ("images", "needle"),
    [
        ({"url": "https://e.x/a.png"}, "must be a list"),
        ([{"url": "ftp://e.x/a.png"}], "http(s) URL"),
        ([{"url": "https://e.x/a.png", "data": "AAAA", "media_type": "image/png"}], "exactly one of"),
        ([{"data": "AAAA"}], "needs a 'media_type'"),
        ([{"data": "not base64!", "media_type": "image/png"}], "not valid standard base64"),
        ([{"data": "AAAA", "media_type": "image/tiff"}], "media_type 'image/tiff'"),
        ([{"url": "https://e.x/a.png", "size": 3}], "unknown keys"),
        ([{"url": "https://e.x/a.png", "detail": "max"}], "detail 'max'"),
        ([{"url": f"https://e.x/{i}.png"} for i in range(MAX_IMAGES_PER_ENVELOPE + 1)], "at most"),
    ],
)
async def test_the_hub_refuses_malformed_images_and_stores_nothing(hub: Hub, images: Any, needle: str) -> None:
    user = await hub.register_human(Passport(name="user", kind="human"))
    other = await hub.register_human(Passport(name="other", kind="human"))
    ch = await user.open(type="conversation", target="other")
    bad = Envelope(ch.channel_id, "", None, EV_TEXT, {"text": "look", "images": images})
    with pytest.raises(InvalidArgument, match="images") as raised:
        await user.post_envelope(bad)
    assert needle in raised.value.message
    assert [e.event_type for e in await other.read_wal(ch.channel_id) if e.event_type == EV_TEXT] == []
    if isinstance(images, list):  # the SDK refuses the same before sending
        with pytest.raises(InvalidArgument, match="images"):
            await user.send(ch.channel_id, "look", images=images)


async def test_a_custom_event_type_may_carry_any_images_key(hub: Hub) -> None:
    user = await hub.register_human(Passport(name="user", kind="human"))
    await hub.register_human(Passport(name="other", kind="human"))
    ch = await user.open(type="conversation", target="other")
    posted = await user.post_envelope(Envelope(ch.channel_id, "", None, "myapp.gallery", {"images": "anything"}))
    assert posted.seq > 0


# -- streaming a reply ----------------------------------------------------------------------


async def test_a_streaming_agent_streams_its_reply_as_chunks_then_posts_it(
    hub: Hub, servers: list[ScriptedOpenAIServer]
) -> None:
    text = "Exposure is four percent — mostly in émerging markets."
    server = ScriptedOpenAIServer([text])
    server.start()
    servers.append(server)
    config = OpenAIConfig(model="m", base_url=server.base_url, api_key="test", streaming=True)
    analyst = await hub.register(Agent("analyst", config=config), Passport(name="analyst"))
    analyst.max_chunk_bytes = 8
    with pytest.raises(InvalidArgument, match="max_chunk_bytes"):
        analyst.max_chunk_bytes = 3
    user = await hub.register_human(Passport(name="user", kind="human"))
    seen: list[Envelope] = []

    async def on_chunk(env: Envelope) -> None:
        seen.append(env)

    user.on_chunk(on_chunk)
    user.pull = True  # keep pulling beside the callback
    ch = await user.open(type="consulting", target="analyst")
    question = await user.send(ch.channel_id, "What's our exposure?")
    reply = await reply_of(user, ch.channel_id)

    assert reply.text == text and reply.causation_id == question.envelope_id
    assert server.requests[0]["stream"] is True
    assert "".join(e.event_data["delta"] for e in seen) == text
    assert [e.event_data["index"] for e in seen] == list(range(len(seen)))
    assert all(len(e.event_data["delta"].encode()) <= 8 for e in seen) and len(seen) >= len(text.encode()) // 8
    assert all(e.causation_id == question.envelope_id and e.sender_id == analyst.agent_id for e in seen)
    assert max(e.seq for e in seen) < reply.seq  # every chunk before the reply
    # chunk envelopes are in the WAL but never in the pull queue or the envelope callbacks
    wal = await user.read_wal(ch.channel_id)
    assert [e.seq for e in wal if e.event_type == EV_MSG_CHUNK] == [e.seq for e in seen]
    rest = []
    while True:
        env = await user.next_envelope(predicate=lambda e: e.channel_id == ch.channel_id, timeout=10)
        rest.append(env.event_type)
        if env.event_type == EV_CHANNEL_CLOSED:
            break
    assert EV_MSG_CHUNK not in rest


class StreamingUi(HumanClient):
    """A human client showing replies as they stream, the way AG2 documents it: override receive_chunk."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.got: list[tuple[object, str, str]] = []

    async def receive_chunk(self, delta: object, *, channel_id: str, parent_envelope_id: str) -> None:
        self.got.append((delta, channel_id, parent_envelope_id))


async def test_a_human_client_subclass_receives_chunks(hub: Hub, servers: list[ScriptedOpenAIServer]) -> None:
    server = ScriptedOpenAIServer(["Hello there, human."])
    server.start()
    servers.append(server)
    config = OpenAIConfig(model="m", base_url=server.base_url, api_key="test", streaming=True)
    await hub.register(Agent("bot", config=config), Passport(name="bot"))
    ui = await hub.register_human(Passport(name="ui", kind="human"), client_class=StreamingUi)
    assert isinstance(ui, StreamingUi)
    ch = await ui.open(type="consulting", target="bot")
    question = await ui.send(ch.channel_id, "hi")
    await reply_of(ui, ch.channel_id)
    assert "".join(str(d) for d, _, _ in ui.got) == "Hello there, human."
    assert {(c, p) for _, c, p in ui.got} == {(ch.channel_id, question.envelope_id)}
    with pytest.raises(InvalidArgument, match="client_class"):
        await hub.register_human(Passport(name="x", kind="human"), client_class=NetworkClient)  # type: ignore[arg-type]


async def test_stream_chunks_false_posts_only_the_reply(hub: Hub, servers: list[ScriptedOpenAIServer]) -> None:
    server = ScriptedOpenAIServer(["one two three"])
    server.start()
    servers.append(server)
    config = OpenAIConfig(model="m", base_url=server.base_url, api_key="test", streaming=True)
    quiet = await hub.register(Agent("quiet", config=config), Passport(name="quiet"))
    quiet.stream_chunks = False
    user = await hub.register_human(Passport(name="user", kind="human"))
    ch = await user.open(type="consulting", target="quiet")
    await user.send(ch.channel_id, "go")
    assert (await reply_of(user, ch.channel_id)).text == "one two three"
    assert [e for e in await user.read_wal(ch.channel_id) if e.event_type == EV_MSG_CHUNK] == []


# -- skills, passports, names ---------------------------------------------------------------


async def describe(asker: Any, name: str) -> dict[str, Any]:
    return await asker.call_tool("peers", {"action": "describe", "name": name})  # type: ignore[no-any-return]


async def test_add_example_reaches_peers_through_the_fallback_skill(
    hub: Hub, servers: list[ScriptedOpenAIServer]
) -> None:
    _, config = llm(servers)
    analyst = await hub.register(Agent("analyst", config=config), Passport(name="analyst"), Resume(summary="Risk."))
    peer = await hub.register(Agent("peer", config=config), Passport(name="peer"))
    resume = await analyst.add_example(ResumeExample(title="Q3 exposure memo", outcome="completed", task_id="t1"))
    await analyst.add_example("FX hedge review")
    assert resume.examples == ["Q3 exposure memo — completed [task t1]"]
    described = await describe(peer, "analyst")
    assert described["resume"]["examples"] == ["Q3 exposure memo — completed [task t1]", "FX hedge review"]
    skill = parse_skill_frontmatter(described["skill_md"])
    assert skill.frontmatter["generated"] is True
    assert "## Examples\n\n- Q3 exposure memo — completed [task t1]\n- FX hedge review" in skill.body
    with pytest.raises(InvalidArgument, match="empty"):
        await analyst.add_example("   ")


async def test_add_example_extends_a_custom_skill(hub: Hub, servers: list[ScriptedOpenAIServer]) -> None:
    _, config = llm(servers)
    custom = "---\ntitle: Analyst\n---\n\n# Analyst\n\n## Examples\n\n- Old memo\n\n## Limits\n\nNo code.\n"
    analyst = await hub.register(Agent("analyst", config=config), Passport(name="analyst"), skill_md=custom)
    bare = await hub.register(Agent("bare", config=config), Passport(name="bare"), skill_md="# Bare\n")
    await analyst.add_example(ResumeExample(title="New memo", note="two pages"))
    await bare.add_example("First job")
    described = await describe(bare, "analyst")
    assert described["skill_md"] == (
        "---\ntitle: Analyst\n---\n\n# Analyst\n\n## Examples\n\n- Old memo\n- New memo (two pages)\n"
        "\n## Limits\n\nNo code.\n"
    )
    assert (await describe(analyst, "bare"))["skill_md"] == "# Bare\n\n## Examples\n\n- First job\n"


async def test_the_fallback_skill_frontmatter_has_a_description(hub: Hub, servers: list[ScriptedOpenAIServer]) -> None:
    _, config = llm(servers)
    a = await hub.register(Agent("a", config=config), Passport(name="a"), Resume(summary="Senior policy analyst."))
    await hub.register(Agent("b", config=config), Passport(name="b", description="Answers FX questions."))
    await hub.register(Agent("c", config=config), Passport(name="c"))
    fronts = {n: parse_skill_frontmatter((await describe(a, n))["skill_md"]).frontmatter for n in "abc"}
    assert fronts["a"]["description"] == "Senior policy analyst." and fronts["a"]["name"] == "a"
    assert fronts["b"]["description"] == "Answers FX questions."
    assert fronts["c"]["description"] == "Network-registered agent."


async def test_registered_clients_expose_their_passport_kind(hub: Hub, servers: list[ScriptedOpenAIServer]) -> None:
    _, config = llm(servers)
    agent = await hub.register(Agent("a", config=config), Passport(name="a"))
    human = await hub.register_human(Passport(name="h"))
    assert (agent.passport.kind, human.passport.kind) == ("agent", "human")
    assert json.loads(json.dumps(agent.passport.name)) == "a"


async def test_name_for_takes_a_default_for_unknown_ids(hub: Hub) -> None:
    human = await hub.register_human(Passport(name="h", kind="human"))
    assert hub.name_for(human.agent_id) == "h"
    assert hub.name_for(human.agent_id, default="?") == "h"
    assert hub.name_for("nobody") == "nobody"
    assert hub.name_for("nobody", default="(gone)") == "(gone)"


def test_ag2_error_and_vocabulary_names_import_from_agentsdk_network() -> None:
    """Code moving from ag2.network keeps its imports and except clauses (docs/from-ag2.md)."""
    from agentsdk import errors
    from agentsdk.network import (
        CONSULTING_TYPE,
        CONVERSATION_TYPE,
        DISCUSSION_TYPE,
        ORDERING_ROUND_ROBIN,
        PASSPORT_KINDS,
        WORKFLOW_TYPE,
        AccessDeniedError,
        AuthError,
        NetworkError,
        NotFoundError,
    )

    assert (NotFoundError, AccessDeniedError, AuthError, NetworkError) == (
        errors.NotFound,
        errors.PermissionDenied,
        errors.Unauthenticated,
        errors.AgentNetError,
    )
    assert issubclass(errors.RuleDenied, AccessDeniedError)
    assert (CONSULTING_TYPE, CONVERSATION_TYPE, DISCUSSION_TYPE, WORKFLOW_TYPE) == (
        "consulting",
        "conversation",
        "discussion",
        "workflow",
    )
    assert ORDERING_ROUND_ROBIN == "round_robin"
    assert set(PASSPORT_KINDS) == {"agent", "human", "remote_agent"}
