"""examples/team/ runs as its README says, every member its own process, against real services (issue 41).

The services are what ``make serve`` starts (``python -m hubsvc`` and ``python -m knowledgesvc``
on embedded SQLite, one data dir), plus ``python -m ag2gateway``; the members are
``examples/team/members.py`` (the analyst with a tool, the scribe with its memory in the
knowledge service), the Go and TypeScript bridges' discussion_participant examples, and
``examples/team/ag2_member.py`` in the AG2 venv; ``examples/team/person.py`` opens the
discussion and asks the scribe. No model endpoint: every model is scripted.
"""

from __future__ import annotations

import json
import re
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentsdk.knowledge import RemoteKnowledgeStore
from tests.bridges.conftest import ROOT
from tests.procs import ServiceProcess, start_service

TEAM = ROOT / "examples" / "team"
AG2_PYTHON = ROOT / ".venv-ag2" / "bin" / "python"
TOPIC = "Ship the search feature by Friday?"
MEMBERS = ["team-analyst", "team-scribe", "team-go", "team-ts", "team-ag2"]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ServiceProcess, ServiceProcess, Path]]:
    """``make serve``'s two services on free ports, sharing one data dir: hub, knowledge, data dir."""
    data = tmp_path / "data"
    hub = start_service("hubsvc", ["--data-dir", str(data)], cwd=tmp_path)
    try:
        knowledge = start_service("knowledgesvc", ["--data-dir", str(data)], cwd=tmp_path)
        try:
            yield hub, knowledge, data
        finally:
            knowledge.terminate()
    finally:
        hub.terminate()


async def test_the_team_example_runs_against_real_services(
    served: tuple[ServiceProcess, ServiceProcess, Path],
    tmp_path: Path,
    go_bins: dict[str, Path],
    ts_examples: Path,
    launch: Any,
) -> None:
    if not AG2_PYTHON.exists():
        pytest.fail(f"{AG2_PYTHON} is missing: `make ag2-venv` installs AG2 1.2.1 there")
    hub, knowledge, data = served
    token_file = data / "knowledge.token"
    gateway = await launch(
        "ag2gateway",
        *(sys.executable, "-m", "ag2gateway", "--hub", hub.target, "--port", "0"),
        *("--secret-file", tmp_path / "gw.secret"),
    )
    listening = await gateway.wait_line(lambda s: s.startswith("ag2gateway listening "), timeout=60)
    gateway_url = json.loads(listening.removeprefix("ag2gateway listening "))["url"]

    members_argv = (
        *(sys.executable, TEAM / "members.py", "--hub", hub.target),
        *("--knowledge", knowledge.target, "--knowledge-token-file", token_file, "--state-dir", tmp_path / "team"),
    )
    members = await launch("members.py", *members_argv)
    ag2 = await launch("ag2_member.py", AG2_PYTHON, TEAM / "ag2_member.py", "--gateway", gateway_url)
    go = await launch("go member", go_bins["discussion_participant"], "--hub", hub.target, "--name", "team-go")
    ts_example = ts_examples / "discussion_participant.js"
    ts = await launch("ts member", "node", ts_example, "--hub", hub.target, "--name", "team-ts")
    await members.wait_line(lambda s: s == "ready team-analyst team-scribe", timeout=60)
    await ag2.wait_line(lambda s: s.startswith("ready team-ag2 "), timeout=60)
    await go.wait_event(lambda e: e["event"] == "ready", timeout=60)
    await ts.wait_line(lambda s: s.startswith("registered team-ts"), timeout=60)

    person = await launch("person.py", sys.executable, TEAM / "person.py", "--hub", hub.target, TOPIC)
    assert await person.wait_exit(120) == 0, person.describe()
    lines = person.lines
    turns = [re.match(r"\[([^\]]+)\] (.*)", line) for line in lines[: len(MEMBERS) + 1]]
    assert all(turns), person.describe()
    spoken = [(m[1], m[2]) for m in turns if m]
    # Everyone spoke once, in the order the person gave: the person opens, then each member.
    assert [who for who, _ in spoken] == ["team-person", *MEMBERS], person.describe()
    said = dict(spoken)
    assert said["team-person"] == f"Topic: {TOPIC}"
    assert re.fullmatch(r"analyst: my estimate is \d+ person-days\.", said["team-analyst"]), said
    assert said["team-scribe"] == "scribe: noted; I will remember this discussion."
    assert said["team-go"].startswith('go-agent round 1: team-go heard "scribe: noted'), said
    assert said["team-ts"].startswith('ts-agent round 1: team-ts heard "go-agent round 1'), said
    assert said["team-ag2"] == "ag2 member: agreed (from AG2 via the gateway).", said
    assert lines[len(MEMBERS) + 1] == "closed: max_turns", person.describe()

    # The tool ran in the members' process, and the analyst's turn reports what it returned.
    [call] = [line for line in members.lines if line.startswith("tool estimate(")]
    assert call.endswith(said["team-analyst"].removeprefix("analyst: my estimate is ").removesuffix("."))

    # The scribe's memory is in the knowledge service, and the scribe answered the person from it.
    async with RemoteKnowledgeStore(
        knowledge.target, namespace="team-scribe", credential=token_file.read_text().strip()
    ) as store:
        memory = await store.read("/memory/working.md")
    assert TOPIC in memory and "analyst: my estimate is" in memory, memory
    cli = await launch(
        "agentnet knowledge cat",
        *(ROOT / ".venv" / "bin" / "agentnet", "--knowledge", knowledge.target),
        *("--knowledge-token-file", token_file, "--namespace", "team-scribe", "knowledge", "cat", "/memory/working.md"),
    )
    assert await cli.wait_exit(60) == 0, cli.describe()
    assert "\n".join(cli.lines).strip() == memory.strip(), cli.describe()
    # The README shows what the person and the members print.
    person_block, members_block = re.findall(r"```text\n(.*?)```", (TEAM / "README.md").read_text(), re.DOTALL)[:2]
    assert lines[: len(MEMBERS) + 3] == person_block.splitlines(), person.describe()
    for line in members_block.splitlines():  # memory lines come from a Watch stream: may lag a little
        await members.wait_line(lambda s, want=line: s == want, timeout=15)
    answer = lines[len(MEMBERS) + 2]
    assert answer.startswith("[team-scribe -> team-person] scribe: from my notes: "), person.describe()
    assert TOPIC in answer and "analyst: my estimate is" in answer, answer

    # The person unregistered: it runs again against the same team, and the scribe now speaks from
    # the memory the first discussion left in the knowledge service.
    again = await launch("person.py again", sys.executable, TEAM / "person.py", "--hub", hub.target, "Rename it?")
    assert await again.wait_exit(120) == 0, again.describe()
    [scribe_turn] = [line for line in again.lines if line.startswith("[team-scribe] ")]
    assert scribe_turn.startswith("[team-scribe] scribe: from my notes: ") and TOPIC in scribe_turn, again.describe()
    assert "closed: max_turns" in again.lines

    for member in (members, ag2, go, ts):  # Ctrl-C stops the long-running members cleanly
        member.proc.send_signal(signal.SIGINT)
        assert await member.wait_exit(30) == 0, member.describe()
        assert not [line for line in member.stderr if "Traceback" in line], member.describe()
    # Started again, members.py resumes its two identities from its credential files.
    restarted = await launch("members.py again", *members_argv)
    await restarted.wait_line(lambda s: s == "ready team-analyst team-scribe", timeout=60)
    restarted.proc.send_signal(signal.SIGINT)
    assert await restarted.wait_exit(30) == 0, restarted.describe()
