"""The ``agentnet`` command's rough edges (issue 41): global options after the subcommand, ids whole in
piped output, and the whose-turn column of ``channels`` (operator and agent view)."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys

from typer._click.core import Context
from typer.main import get_command

from agentsdk.cli.anywhere import hoist
from agentsdk.cli.app import app
from agentsdk.network import HubClient, Passport
from tests.agentsdk.cli.conftest import Network


def _ok(result: object) -> str:
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    return str(result.stdout)  # type: ignore[attr-defined]


def test_global_options_work_after_the_subcommand(network: Network) -> None:
    nowhere = {"AGENTNET_HUB": "127.0.0.1:9", "AGENTNET_KNOWLEDGE": "127.0.0.1:9"}
    # the environment points nowhere; options after the (sub)command point at the services
    listed = network.run("knowledge", "ls", "notes", "--knowledge", network.knowledge.target, env=nowhere)
    assert _ok(listed).split() == ["readme.md"]
    read = network.run(
        "knowledge", "cat", "notes/readme.md", "--namespace", "default", f"--knowledge={network.knowledge.target}"
    )
    assert _ok(read) == "what the agents know\n"
    out = _ok(network.run("channels", "--json", "--hub", network.hub.target, "--timeout", "10", env=nowhere))
    assert network.channel_id in out
    # an option before the subcommand still works, and the last one given wins
    assert network.channel_id in _ok(network.run("--hub", "127.0.0.1:9", "channels", "--hub", network.hub.target))
    # a flag (no value) after the subcommand: --tls towards a plaintext hub fails as TLS does
    tls = network.run("channels", "--tls", "--timeout", "2")
    assert tls.exit_code == 3 and "UNAVAILABLE" in tls.stderr
    # a subcommand's --help stays its own
    assert "List a directory." in _ok(network.run("knowledge", "ls", "--help"))


def test_hoist_moves_only_the_groups_options_and_stops_at_double_dash() -> None:
    group = get_command(app)
    params = group.get_params(Context(group))
    args = ["knowledge", "put", "a.md", "--namespace", "x", "--tls", "--json", "--", "--hub", "h"]
    moved = ["--namespace", "x", "--tls", "knowledge", "put", "a.md", "--json", "--", "--hub", "h"]
    assert hoist(args, params) == moved


def test_no_subcommand_has_an_option_named_like_a_global_one() -> None:
    """Hoisting would steal it: a subcommand must not reuse a global option's name."""
    group = get_command(app)
    ctx = Context(group)
    global_names = {o for p in group.get_params(ctx) for o in getattr(p, "opts", []) if o != "--help"}
    clashes = []

    def walk(command: object, path: str) -> None:
        for name, sub in getattr(command, "commands", {}).items():
            for p in sub.get_params(Context(sub)):
                clashes.extend(f"{path} {name} {o}" for o in getattr(p, "opts", []) if o in global_names)
            walk(sub, f"{path} {name}")

    walk(group, "agentnet")
    assert global_names >= {"--hub", "--namespace", "--credential-file", "--tls", "--timeout"}
    assert clashes == []


def test_piped_output_keeps_ids_whole_and_channels_say_whose_turn(fresh_network: Network) -> None:
    network = fresh_network

    async def open_discussion() -> str:
        async with HubClient.connect(network.hub.target) as hub:
            carol = await hub.register_human(Passport(name="carol", kind="human"))
            await hub.register_human(Passport(name="dave", kind="human"))
            channel = await carol.open(type="discussion", target="dave", intent="plan")
            return channel.channel_id

    discussion = asyncio.run(open_discussion())
    # CliRunner's stdout is not a terminal: a narrow COLUMNS must not wrap or cut a 32-character id
    out = _ok(network.run("channels", env={"COLUMNS": "40"}))
    lines = out.splitlines()
    for channel_id in (discussion, network.channel_id):
        assert len(channel_id) >= 32
        [row] = [line for line in lines if channel_id in line]
        if channel_id == discussion:
            assert re.search(r"\bcarol\b.*\bcarol, dave\b", row), row  # whose turn: the opener, by name
        else:
            assert "anyone" in row  # a conversation expects no one in particular
    header = next(line for line in lines if "whose turn" in line)
    assert header.index("whose turn") < header.index("participants")
    # the agent view (bob's credential) has the column too
    agent_out = _ok(network.run("channels", "--credential-file", str(network.bob_credential_file)))
    [row] = [line for line in agent_out.splitlines() if network.channel_id in line]
    assert "anyone" in row


def test_run_as_a_module_it_has_every_command() -> None:
    """``python -m agentsdk.cli.app`` lists the commands other modules register (backup, export, mcp)."""
    listed = subprocess.run(
        [sys.executable, "-m", "agentsdk.cli.app", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert listed.returncode == 0, listed.stderr
    commands = {
        line.split()[1] for line in listed.stdout.splitlines() if line.startswith("│ ") and len(line.split()) > 2
    }
    assert {"backup", "export", "mcp", "knowledge", "channels"} <= commands, listed.stdout
