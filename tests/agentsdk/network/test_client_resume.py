"""An identity's client holds its resume and replaces it, as AG2's ``AgentClient.resume`` /
``set_resume``: the cached resume needs no call, ``set_resume`` stamps ``last_updated`` on the hub and
reads back what peers see, and a client resumed from its credential file starts from the hub's."""

from __future__ import annotations

import time
from pathlib import Path

from agentsdk import Agent
from agentsdk.config import ScriptedConfig
from agentsdk.network import Hub, Passport, Resume
from agentsdk.network.hub_client import HubClient


async def test_set_resume_caches_what_the_hub_stamped_and_peers_read(tmp_path: Path) -> None:
    cred = tmp_path / "analyst.cred"
    async with Hub.open(path=tmp_path / "hub.db") as hub:
        analyst = await hub.register(
            Agent("analyst", config=ScriptedConfig([])),
            Passport(name="analyst"),
            Resume(summary="reads numbers", claimed_capabilities=["analysis"]),
            credential_file=cred,
        )
        assert analyst.resume == Resume(summary="reads numbers", claimed_capabilities=["analysis"])
        human = await hub.register_human(Passport(name="user", kind="human"))
        assert human.resume == Resume()
        before = time.time()
        returned = await analyst.set_resume(Resume(summary="reads and writes numbers", domains=["finance"]))
        assert returned is analyst.resume
        assert analyst.resume == Resume(summary="reads and writes numbers", domains=["finance"])
        assert analyst.resume.last_updated is not None and before - 1 <= analyst.resume.last_updated <= time.time() + 1
        assert await hub.get_resume("analyst") == analyst.resume  # what peers read
        assert [a.name for a in await hub.list_agents(capability="analysis")] == []  # no longer claimed
        await human.set_resume(Resume(summary="asks questions"))
        assert (await hub.get_resume("user")).summary == "asks questions" == human.resume.summary
        await analyst.add_example("Q3 memo")
        assert analyst.resume.examples == ["Q3 memo"] and analyst.resume.summary == "reads and writes numbers"
        await analyst.disconnect()
    async with Hub.open(path=tmp_path / "hub.db") as hub, HubClient.connect(hub.target) as hc:
        again = await hc.register(
            Agent("analyst", config=ScriptedConfig([])), Passport(name="analyst"), credential_file=cred
        )
        assert again.resume.summary == "reads and writes numbers" and again.resume.examples == ["Q3 memo"]
        assert again.resume.last_updated is not None
