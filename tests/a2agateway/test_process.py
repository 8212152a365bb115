"""``python -m a2agateway`` as a real process: flags and environment, cards served, clean stop."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys

import httpx

from agentsdk import Agent, ScriptedConfig
from agentsdk.a2a import A2ASettings
from agentsdk.network import Hub, Passport


async def test_the_gateway_process_serves_cards_of_the_hub_named_in_its_environment() -> None:
    async with Hub.open() as hub:
        await hub.register(
            Agent("policy", config=ScriptedConfig([])), Passport(name="policy"), a2a=A2ASettings(enabled=True)
        )
        alice = await hub.register_human(Passport(name="alice", kind="human"))
        env = {**os.environ, "AGENTNET_A2A_HUB": hub.target, "AGENTNET_A2A_GRPC_PORT": "-1"}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "a2agateway", "--port", "0", env=env, stdout=subprocess.PIPE
        )
        try:
            assert proc.stdout is not None
            line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
            assert line.startswith("a2agateway listening "), line
            where = json.loads(line.removeprefix("a2agateway listening "))
            assert where["hub"] == hub.target and where["grpc"] == ""
            async with httpx.AsyncClient() as http:
                listing = await http.get(
                    where["http"] + "/agents", headers={"Authorization": f"Bearer {alice.credential}"}
                )
            [card] = listing.json()["agents"]
            assert card["name"] == "policy"
            assert [i["protocolBinding"] for i in card["supportedInterfaces"]] == ["JSONRPC"]
        finally:
            proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(proc.wait(), 60) == 0


def test_a_bad_setting_stops_the_gateway_with_a_message_naming_it() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "a2agateway", "--max-request-bytes", "10"], capture_output=True, text=True, timeout=60
    )
    assert (
        out.returncode == 2
        and "--max-request-bytes (AGENTNET_A2A_MAX_REQUEST_BYTES) must be at least 1024" in out.stderr
    )
