"""The code examples in docs/ run as written against real services."""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from agentsdk.network import EV_TEXT, HubClient, Passport
from agentsdk.testing import ScriptedOpenAIServer
from tests.doc_examples import assert_example_prints_its_text, doc_text, fenced_blocks
from tests.procs import start_service


def python_blocks(doc: str) -> list[str]:
    """The ```python blocks of a markdown file."""
    return fenced_blocks(doc_text(doc), "python")


def test_hub_doc_example_runs(tmp_path: Path) -> None:
    hub = start_service("hubsvc", ["--data-dir", str(tmp_path)], cwd=tmp_path)
    try:
        script = tmp_path / "example.py"
        script.write_text(python_blocks("hub.md")[0])
        out = subprocess.run(
            [sys.executable, str(script)],
            env=dict(os.environ, AGENTNET_HUB=hub.target),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.splitlines() == ["You asked: What is a WAL?", "closed: consulting_complete"]
    finally:
        hub.terminate()


@pytest.mark.parametrize("doc", ["agents.md", "memory.md", "quickstart.md", "a2a.md", "mcp.md"])
def test_doc_example_runs_and_prints_what_the_doc_says(tmp_path: Path, doc: str) -> None:
    """The doc's first ```python block, run as a script, prints exactly its first ```text block."""
    assert_example_prints_its_text(doc_text(doc), tmp_path)


class ScriptProcess:
    """A docs example run as a script, and the lines it printed."""

    def __init__(self, script: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines: list[str] = []
        self._printed = threading.Condition()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._printed:
                self.lines.append(line)
                self._printed.notify_all()
        with self._printed:
            self._printed.notify_all()

    def first_line(self, timeout: float = 60.0) -> str:
        """The first line it printed (AssertionError with its output when it printed none)."""
        with self._printed:
            self._printed.wait_for(lambda: self.lines or self.proc.poll() is not None, timeout)
        assert self.lines, "the example printed nothing"
        return self.lines[0]


def test_quickstart_agent_service_comes_back_as_the_same_agent_after_a_restart(tmp_path: Path) -> None:
    """The quickstart's service block: stopped with SIGTERM and started again, it is the same agent."""
    hub = start_service("hubsvc", ["--data-dir", str(tmp_path / "hub")], cwd=tmp_path)
    script = tmp_path / "greeter.py"
    script.write_text(python_blocks("quickstart.md")[1])
    try:
        with ScriptedOpenAIServer(rule=lambda request: "Hello from the greeter.") as llm:
            env = dict(
                os.environ,
                AGENTNET_HUB=hub.target,
                AGENTNET_STATE=str(tmp_path / "state"),
                OPENAI_BASE_URL=llm.base_url,
                OPENAI_API_KEY="local",
            )

            async def consult(name: str) -> str:
                async with HubClient.connect(hub.target) as hc:
                    user = await hc.register_human(Passport(name=name, kind="human"))
                    channel = await user.open(type="consulting", target="greeter")
                    await channel.send("Hi!")
                    answer = await user.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=30)
                    return answer.text

            ids = []
            for visitor in ("ann", "bob"):
                service = ScriptProcess(script, env)
                first = service.first_line()
                assert first.startswith("greeter is serving as "), "".join(service.lines)
                ids.append(first.split()[-1])
                assert asyncio.run(consult(visitor)) == "Hello from the greeter."
                service.proc.send_signal(signal.SIGTERM)
                assert service.proc.wait(timeout=30) == 0, "".join(service.lines)
                assert service.lines[-1] == "stopped\n"
            assert ids[0] == ids[1]
            assert stat.S_IMODE((tmp_path / "state" / "greeter.credential").stat().st_mode) == 0o600
    finally:
        hub.terminate()


def test_a2a_langgraph_example_runs(tmp_path: Path) -> None:
    """docs/a2a.md's LangGraph example (an agentsdk.langgraph.App whose model, a local
    OpenAI-compatible server, routes through the A2A tools) runs as written from the directory
    holding its agent.yaml and prints the ```text block that follows it."""
    doc = doc_text("a2a.md")
    section = doc[doc.index("### A2A tools in a LangGraph agent") :]
    script_text = fenced_blocks(section, "python")[0]
    assert script_text.startswith("from agentsdk.langgraph import App\n") and "app.a2a_tools()" in script_text
    (tmp_path / "agent.yaml").write_text(fenced_blocks(section, "yaml")[0])
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTNET_HUB", "OPENAI_BASE_URL", "OPENAI_API_KEY")}
    assert_example_prints_its_text(section, tmp_path, env)


def test_the_in_process_client_example_runs(tmp_path: Path) -> None:
    doc = doc_text("network.md")
    assert_example_prints_its_text(doc[doc.index("### In-process client") :], tmp_path)
