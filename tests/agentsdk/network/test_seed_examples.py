"""The tools-and-views seed's code examples, adapted only in imports, against a real hub."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest

from agentsdk import Agent, OpenAIConfig
from agentsdk.network import (
    AGENT_CLIENT_DEP,
    CHANNEL_DEP,
    CHANNEL_STATE_DEP,
    EV_CHANNEL_INVITE,
    EV_TEXT,
    HUB_DEP,
    TASK_DEP,
    Envelope,
    Hub,
    HumanClient,
    Passport,
    Resume,
    default_handler,
    parse_skill_frontmatter,
    read_wal_until,
    render_fallback_skill,
    resolve_view_policy,
    stamp_dependencies,
    visible_to,
)
from agentsdk.network.adapters import adapter_for
from agentsdk.stream import Stream
from agentsdk.testing import ScriptedOpenAIServer

log = logging.getLogger("seed-examples")

SEED_QUICK_REFERENCE = [
    "default_handler", "read_wal_until", "resolve_view_policy", "stamp_dependencies", "NetworkPlugin", "HumanClient",
    "PassportKind", "ViewPolicy", "FullTranscript", "WindowedSummary", "NamedTranscript", "NamedWindowedSummary",
    "ParsedSkill", "parse_skill_frontmatter", "render_fallback_skill", "Envelope", "Priority", "visible_to", "EV_TEXT",
    "EV_PACKET", "EV_CHANNEL_INVITE", "EV_CHANNEL_INVITE_ACK", "EV_CHANNEL_INVITE_REJECT", "EV_CHANNEL_OPENED",
    "EV_CHANNEL_CLOSED", "EV_CHANNEL_EXPIRED", "EV_EXPECTATION_VIOLATED", "EV_CONTEXT_SET", "EV_TASK_CANCEL_REQUEST",
    "EV_TASK_CANCELLED", "AGENT_CLIENT_DEP", "CHANNEL_DEP", "CHANNEL_STATE_DEP", "HUB_DEP", "TASK_DEP",
    "AgentClientInject", "ChannelInject", "ChannelStateInject", "HubInject", "TaskInject",
]  # fmt: skip


def test_every_quick_reference_name_imports_from_agentsdk_network() -> None:
    import agentsdk.network as network

    missing = [name for name in SEED_QUICK_REFERENCE if not hasattr(network, name)]
    assert missing == []
    assert network.EV_TEXT == "ag2.msg.text" and network.EV_PACKET == "ag2.packet"
    assert network.EV_CONTEXT_SET == "ag2.context.set"
    assert network.EV_TASK_CANCEL_REQUEST == "ag2.task.cancel_request"
    assert network.EV_TASK_CANCELLED == "ag2.task.cancelled"


@pytest.fixture
def model() -> Iterator[OpenAIConfig]:
    server = ScriptedOpenAIServer(rule=lambda req: "LLM reply")
    server.start()
    yield OpenAIConfig(model="scripted", base_url=server.base_url, api_key="test")
    server.stop()


async def wait_for(check: object, timeout: float = 10.0) -> None:
    for _ in range(int(timeout / 0.02)):
        if check():  # type: ignore[operator]
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not met")


async def test_gateway_selective_and_logged_handlers(hub: Hub, model: OpenAIConfig) -> None:
    client = await hub.register(Agent("gw", config=model), Passport(name="gw"), Resume())
    my_external_queue: asyncio.Queue[dict[str, str]] = asyncio.Queue()

    async def gateway_handler(envelope: Envelope) -> None:
        """Forward inbound text to an external system instead of running an LLM."""
        if envelope.event_type != EV_TEXT:
            await default_handler(envelope, client)  # auto-ack invites etc. (client from closure)
            return
        text = envelope.event_data.get("text", "")
        await my_external_queue.put({"from": envelope.sender_id, "text": text, "channel": envelope.channel_id})

    client.on_envelope(gateway_handler)
    user = await hub.register_human(Passport(name="user", kind="human"))
    ch = await user.open(type="conversation", target="gw")
    await user.send(ch.channel_id, "for the gateway")
    forwarded = await asyncio.wait_for(my_external_queue.get(), 10)
    assert forwarded == {"from": user.agent_id, "text": "for the gateway", "channel": ch.channel_id}

    TRUSTED_AGENTS: set[str] = set()

    async def selective_handler(envelope: Envelope) -> None:
        if envelope.event_type == EV_CHANNEL_INVITE and envelope.sender_id not in TRUSTED_AGENTS:
            return  # untrusted invite → silent drop; hub will time out and close
        await default_handler(envelope, client)  # default for everything else

    client.on_envelope(selective_handler)
    pending = asyncio.create_task(user.open(type="conversation", target="gw", invite_ack_timeout=0.5))
    dropped = await pending
    assert dropped.metadata.state == "closed" and dropped.metadata.close_reason == "invite_timeout"

    processed: list[str] = []

    async def logged_handler(envelope: Envelope) -> None:
        log.info("inbound %s from %s", envelope.event_type, envelope.sender_id)
        try:
            await default_handler(envelope, client)
        finally:
            log.info("processed %s", envelope.envelope_id)
            processed.append(envelope.event_type)

    client.on_envelope(logged_handler)
    await user.send(ch.channel_id, "to the LLM")
    reply = await user.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=10)
    assert reply.text == "LLM reply"
    await wait_for(lambda: EV_TEXT in processed)


async def test_no_say_handler(hub: Hub, model: OpenAIConfig) -> None:
    client = await hub.register(Agent("quiet", config=model), Passport(name="quiet"))

    async def no_say_handler(envelope: Envelope, client: object) -> None:
        from agentsdk.network import AgentClient

        assert isinstance(client, AgentClient)
        if envelope.event_type != EV_TEXT:
            await default_handler(envelope, client)  # invite-ack + lifecycle for free
            return
        if not await client._hub_client.can_send(envelope.channel_id, client.agent_id):
            return  # not our turn / channel closing
        meta, state, _ = await client.channel_info(envelope.channel_id)
        adapter = adapter_for(meta.type)
        wal = await read_wal_until(client, envelope)
        policy = resolve_view_policy(client, meta)
        events = await policy.project(
            wal, participant_id=client.agent_id, channel=meta, render_envelope=adapter.render_envelope,
            name_for=client.hub.name_for,
        )  # fmt: skip
        from agentsdk.network import Channel

        deps = stamp_dependencies(client, Channel(meta, client), state)
        assert set(deps) >= {CHANNEL_DEP, AGENT_CLIENT_DEP, HUB_DEP, CHANNEL_STATE_DEP} and TASK_DEP not in deps
        stream = Stream(stream_id=meta.channel_id, events=events)
        current_input = adapter.extract_turn_input(envelope)
        reply = await client.agent.ask(current_input, stream=stream, dependencies=deps)  # ← no tools=
        out = adapter.build_round_envelope(metadata=meta, sender_id=client.agent_id, reply=reply,
                                           events=events, state=state, hub=client._hub)  # fmt: skip
        if out is not None:
            out.causation_id = envelope.envelope_id
            await client.send_envelope(out)

    client.on_envelope(lambda env: no_say_handler(env, client))
    user = await hub.register_human(Passport(name="user", kind="human"))
    ch = await user.open(type="consulting", target="quiet")
    q = await user.send(ch.channel_id, "question")
    reply = await user.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=10)
    assert reply.text == "LLM reply" and reply.causation_id == q.envelope_id


async def test_custom_event_types_skills_wal_and_visibility(hub: Hub) -> None:
    alice = await hub.register_human(Passport(name="alice", kind="human"))
    bob = await hub.register_human(Passport(name="bob", kind="human"))
    carol = await hub.register_human(Passport(name="carol", kind="human"))
    channel = await alice.open(type="discussion", target=["bob", "carol"])
    envelope = Envelope(
        channel_id=channel.channel_id,
        sender_id=alice.agent_id,
        audience=[bob.agent_id],
        event_type="myapp.review_request",
        event_data={"document_id": "doc-123", "kind": "security"},
    )
    await alice.send_envelope(envelope)
    got = await bob.next_envelope(predicate=lambda e: e.event_type == "myapp.review_request", timeout=10)
    assert got.event_data == {"document_id": "doc-123", "kind": "security"}
    assert visible_to(got, bob.agent_id) and not visible_to(got, carol.agent_id)

    wal = await hub.read_wal(channel.channel_id)
    lines = [f"{i:>3}  {env.event_type}  from={env.sender_id[:8]}" for i, env in enumerate(wal)]
    assert any("myapp.review_request" in line for line in lines)

    skill_md = """\
---
title: Research Assistant
expertise: [policy, finance]
---

# Researcher

A senior policy analyst.
"""
    researcher = await hub.register(
        Agent("researcher", config=OpenAIConfig(model="x")), Passport(name="researcher"),
        Resume(claimed_capabilities=["research"]), skill_md=skill_md,
    )  # fmt: skip
    parsed = parse_skill_frontmatter(skill_md)
    assert parsed.frontmatter == {"title": "Research Assistant", "expertise": ["policy", "finance"]}
    assert parsed.body.startswith("# Researcher")
    fallback = render_fallback_skill(Passport(name="researcher"), Resume(claimed_capabilities=["research"]))
    assert "research" in fallback and parse_skill_frontmatter(fallback).frontmatter["title"] == "researcher"
    await hub.set_skill(researcher.agent_id, "# new skill\n")
    assert isinstance(alice, HumanClient)
