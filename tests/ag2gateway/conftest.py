"""A real hub (``Hub.open``), the AG2 gateway in front of it, and unmodified AG2 1.2.1 clients driven in
their own venv (``.venv-ag2``, ``make ag2-venv``) as a subprocess. The ``net`` fixture runs each test
twice: the gateway calling the hub over loopback gRPC (as ``python -m ag2gateway``) and in process
(as ``python -m ag2embedded``, :mod:`servicekit.inprocess`)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ag2gateway.config import Ag2GatewayOptions
from ag2gateway.server import Ag2Gateway, start_gateway
from agentsdk.network import Hub
from hubsvc.core.options import HubOptions
from servicekit.inprocess import InProcessChannel

ROOT = Path(__file__).resolve().parents[2]
AG2_PYTHON = ROOT / ".venv-ag2" / "bin" / "python"
DRIVER = Path(__file__).with_name("ag2_driver.py")


class Ag2Error(Exception):
    """An AG2 call failed in the driver (the message is AG2's exception class and text)."""


class Driver:
    """One subprocess running AG2 clients; ``await driver("op", ...)`` runs one command."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    async def __call__(self, op: str, **fields: Any) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write((json.dumps({"op": op, **fields}) + "\n").encode())
        await self.proc.stdin.drain()
        line = await asyncio.wait_for(self.proc.stdout.readline(), 60)
        if not line:
            raise Ag2Error("the AG2 driver exited")
        answer = json.loads(line)
        if not answer["ok"]:
            raise Ag2Error(answer["error"])
        return answer["result"]

    async def stop(self) -> None:
        """End the subprocess."""
        if self.proc.returncode is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()


@dataclass
class Net:
    """The hub, the gateway in front of it, and the AG2 driver."""

    hub: Hub
    gateway: Ag2Gateway
    ag2: Driver
    options: Ag2GatewayOptions
    hub_channel: InProcessChannel | None = None
    """The gateway's in-process path to the hub (None: loopback gRPC)."""
    others: list[Driver] = field(default_factory=list)

    async def another_process(self) -> Driver:
        """One more AG2 driver process on the same gateway (stopped with the fixture): AG2 programs in
        separate processes, as AG2's own cross-process tests run them."""
        driver = await start_driver()
        self.others.append(driver)
        await driver("url", url=self.gateway.url)
        return driver

    async def restart_gateway(self) -> None:
        """Stop the gateway and start a new one (same secret, new port); the driver is told the new URL."""
        await self.gateway.stop()
        self.gateway = await start_gateway(self.options, self.hub_channel)
        await self.ag2("url", url=self.gateway.url)


async def start_driver() -> Driver:
    """Start the AG2 driver in ``.venv-ag2``."""
    if not AG2_PYTHON.exists():
        pytest.fail("the AG2 venv is missing: run `make ag2-venv` (the released ag2==1.2.1 in .venv-ag2)")
    proc = await asyncio.create_subprocess_exec(
        str(AG2_PYTHON),
        str(DRIVER),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=sys.stderr,
        limit=64 * 1024 * 1024,  # one answer line may carry a whole WAL
    )
    return Driver(proc)


@asynccontextmanager
async def open_net(
    tmp_path: Path, hub_options: HubOptions | None = None, *, in_process: bool = False
) -> AsyncIterator[Net]:
    """A hub (``hub_options``: its options), the gateway in front of it (calling it in process when
    ``in_process``, else over loopback gRPC) and one AG2 driver process."""
    async with Hub.open(path=tmp_path / "hub.db", options=hub_options) as hub:
        options = Ag2GatewayOptions(port=0, hub=hub.target, secret_file=tmp_path / "gw.secret")
        hub_channel = InProcessChannel(hub.server.running.handlers) if in_process else None
        gateway = await start_gateway(options, hub_channel)
        driver = await start_driver()
        net = Net(hub, gateway, driver, options, hub_channel)
        await driver("url", url=gateway.url)
        try:
            yield net
        finally:
            for other in net.others:
                await other.stop()
            await driver.stop()
            await net.gateway.stop()


@pytest.fixture(params=["grpc", "in-process"])
async def net(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Net]:
    async with open_net(tmp_path, in_process=request.param == "in-process") as net:
        yield net
