"""register(..., credential_file=...) and unregister() against a real (embedded) hub."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from agentsdk import Agent, OpenAIConfig
from agentsdk.a2a import A2ASettings
from agentsdk.network import EV_TEXT, Hub, HubClient, Passport, Resume
from netkernel.errors import AlreadyExists, FailedPrecondition, Unauthenticated


def make_agent(name: str = "svc") -> Agent:
    """An agent whose model is never asked (the tests register it without the default handler)."""
    return Agent(name, config=OpenAIConfig(model="unused", base_url="http://127.0.0.1:9", api_key="unused"))


async def test_the_second_register_with_a_credential_file_resumes_the_same_identity(tmp_path: Path) -> None:
    credential_file = tmp_path / "private" / "svc.json"
    async with Hub.open() as hub:
        async with HubClient.connect(hub.target) as first:
            a = await first.register(
                make_agent(), a2a=A2ASettings(enabled=True, skills=["x"]), credential_file=credential_file
            )
            assert stat.S_IMODE(credential_file.stat().st_mode) == 0o600
            assert stat.S_IMODE(credential_file.parent.stat().st_mode) == 0o700
            assert json.loads(credential_file.read_text())["agent_id"] == a.agent_id
            # Without the file, the same name is still refused, as before.
            with pytest.raises(AlreadyExists):
                await first.register(make_agent())
        async with HubClient.connect(hub.target) as second:
            b = await second.register(
                make_agent(), resume=Resume(summary="new summary"), credential_file=credential_file
            )
            assert (b.agent_id, b.credential) == (a.agent_id, a.credential)
            assert b.a2a_settings == A2ASettings(enabled=True, skills=["x"]) and b.a2a is not None
            assert b.credential_file is not None and b.credential_file.path == credential_file
            # A resume given on restart replaces the hub's; A2A settings given replace them too.
            record = hub.core.registry.get(b.agent_id).record
            assert record.resume.summary == "new summary"
            c = await second.resume_agent(make_agent(), b.credential, attach_default_handler=False)
            assert c.agent_id == a.agent_id and c.a2a_settings == b.a2a_settings


async def test_a_human_resumes_from_its_credential_file_and_resume_human_still_works(tmp_path: Path) -> None:
    credential_file = tmp_path / "desk.credential"
    async with Hub.open() as hub:
        peer = await hub.register_human(Passport(name="peer", kind="human"))
        async with HubClient.connect(hub.target) as first:
            desk = await first.register_human(Passport(name="desk", kind="human"), credential_file=credential_file)
            channel = await peer.open(type="conversation", target="desk")
            await peer.send(channel.channel_id, "before")
            assert (await desk.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=10)).text == "before"
        await peer.send(channel.channel_id, "while away")
        async with HubClient.connect(hub.target) as second:
            again = await second.register_human(Passport(name="desk", kind="human"), credential_file=credential_file)
            assert again.agent_id == desk.agent_id
            got = await again.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=10)
            assert got.text == "while away"  # the cursor file beside the credential: no repeat of "before"
            assert (await second.resume_human(desk.credential)).agent_id == desk.agent_id


async def test_a_revoked_credential_is_refused_and_nothing_is_registered(tmp_path: Path) -> None:
    credential_file = tmp_path / "svc.json"
    async with Hub.open() as hub:
        await hub.register_human(Passport(name="observer", kind="human"))  # lists agents on our behalf
        client = await hub.register(make_agent(), credential_file=credential_file)
        saved = credential_file.read_text()
        closed = await client.unregister()
        assert closed == [] and not credential_file.exists()
        assert await hub.list_agents(query="svc") == []
        credential_file.write_text(saved)  # e.g. a backup restored after the identity retired
        with pytest.raises(Unauthenticated, match="delete the file to register a new identity"):
            await hub.register(make_agent(), credential_file=credential_file)
        assert await hub.list_agents(query="svc") == [] and credential_file.read_text() == saved
        # Deleting the file registers anew under the freed name.
        credential_file.unlink()
        fresh = await hub.register(make_agent(), credential_file=credential_file)
        assert fresh.agent_id != client.agent_id


async def test_a_credential_file_of_another_identity_or_kind_is_refused(tmp_path: Path) -> None:
    async with Hub.open() as hub:
        await hub.register(make_agent("alpha"), credential_file=tmp_path / "alpha.json")
        await hub.register_human(Passport(name="person", kind="human"), credential_file=tmp_path / "person.json")
        with pytest.raises(FailedPrecondition, match="holds identity 'alpha'"):
            await hub.register(make_agent("beta"), credential_file=tmp_path / "alpha.json")
        with pytest.raises(FailedPrecondition, match="kind human"):
            await hub.register(make_agent("person"), credential_file=tmp_path / "person.json")
        (tmp_path / "junk.json").write_text("not json")
        with pytest.raises(FailedPrecondition, match="not a credential file"):
            await hub.register(make_agent("gamma"), credential_file=tmp_path / "junk.json")
        assert {a.name for a in await hub.list_agents()} == {"alpha", "person"}


async def test_unregister_closes_the_identitys_channels_and_frees_its_name() -> None:
    async with Hub.open() as hub:
        user = await hub.register_human(Passport(name="user", kind="human"))
        bot = await hub.register_human(Passport(name="bot", kind="human"))
        channel = await user.open(type="conversation", target="bot")
        assert await bot.unregister() == [channel.channel_id]
        again = await hub.register_human(Passport(name="bot", kind="human"))
        assert again.agent_id != bot.agent_id
