"""A real network for the ``agentnet`` command: a hub and a knowledge service as processes (their
token files where ``make serve`` puts them), with agents, a channel, a task and A2A calls made
through the SDK."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from agentnet.v1 import hub_pb2, task_pb2
from typer.testing import CliRunner, Result

from agentsdk.cli.app import app
from agentsdk.network import HubClient, Passport
from tests.hubsvc.test_a2a import a2a_agent, answering, invoke
from tests.procs import ServiceProcess, interrupt, start_service


@dataclass
class Network:
    """The running services, what was seeded, and the environment the command runs with."""

    hub: ServiceProcess
    knowledge: ServiceProcess
    data_dir: Path
    channel_id: str = ""
    task_id: str = ""
    bob_credential_file: Path = Path()
    names: dict[str, str] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        """The command's environment: the services' addresses and their data directory (token files)."""
        return {
            "AGENTNET_HUB": self.hub.target,
            "AGENTNET_KNOWLEDGE": self.knowledge.target,
            "AGENTNET_DATA_DIR": str(self.data_dir),
            "COLUMNS": "300",
        }

    def run(self, *args: str, env: dict[str, str] | None = None, input: str | None = None) -> Result:
        """``agentnet ARGS`` in this process (typer's runner)."""
        return CliRunner().invoke(app, list(args), env={**self.env, **(env or {})}, input=input)

    def spawn(self, *args: str) -> Streaming:
        """``agentnet ARGS`` as a subprocess whose output lines are collected as they come."""
        env = {**os.environ, **self.env, "PYTHONUNBUFFERED": "1"}
        for name in ("AGENTNET_OPERATOR_TOKEN", "AGENTNET_CREDENTIAL", "AGENTNET_CREDENTIAL_FILE"):
            env.pop(name, None)
        return Streaming([sys.executable, "-m", "agentsdk.cli.app", *args], env)


class Streaming:
    """A running command and the lines it printed so far."""

    def __init__(self, argv: Sequence[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self.errors: list[str] = []
        self._printed = threading.Condition()
        self._ended = 0
        """How many of the two pipes reached their end."""
        for stream, sink in ((self.proc.stdout, self.lines), (self.proc.stderr, self.errors)):
            threading.Thread(target=self._pump, args=(stream, sink), daemon=True).start()

    def _pump(self, stream: Iterator[str], sink: list[str]) -> None:
        for line in stream:
            with self._printed:
                sink.append(line.rstrip("\n"))
                self._printed.notify_all()
        with self._printed:
            self._ended += 1
            self._printed.notify_all()

    def wait_for(
        self, predicate: Callable[[str], bool], what: str, *, stderr: bool = False, timeout: float = 30.0
    ) -> str:
        """Wait (woken by each printed line) until a line of stdout (or stderr) satisfies ``predicate``."""
        deadline = time.monotonic() + timeout
        lines = self.errors if stderr else self.lines
        with self._printed:
            while True:
                found = next((line for line in lines if predicate(line)), None)
                if found is not None:
                    return found
                left = deadline - time.monotonic()
                if left <= 0 or self._ended == 2:  # out of time, or both pipes closed
                    raise AssertionError(f"{what}: not printed; printed {self.lines!r}, errors {self.errors!r}")
                self._printed.wait(left)

    def stop(self) -> int:
        """Interrupt it (Ctrl-C) and return its exit status."""
        return interrupt(self.proc)


async def _seed(network: Network) -> None:
    """alice and bob (bob's identity saved in a credential file) talk in a conversation; alice runs a
    task; "caller" calls "callee" over A2A in root session "cli-session". (The fixture then writes
    notes/readme.md to the knowledge service.)"""
    async with HubClient.connect(network.hub.target) as hub:
        alice = await hub.register_human(Passport(name="alice", kind="human"))
        bob = await hub.register_human(Passport(name="bob", kind="human"), credential_file=network.bob_credential_file)
        channel = await alice.open(type="conversation", target="bob", intent="say hello")
        await alice.send(channel.channel_id, "hello bob")
        await bob.send(channel.channel_id, "hi alice")
        started = await alice.rpc.report_task(
            hub_pb2.ReportTaskRequest(kind=task_pb2.TASK_EVENT_KIND_STARTED, title="write the report")
        )
        network.channel_id, network.task_id = channel.channel_id, started.task.task_id
        network.names = {"alice": alice.agent_id, "bob": bob.agent_id}
    caller = await a2a_agent(network.hub.target, "caller")
    callee = await a2a_agent(network.hub.target, "callee")
    async with answering(callee, lambda _dispatch: ("done", None)):
        await caller.rpc("InvokeAgent", invoke(callee, "please", root_session_id="cli-session"))
    for p in (caller, callee):
        await p.close()


@contextmanager
def _running(root: Path) -> Iterator[Network]:
    """A hub and a knowledge service under ``root``, seeded; stopped on exit."""
    data = root / "data"
    hub = start_service("hubsvc", ["--data-dir", str(data)], cwd=root)
    knowledge = start_service("knowledgesvc", ["--data-dir", str(data)], cwd=root)
    try:
        net = Network(hub, knowledge, data, bob_credential_file=root / "bob.json")
        asyncio.run(_seed(net))
        written = net.run("knowledge", "put", "notes/readme.md", input="what the agents know\n")
        assert written.exit_code == 0, written.output
        yield net
    finally:
        hub.terminate()
        knowledge.terminate()


@pytest.fixture(scope="module")
def network(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Network]:
    """The seeded services, shared by the module's tests that only read: a test that changes the hub
    (posts, registers, opens channels) takes :func:`fresh_network`, so no test sees another's data."""
    with _running(tmp_path_factory.mktemp("agentnet-cli")) as net:
        yield net


@pytest.fixture
def fresh_network(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Network]:
    """Seeded services of this test alone (for a test that changes what the hub holds)."""
    with _running(tmp_path_factory.mktemp("agentnet-cli-fresh")) as net:
        yield net
