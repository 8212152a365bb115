"""``python -m ag2embedded``: the hub and the AG2 gateway in one process, serving AG2 clients, stopping
cleanly; the gateway's flags may not name another hub."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path

from agentsdk.network import HubClient
from netkernel.identity import Passport
from tests.ag2gateway.conftest import start_driver
from tests.ag2gateway.test_channels import TOKEN


async def test_one_process_serves_ag2_clients_and_sdk_clients_and_stops_on_sigterm(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "ag2embedded",
        "--port",
        "0",
        "--db",
        str(tmp_path / "hub.db"),
        "--operator-token-file",
        str(tmp_path / "operator.token"),
        "--",
        "--port",
        "0",
        "--secret-file",
        str(tmp_path / "gw.secret"),
        stdout=subprocess.PIPE,
    )
    ag2 = await start_driver()
    try:
        assert proc.stdout is not None
        gateway_line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        hub_line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        assert gateway_line.startswith("ag2gateway listening "), gateway_line
        assert hub_line.startswith("agentnet-hub listening on 127.0.0.1:"), hub_line
        hub_target = hub_line.rsplit(" ", 1)[1].strip()
        where = json.loads(gateway_line.removeprefix("ag2gateway listening "))
        assert where["hub"] == hub_target and where["url"].startswith("ws://127.0.0.1:")
        await ag2("url", url=where["url"])
        bob = await ag2("human", name="bob", token=TOKEN.format("bob"))
        assert await ag2("rpc", name="find_agent_id", params={"name": "bob"}) == bob["agent_id"]
        async with HubClient.connect(hub_target) as sdk:  # the same hub, over its own gRPC port
            await sdk.register_human(Passport(name="carol"))
            assert "bob" in {agent.name for agent in await sdk.list_agents(kind="human")}
    finally:
        await ag2.stop()
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0


def test_the_gateways_flags_may_not_name_another_hub(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ag2embedded", "--db", str(tmp_path / "hub.db"), "--", "--hub", "127.0.0.1:1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "drop --hub from the gateway's flags" in done.stderr
