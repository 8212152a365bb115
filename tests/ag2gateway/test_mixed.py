"""An AG2 agent and an agentsdk agent in one channel: each sees the other's turns in its own shapes."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from agentsdk import Agent, ScriptedConfig
from agentsdk.network import Envelope, Passport
from tests.ag2gateway.conftest import ROOT, Net
from tests.ag2gateway.test_channels import TOKEN, _opened
from tests.eventually import assert_eventually


async def test_an_ag2_agent_and_an_agentsdk_agent_take_turns_in_one_discussion(net: Net) -> None:
    ag2 = net.ag2
    bob = await ag2("agent", name="bob", token=TOKEN.format("bob"), replies=["bob (ag2) says hi"])
    sdk = await net.hub.register(Agent("sdkbot", config=ScriptedConfig(["sdkbot says hi"])), Passport(name="sdkbot"))
    await ag2("human", name="alice", token=TOKEN.format("alice"))
    opened = await ag2("open", who="alice", type="discussion", targets=["bob", "sdkbot"])
    await _opened(net, opened["channel_id"])
    sent = await ag2("send", who="alice", channel_id=opened["channel_id"], text="introduce yourselves")

    async def both_answered() -> bool:
        texts = [e for e in await ag2("received", who="alice") if e["event_type"] == "ag2.msg.text"]
        assert [(e["sender_id"], e["event_data"]["text"]) for e in texts] == [
            (bob["agent_id"], "bob (ag2) says hi"),
            (sdk.agent_id, "sdkbot says hi"),
        ]
        assert texts[0]["causation_id"] == sent["envelope_id"]  # the AG2 id AG2 clients know
        return True

    await assert_eventually(both_answered, timeout=30)
    # The AG2 agent's answer, read back by the agentsdk side, is an ordinary hub envelope.
    wal = await sdk.read_wal(opened["channel_id"])
    bodies = [(e.sender_id, e.text) for e in wal if e.event_type == "ag2.msg.text"]
    assert bodies[1:] == [(bob["agent_id"], "bob (ag2) says hi"), (sdk.agent_id, "sdkbot says hi")]


@pytest.fixture(scope="module")
def go_panelist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Go bridge's discussion_participant example, built once."""
    if shutil.which("go") is None:
        pytest.fail("go is not on PATH; this test runs the Go bridge's discussion_participant (make go-deps)")
    binary = tmp_path_factory.mktemp("go") / "discussion_participant"
    subprocess.run(
        ["go", "build", "-o", str(binary), "./examples/discussion_participant"],
        cwd=ROOT / "bridges" / "go",
        check=True,
        capture_output=True,
        timeout=300,
    )
    return binary


async def test_ag2_agentsdk_and_go_bridge_agents_share_one_discussion(net: Net, go_panelist: Path) -> None:
    ag2 = net.ag2
    go = await asyncio.create_subprocess_exec(
        str(go_panelist), "--hub", net.hub.target, "--name", "go-panelist", stdout=asyncio.subprocess.PIPE
    )
    try:
        assert go.stdout is not None
        ready = json.loads(await asyncio.wait_for(go.stdout.readline(), 60))
        assert ready["event"] == "ready"
        bob = await ag2("agent", name="bob", token=TOKEN.format("bob"), replies=["bob (ag2) says hi"])
        sdk = await net.hub.register(
            Agent("sdkbot", config=ScriptedConfig(["sdkbot says hi"])), Passport(name="sdkbot")
        )
        await ag2("human", name="alice", token=TOKEN.format("alice"))
        opened = await ag2("open", who="alice", type="discussion", targets=["bob", "sdkbot", "go-panelist"])
        await _opened(net, opened["channel_id"])
        await ag2("send", who="alice", channel_id=opened["channel_id"], text="introduce yourselves")

        async def all_three() -> bool:
            texts = [e for e in await ag2("received", who="alice") if e["event_type"] == "ag2.msg.text"]
            assert [e["sender_id"] for e in texts] == [bob["agent_id"], sdk.agent_id, ready["agent_id"]]
            assert texts[2]["event_data"]["text"] == 'go-agent round 1: go-panelist heard "sdkbot says hi"'
            return True

        await assert_eventually(all_three, timeout=30)
    finally:
        go.terminate()
        await go.wait()


async def test_event_data_reaches_an_ag2_client_exactly_as_posted(net: Net) -> None:
    """A notify carries the event data as the hub holds it: an integer beyond 64 bits, a float and
    non-ASCII text arrive exactly (the gateway splices the stored JSON text into the frame)."""
    await net.ag2("human", name="bob", token=TOKEN.format("bob"))
    alice = await net.hub.register_human(Passport(name="alice", kind="human"))
    channel = await alice.open(type="conversation", target="bob")
    await _opened(net, channel.channel_id)
    data = {"n": 2**70, "x": 0.1, "nested": {"text": "héllo ✓", "items": [1, None, True]}}
    await alice.post_envelope(
        Envelope(channel_id=channel.channel_id, sender_id="", audience=None, event_type="custom.data", event_data=data)
    )

    async def bob_has_it() -> bool:
        got = [e["event_data"] for e in await net.ag2("received", who="bob") if e["event_type"] == "custom.data"]
        assert got == [data]
        return True

    await assert_eventually(bob_has_it, timeout=15)


async def test_event_data_an_ag2_client_posts_reaches_the_hub_exactly(net: Net) -> None:
    """The other way: what an AG2 client posts is stored as it sent it — an integer beyond 64 bits
    stays that integer (a fast JSON parser alone would turn it into a float), a float stays a float."""
    bob = await net.ag2("human", name="bob", token=TOKEN.format("bob"))
    alice = await net.hub.register_human(Passport(name="alice", kind="human"))
    channel = await alice.open(type="conversation", target="bob")
    await _opened(net, channel.channel_id)
    data = {"n": 2**70 + 1, "m": -(2**64) - 3, "x": 0.1, "nested": {"items": [2**63 + 7, "héllo ✓"]}}
    await net.ag2(
        "rpc",
        name="post_envelope",
        params={
            "envelope": {
                "channel_id": channel.channel_id,
                "sender_id": bob["agent_id"],
                "audience": None,
                "event_type": "custom.data",
                "event_data": data,
            }
        },
    )
    wal = await alice.read_wal(channel.channel_id)
    assert [e.event_data for e in wal if e.event_type == "custom.data"] == [data]
