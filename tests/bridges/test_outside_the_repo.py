"""The bridges used from a project outside the repository, by the recipes of their READMEs (issue 41).

Go: ``tests/bridges/outside/go`` (a module of its own) is copied to a temp dir and built after
the one step ``go work init . <repo>/bridges/go``. TypeScript: ``bridges/ts`` is packed with
``npm pack`` (its ``prepack`` compiles ``lib/``), ``tests/bridges/outside/ts`` is copied to a temp
dir, installs the tarball (``npm install ./agent-network-bridge-ts-<version>.tgz``),
type-checks against its ``.d.ts`` by package name and imports it from an ES module too. Both then
answer a consulting question on a real hub. The builds run before the hub starts (``subprocess.run``
would block its loop).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest

from agentsdk.network import EV_TEXT, Hub, Passport
from tests.bridges.conftest import GO_DIR, ROOT, TS_DIR, _run

OUTSIDE = ROOT / "tests" / "bridges" / "outside"
NPM_QUIET = ("--no-audit", "--no-fund", "--loglevel=error")


@pytest.fixture(scope="module")
def go_outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The outside Go module, built by the README's one step: the binary."""
    project = tmp_path_factory.mktemp("go-outside") / "outside-agent"
    shutil.copytree(OUTSIDE / "go", project)
    assert not project.is_relative_to(ROOT)
    recipe = "go work init . /path/to/agent-network/bridges/go"
    assert f"```sh\n{recipe}\n```" in (GO_DIR / "README.md").read_text()  # the step this test takes
    _run(recipe.replace("/path/to/agent-network/bridges/go", str(GO_DIR)).split(), project, "the README's go work init")
    _run(["go", "build", "-o", "outside-agent", "."], project, "go build of the outside module")
    return project / "outside-agent"


@pytest.fixture(scope="module")
def ts_outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bridges/ts packed, installed into the outside project by name and compiled: the script to run."""
    packs = tmp_path_factory.mktemp("ts-pack")
    _run(["npm", "pack", "--pack-destination", str(packs), *NPM_QUIET], TS_DIR, "npm pack in bridges/ts")
    [tarball] = packs.glob("agent-network-bridge-ts-*.tgz")
    with tarfile.open(tarball) as tar:
        names = set(tar.getnames())
    manifest = json.loads((TS_DIR / "package.json").read_text())
    for entry in ("types", "default"):
        assert "package/" + manifest["exports"]["."][entry].removeprefix("./") in names
    assert not [n for n in names if "/test/" in n or "/examples/" in n or n.endswith(".map")], sorted(names)

    project = tmp_path_factory.mktemp("ts-outside") / "outside-agent"
    shutil.copytree(OUTSIDE / "ts", project)
    local = project / tarball.name
    shutil.copy(tarball, local)
    readme = (TS_DIR / "README.md").read_text()
    assert f"npm install ./{tarball.name}\n" in readme and 'from "@agent-network/bridge-ts"' in readme
    _run(["npm", "install", "--prefer-offline", *NPM_QUIET, f"./{local.name}"], project, "npm install of the tarball")
    installed = project / "node_modules" / "@agent-network" / "bridge-ts"
    assert not (installed / "src").exists() and (installed / "lib").is_dir()
    _run(["npm", "run", "build", "--silent"], project, "tsc of the outside project against the package's types")
    esm = subprocess.run(["node", "esm.mjs"], cwd=project, capture_output=True, text=True, timeout=60, check=False)
    assert (esm.returncode, esm.stdout) == (0, "function ag2.msg.text\n"), esm.stderr  # import works as require does
    return project / "out" / "index.js"


async def consult(hub: Hub, agent: Any, name: str, question: str) -> str:
    """Ask the outside agent ``name`` one question in a consulting channel; its reply's text."""
    ready = await agent.wait_event(lambda e: e["event"] == "ready", timeout=30)
    user = await hub.register_human(Passport(name=f"asker-of-{name}", kind="human"))
    ch = await user.open(type="consulting", target=name)
    asked = await user.send(ch.channel_id, question)
    reply = await user.next_envelope(
        predicate=lambda e: e.channel_id == ch.channel_id and e.event_type == EV_TEXT, timeout=30
    )
    assert reply.sender_id == ready["agent_id"] and reply.causation_id == asked.envelope_id
    assert await agent.wait_exit(30) == 0, agent.describe()
    return str(reply.text)


async def test_a_go_module_outside_the_repo_builds_against_the_bridge_and_answers(
    hub: Hub, go_outside: Path, launch: Any
) -> None:
    agent = await launch("outside go", go_outside, "--hub", hub.target, "--name", "outside-go")
    assert await consult(hub, agent, "outside-go", "hello from python") == "outside-go: hello from python"
    [ready] = [e for e in agent.events if e["event"] == "ready"]
    assert ready["service"] == "agentnet.v1.HubService"  # the generated gen/go stubs, imported directly


async def test_the_packed_ts_bridge_installs_outside_the_repo_and_answers(
    hub: Hub, ts_outside: Path, launch: Any
) -> None:
    agent = await launch("outside ts", "node", ts_outside, hub.target, "outside-ts")
    assert await consult(hub, agent, "outside-ts", "hello from python") == "outside-ts: hello from python"
