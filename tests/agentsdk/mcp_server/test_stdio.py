"""``agentnet mcp`` over stdio, driven by the ``mcp`` package's own client: tools, ask, resources,
update notifications, and refusals exactly as the hub makes them over gRPC."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import mcp_types as types
import pytest
from agentnet.v1 import hub_pb2
from mcp.shared.exceptions import MCPError

from agentsdk import Agent, OpenAIConfig
from agentsdk.a2a import A2ASettings
from agentsdk.mcp_server import MAX_ENVELOPE_BYTES, MAX_SUBSCRIPTIONS, MAX_TRANSCRIPT_BYTES
from agentsdk.network import Hub, Passport
from agentsdk.network.credentials import CredentialFile
from agentsdk.testing import ScriptedOpenAIServer, ServerError
from netkernel.errors import AgentNetError
from tests.agentsdk.mcp_server.conftest import ANSWER, stdio_host


async def test_the_host_lists_the_tools_finds_peers_and_asks_an_agent(hub: Hub, tmp_path: Path) -> None:
    credential = tmp_path / "host.json"
    async with stdio_host(hub.target, "--credential-file", str(credential), "--register", "host") as host:
        tools = {t.name: t for t in (await host.session.list_tools()).tools}
        assert set(tools) == {
            "ask", "send", "peers", "channels", "tasks", "context", "delegate", "discover_available_agents",
            "invoke_a2a_agent",
        }  # fmt: skip
        assert tools["ask"].input_schema["required"] == ["agent", "question"]
        assert tools["peers"].input_schema["properties"]["action"]["enum"] == ["find", "describe"]

        peers = await host.call("peers", {"action": "find"})
        assert not peers.is_error
        assert [p["name"] for p in (peers.structured_content or {})["peers"]] == ["oracle"]

        answer = await host.call("ask", {"agent": "oracle", "question": "What is the answer?"})
        assert not answer.is_error
        assert answer.content[0].text == ANSWER
        assert answer.structured_content is not None
        assert answer.structured_content["agent"] == "oracle"
        channel_id = answer.structured_content["channel_id"]

        delegated = await host.call("delegate", {"target": "oracle", "prompt": "And again?"})
        assert not delegated.is_error, delegated.content
        assert ANSWER in delegated.content[0].text

        transcript = await host.read(f"agentnet://channels/{channel_id}/transcript")
        texts = [(e["sender"], e.get("text")) for e in transcript["envelopes"] if e["event_type"] == "ag2.msg.text"]
        assert texts == [("host", "What is the answer?"), ("oracle", ANSWER)]
        assert transcript["truncated"] is False
        channel = await host.read(f"agentnet://channels/{channel_id}")
        assert channel["channel_id"] == channel_id
        listed = await host.read("agentnet://channels")
        assert channel_id in [c["channel_id"] for c in listed["channels"]]
        templates = (await host.session.list_resource_templates()).resource_templates
        assert {t.uri_template for t in templates} == {
            "agentnet://channels/{channel_id}",
            "agentnet://channels/{channel_id}/transcript",
        }
    # --register wrote a person-kind identity's credential, private to its owner.
    saved = CredentialFile(credential).load()
    assert saved is not None and (saved.name, saved.kind) == ("host", "human")
    assert stat.S_IMODE(credential.stat().st_mode) == 0o600
    # ... and a second start resumes that identity instead of registering another.
    async with stdio_host(hub.target, "--credential-file", str(credential), "--register", "host") as host:
        listed = await host.read("agentnet://channels")  # every channel, ended ones too
        assert (channel_id, "closed") in [(c["channel_id"], c["state"]) for c in listed["channels"]]
    hosts = [a for a in await hub.list_agents() if a.name == "host"]
    assert len(hosts) == 1


@pytest.mark.filterwarnings("ignore:resources/subscribe is removed")  # the handshake protocol hosts speak
async def test_a_new_envelope_reaches_the_host_as_a_resource_update(hub: Hub, tmp_path: Path) -> None:
    credential = tmp_path / "host.json"
    alice = await hub.register_human(Passport(name="alice", kind="human"))
    async with stdio_host(hub.target, "--credential-file", str(credential), "--register", "host") as host:
        await host.session.subscribe_resource("agentnet://channels")
        channel = await alice.open(type="conversation", target="host")
        assert await host.next_update() == "agentnet://channels"  # the invite
        transcript_uri = f"agentnet://channels/{channel.channel_id}/transcript"
        listed = {str(r.uri) for r in (await host.session.list_resources()).resources}
        assert listed == {"agentnet://channels", transcript_uri}  # the list, and each active channel's transcript
        await host.session.subscribe_resource(transcript_uri)
        await alice.send(channel.channel_id, "Hello, host.")
        while (uri := await host.next_update()) != transcript_uri:
            assert uri == "agentnet://channels"  # the channel's opening may still be on its way
        texts = [e.get("text") for e in (await host.read(transcript_uri))["envelopes"]]
        assert "Hello, host." in texts

        # The host answers in the channel; alice gets it.
        sent = await host.call("send", {"channel_id": channel.channel_id, "text": "Hello, alice."})
        assert not sent.is_error, sent.content
        reply = await alice.next_envelope(predicate=lambda e: e.event_type == "ag2.msg.text", timeout=30)
        assert (reply.text, reply.seq) == ("Hello, alice.", (sent.structured_content or {})["seq"])
        elsewhere = await host.call("send", {"channel_id": "no-such-channel", "text": "Hi"})
        assert elsewhere.is_error and elsewhere.content[0].text.startswith("NOT_FOUND")


async def test_what_the_identity_may_not_do_is_refused_as_over_grpc(hub: Hub, tmp_path: Path) -> None:
    credential = tmp_path / "intern.json"
    rule = {"access": {"channel_types": ["conversation"]}}
    intern = await hub.register_human(Passport(name="intern", kind="human"), rule=rule, credential_file=credential)
    with pytest.raises(AgentNetError) as over_grpc:
        await intern.rpc.open_channel(hub_pb2.OpenChannelRequest(type="consulting", targets=["oracle"]))
    await intern.disconnect()
    refusal = over_grpc.value
    assert (refusal.code.name, refusal.reason) == ("PERMISSION_DENIED", "RULE_DENIED")

    async with stdio_host(hub.target, "--credential-file", str(credential)) as host:  # resumes the identity
        asked = await host.call("ask", {"agent": "oracle", "question": "May I?"})
        assert asked.is_error
        assert asked.content[0].text == f"PERMISSION_DENIED (RULE_DENIED): {refusal.message}"
        opened = await host.call("channels", {"action": "open", "type": "consulting", "target": "oracle"})
        assert opened.is_error and opened.content[0].text.startswith("PERMISSION_DENIED (RULE_DENIED): rule ")
        bad = await host.call("peers", {"action": "dance"})
        assert bad.is_error and bad.content[0].text.startswith("INVALID_ARGUMENT: invalid arguments for tool 'peers'")


async def test_a_channel_the_identity_is_not_in_cannot_be_read(hub: Hub, tmp_path: Path) -> None:
    alice = await hub.register_human(Passport(name="alice", kind="human"))
    channel = await alice.open(type="conversation", target="oracle")
    await alice.send(channel.channel_id, "A secret plan.")
    async with stdio_host(hub.target, "--credential-file", str(tmp_path / "h.json"), "--register", "host") as host:
        for uri in (
            f"agentnet://channels/{channel.channel_id}",
            f"agentnet://channels/{channel.channel_id}/transcript",
        ):
            with pytest.raises(MCPError) as refused:
                await host.read(uri)
            assert refused.value.code == -32602  # invalid params
            assert refused.value.message.startswith("PERMISSION_DENIED (NOT_PARTICIPANT): you are not a participant")
        with pytest.raises(Exception, match="no resource 'agentnet://nothing'"):
            await host.read("agentnet://nothing")


async def test_ask_returns_the_failure_when_no_answer_comes(
    hub: Hub, server: ScriptedOpenAIServer, tmp_path: Path
) -> None:
    await hub.register_human(Passport(name="silent", kind="human"), auto_ack_invites=True)
    async with stdio_host(hub.target, "--credential-file", str(tmp_path / "h.json"), "--register", "host") as host:
        waited = await host.call("ask", {"agent": "silent", "question": "Anyone?", "timeout": 0.5})
        assert waited.is_error
        assert waited.content[0].text.startswith("DEADLINE_EXCEEDED (TIMEOUT): no answer from 'silent' within 0.5s")

        server.rule = lambda request: ServerError(500, "the model is down")
        failed = await host.call("ask", {"agent": "oracle", "question": "What is the answer?"})
        assert failed.is_error and failed.content[0].text.startswith("ABORTED (TURN_FAILED): oracle could not answer")

        too_long = await host.call("ask", {"agent": "oracle", "question": "?", "timeout": 10_000})
        assert too_long.is_error and too_long.content[0].text.startswith("INVALID_ARGUMENT: ask's `timeout`")


async def test_the_host_discovers_and_invokes_an_a2a_agent(hub: Hub, config: OpenAIConfig, tmp_path: Path) -> None:
    sage = await hub.register(Agent("sage", "Answer.", config=config), Passport(name="sage"))
    await sage.set_a2a_settings(A2ASettings(enabled=True, description="a wise agent"))
    async with stdio_host(hub.target, "--credential-file", str(tmp_path / "h.json"), "--register", "host") as host:
        found = await host.call("discover_available_agents", {})
        assert not found.is_error, found.content
        agents = (found.structured_content or {})["agents"]
        assert [(a["name"], a["description"]) for a in agents] == [("sage", "a wise agent")]

        called = await host.call("invoke_a2a_agent", {"agent_id": agents[0]["agent_id"], "message": "Well?"})
        assert not called.is_error, called.content
        assert called.structured_content is not None
        assert (called.structured_content["status"], called.structured_content["result"]) == ("completed", ANSWER)

        unknown = await host.call("invoke_a2a_agent", {"agent_id": "nobody", "message": "Well?"})
        assert unknown.is_error and unknown.content[0].text.startswith("NOT_FOUND: ")


@pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")
async def test_subscriptions_are_bounded_per_session(hub: Hub, tmp_path: Path) -> None:
    async with stdio_host(hub.target, "--credential-file", str(tmp_path / "h.json"), "--register", "host") as host:
        uris = [f"agentnet://channels/c{i}/transcript" for i in range(MAX_SUBSCRIPTIONS + 1)]
        for uri in uris[:MAX_SUBSCRIPTIONS]:
            await host.session.subscribe_resource(uri)
        await host.session.subscribe_resource(uris[0])  # again: still one subscription
        with pytest.raises(MCPError, match=f"RESOURCE_EXHAUSTED: this session is subscribed to {MAX_SUBSCRIPTIONS}"):
            await host.session.subscribe_resource(uris[-1])
        await host.session.unsubscribe_resource(uris[0])
        await host.session.subscribe_resource(uris[-1])
        with pytest.raises(MCPError, match="no resource 'file:///etc/passwd'"):
            await host.session.subscribe_resource("file:///etc/passwd")


async def test_a_transcript_resource_is_capped(hub: Hub, tmp_path: Path) -> None:
    alice = await hub.register_human(Passport(name="alice", kind="human"))
    async with stdio_host(hub.target, "--credential-file", str(tmp_path / "h.json"), "--register", "host") as host:
        channel = await alice.open(type="conversation", target="host")
        await alice.send(channel.channel_id, "x" * (MAX_ENVELOPE_BYTES * 2))
        for i in range(25):
            await alice.send(channel.channel_id, f"{i:02d} " + "y" * (MAX_ENVELOPE_BYTES - 100))
        uri = f"agentnet://channels/{channel.channel_id}/transcript"
        raw = (await host.session.read_resource(uri)).contents[0]
        assert isinstance(raw, types.TextResourceContents)
        assert len(raw.text.encode()) <= MAX_TRANSCRIPT_BYTES
        transcript = json.loads(raw.text)
        texts = [e["text"] for e in transcript["envelopes"] if e["event_type"] == "ag2.msg.text"]
        assert texts[-1].startswith("24 ")  # the newest is kept, the oldest are left out
        assert transcript["truncated"] is True and transcript["first_seq"] == transcript["envelopes"][0]["seq"]
        assert 10 < len(texts) < 25

        # An envelope bigger than the per-envelope cap is clipped, and says so.
        await alice.send(channel.channel_id, "z" * (MAX_ENVELOPE_BYTES * 3))
        newest = (await host.read(uri))["envelopes"][-1]
        assert newest["clipped"] is True and len(newest["text"].encode()) <= MAX_ENVELOPE_BYTES
        assert newest["text"].startswith("zzz")
