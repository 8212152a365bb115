"""An agent service process that is stopped and started again comes back as the same identity (#14).

A real hub subprocess and a real agent process (tests/system/lifecycle/agent_service.py) registering
with a credential file: it answers, is stopped (SIGTERM, or SIGKILL), a message arrives while
it is down, and the restarted process resumes as the same agent id with its A2A settings,
answers what it missed exactly once and repeats nothing. Unregistering frees the name.
"""

from __future__ import annotations

import json
import signal
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentsdk.a2a import A2ASettings
from agentsdk.network import EV_TEXT, Envelope, HubClient, HumanClient, Passport
from tests.eventually import assert_eventually
from tests.procs import ROOT, ServiceProcess, start_service

SCRIPT = Path(__file__).with_name("agent_service.py")


class AgentProcess:
    """A running agent_service.py and the lines it printed."""

    def __init__(self, target: str, credential_file: Path, log: Path, *flags: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), target, str(credential_file), str(log), *flags],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self._ready = threading.Event()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            if line.startswith(("ready ", "unregistered")):
                self._ready.set()
        self._ready.set()

    def ready(self, timeout: float = 30.0) -> dict[str, object]:
        """The JSON of its ready line (the process failed when it has none)."""
        self._ready.wait(timeout)
        for line in self.lines:
            if line.startswith("ready "):
                return dict(json.loads(line.removeprefix("ready ")))
        raise AssertionError("the agent process did not get ready:\n" + "".join(self.lines))

    def stop(self, sig: int) -> int:
        """Send ``sig``; the exit code."""
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=30)

    def wait(self) -> int:
        """The exit code once it ended on its own."""
        code = self.proc.wait(timeout=60)
        self._ready.wait(5)
        return code


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[ServiceProcess]:
    """The real hub service as a subprocess."""
    proc = start_service("hubsvc", ["--data-dir", str(tmp_path / "hub")], cwd=tmp_path)
    try:
        yield proc
    finally:
        proc.terminate()


def texts(log: Path) -> list[str]:
    """What the agent process handled, in order."""
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


async def echo_of(user: HumanClient, text: str) -> Envelope:
    """The agent's answer to ``text``."""
    return await user.next_envelope(
        predicate=lambda e: e.event_type == EV_TEXT and e.text == f"echo: {text}", timeout=30
    )


def saved_cursor(cursors: Path, channel_id: str) -> int:
    """The cursor the agent process saved for ``channel_id`` (0 until it saved its first one: the
    file does not exist before that)."""
    try:
        return int(json.loads(cursors.read_text()).get(channel_id, 0))
    except FileNotFoundError:
        return 0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
async def test_a_restarted_agent_process_resumes_its_identity_cursors_and_a2a_settings(
    sig: signal.Signals, tmp_path: Path, hub: ServiceProcess
) -> None:
    credential_file = tmp_path / "state" / "svc.credential"
    log = tmp_path / "handled.log"
    first = AgentProcess(hub.target, credential_file, log, "--a2a")
    agent_id = first.ready()["agent_id"]
    # The credential is private: 0600 in a 0700 directory the SDK created.
    assert stat.S_IMODE(credential_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(credential_file.parent.stat().st_mode) == 0o700
    async with HubClient.connect(hub.target) as hc:
        user = await hc.register_human(Passport(name="user", kind="human"))
        channel = await user.open(type="conversation", target="svc")
        one = await user.send(channel.channel_id, "one")
        await echo_of(user, "one")
        cursors = credential_file.with_name("svc.credential.cursors.json")
        # "one" counts as processed once its cursor is saved; stop the process after that.
        await assert_eventually(lambda: saved_cursor(cursors, channel.channel_id) >= one.seq, timeout=30)
        code = first.stop(sig)
        assert code == (0 if sig == signal.SIGTERM else -signal.SIGKILL), "".join(first.lines)
        if sig == signal.SIGTERM:
            assert first.lines[-1] == "stopped\n"

        await user.send(channel.channel_id, "two")  # while the agent is down: kept for it
        second = AgentProcess(hub.target, credential_file, log)  # no --a2a: the hub kept the settings
        resumed = second.ready()
        assert resumed["agent_id"] == agent_id
        assert A2ASettings.model_validate(resumed["a2a"]) == A2ASettings(enabled=True, skills=["echo"])
        await echo_of(user, "two")
        await user.send(channel.channel_id, "three")
        await echo_of(user, "three")
        # Everything handled exactly once, across both processes.
        assert texts(log) == ["one", "two", "three"]
        assert [a.agent_id for a in await hc.list_agents(query="svc")] == [agent_id]
        assert second.stop(signal.SIGTERM) == 0

        # Retiring the identity removes it from the hub and deletes the files; the name is free again.
        assert AgentProcess(hub.target, credential_file, log, "--unregister").wait() == 0
        assert not credential_file.exists() and not cursors.exists()
        assert await hc.list_agents(query="svc") == []
        fresh = AgentProcess(hub.target, credential_file, log)
        assert fresh.ready()["agent_id"] != agent_id
        assert fresh.stop(signal.SIGTERM) == 0
