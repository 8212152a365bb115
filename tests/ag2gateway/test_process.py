"""``python -m ag2gateway`` as a real process: flags, the loopback rule, serving AG2 clients, clean stop."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path

from agentsdk.network import Hub
from tests.ag2gateway.conftest import start_driver
from tests.ag2gateway.test_channels import TOKEN


async def test_the_gateway_process_serves_ag2_clients_and_stops_on_sigterm(tmp_path: Path) -> None:
    async with Hub.open() as hub:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "ag2gateway",
            "--hub",
            hub.target,
            "--port",
            "0",
            "--secret-file",
            str(tmp_path / "gw.secret"),
            stdout=subprocess.PIPE,
        )
        ag2 = await start_driver()
        try:
            assert proc.stdout is not None
            line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
            assert line.startswith("ag2gateway listening "), line
            where = json.loads(line.removeprefix("ag2gateway listening "))
            assert where["hub"] == hub.target and where["url"].startswith("ws://127.0.0.1:")
            await ag2("url", url=where["url"])
            bob = await ag2("human", name="bob", token=TOKEN.format("bob"))
            assert await ag2("rpc", name="find_agent_id", params={"name": "bob"}) == bob["agent_id"]
            assert (tmp_path / "gw.secret").stat().st_mode & 0o777 == 0o600
        finally:
            await ag2.stop()
            proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(proc.wait(), 30) == 0


def test_plaintext_on_a_non_loopback_address_is_refused_without_insecure() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ag2gateway", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "refusing to serve plaintext on 0.0.0.0" in done.stderr
