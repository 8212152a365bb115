"""The ``agentnet`` command against a real hub and knowledge service with real data: each command's
table and ``--json``, live ``tail`` / ``audit --follow`` / ``knowledge watch`` as subprocesses, and
the refusals (no token, a wrong token, an agent credential on an operator read, unknown ids, an
unreachable hub), each with its reason, a hint and a non-zero exit status."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from agentsdk.cli.app import PROGRESS_AT
from agentsdk.network import HubClient, Passport
from tests.agentsdk.cli.conftest import Network
from tests.hubsvc.harness import EV_TEXT, make_envelope, open_channel, register
from tests.procs import ROOT


def _json(result: Any) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _ok(result: Any) -> str:
    assert result.exit_code == 0, result.output
    return str(result.stdout)


def test_status_shows_health_store_and_counts(network: Network) -> None:
    out = _ok(network.run("status"))
    assert out.count(": serving") == 2  # hub and knowledge service
    assert "sqlite" in out and str(network.data_dir / "hub.db") in out
    assert "4 (0 online)" in out  # alice, bob, caller, callee; none connected now
    assert "opened 1" in out
    data = _json(network.run("status", "--json"))
    assert data["health"] == {"hub": "serving", "knowledge": "serving"}
    assert (data["store_kind"], data["identities"], data["running_tasks"]) == ("sqlite", "4", "1")


def test_agents_and_channels_and_tasks(network: Network) -> None:
    out = _ok(network.run("agents"))
    assert all(name in out for name in ("alice", "bob", "caller", "callee"))
    assert [a["name"] for a in _json(network.run("agents", "--json"))] == ["alice", "bob", "callee", "caller"]
    assert [a["name"] for a in _json(network.run("agents", "--limit", "1", "--json"))] == ["alice"]

    out = _ok(network.run("channels"))
    assert network.channel_id in out and "alice, bob" in out and "say hello" in out
    opened = _json(network.run("channels", "--state", "opened", "--type", "conversation", "--json"))
    assert [c["channel_id"] for c in opened] == [network.channel_id]
    assert _json(network.run("channels", "--type", "discussion", "--json")) == []
    closed = _json(network.run("channels", "--state", "closed", "--json"))  # the A2A call's consulting channel
    assert [c["type"] for c in closed] == ["consulting"]

    out = _ok(network.run("tasks"))
    assert network.task_id in out and "write the report" in out and "running" in out
    assert "alice" in out and network.names["alice"] not in out  # the owner by name
    [task] = _json(network.run("tasks", "--json"))
    assert (task["task_id"], task["state"]) == (network.task_id, "TASK_STATE_RUNNING")


def test_describe_a_channel_a_task_and_an_agent(network: Network) -> None:
    out = _ok(network.run("describe", network.channel_id))
    assert "alice (initiator, acked), bob (target, acked)" in out
    assert "whose turn" in out and "conversation" in out and "opened" in out
    described = _json(network.run("describe", network.channel_id, "--json"))
    assert described["kind"] == "channel" and described["channel"]["live"] is True
    task = _ok(network.run("describe", network.task_id))
    assert "write the report" in task and f"alice ({network.names['alice']})" in task
    assert "TASK_STATE" not in task and "running" in task
    agent = _json(network.run("describe", "bob", "--json"))
    assert (agent["kind"], agent["agent"]["agent_id"]) == ("agent", network.names["bob"])


def test_wal_dumps_every_envelope_by_event_type(network: Network) -> None:
    out = _ok(network.run("wal", network.channel_id))
    assert "── opened" in out and "alice: hello bob" in out and "bob: hi alice" in out
    lines = _ok(network.run("wal", network.channel_id, "--json")).splitlines()
    envelopes = [json.loads(line) for line in lines]
    texts = [e["event_data"]["text"] for e in envelopes if e["event_type"] == "ag2.msg.text"]
    assert texts == ["hello bob", "hi alice"]
    assert [e["seq"] for e in envelopes] == [str(i) for i in range(1, len(envelopes) + 1)]
    later = [
        json.loads(line)
        for line in _ok(network.run("wal", network.channel_id, "--from-seq", "5", "--json")).splitlines()
    ]
    assert later[0]["seq"] == "5"


def test_audit_and_calls(network: Network) -> None:
    out = _ok(network.run("audit", "--kind", "agent_registered"))
    assert "agent_registered" in out and network.names["alice"] in out
    records = _json(network.run("audit", "--kind", "agent_registered", "--json"))
    assert [r["detail"]["name"] for r in records][:2] == ["alice", "bob"]

    out = _ok(network.run("calls", "cli-session"))
    assert "A2A calls of cli-session" in out and "caller → callee" in out and "completed" in out
    tree = _json(network.run("calls", "cli-session", "--json"))
    [execution] = tree["executions"]
    by_id = _json(network.run("calls", execution["execution_id"], "--json"))
    assert [e["execution_id"] for e in by_id["executions"]] == [execution["execution_id"]]


def test_knowledge_put_ls_cat_rm(network: Network) -> None:
    assert "wrote drafts/plan.md" in _ok(network.run("knowledge", "put", "drafts/plan.md", input="step one\n"))
    assert _ok(network.run("knowledge", "ls", "drafts")).split() == ["plan.md"]
    assert _json(network.run("knowledge", "ls", "drafts", "--json")) == ["plan.md"]
    assert _ok(network.run("knowledge", "cat", "drafts/plan.md")) == "step one\n"
    assert _json(network.run("knowledge", "cat", "drafts/plan.md", "--json"))["content"] == "step one\n"
    assert "deleted drafts/plan.md" in _ok(network.run("knowledge", "rm", "drafts/plan.md"))
    missing = network.run("knowledge", "cat", "drafts/plan.md")
    assert missing.exit_code == 5 and "NOT_FOUND" in missing.stderr


def test_knowledge_watch_prints_changes(network: Network, tmp_path: Path) -> None:
    watch = network.spawn("knowledge", "watch", "watched", "--json")
    try:
        watch.wait_for(lambda line: line.startswith("watching"), "the watch confirmation", stderr=True)
        source = tmp_path / "f.txt"
        source.write_text("x")
        _ok(network.run("knowledge", "put", "watched/f.txt", str(source)))
        line = watch.wait_for(lambda line: "watched/f.txt" in line, "the change")
        assert json.loads(line)["kind"] == "CHANGE_KIND_WRITTEN"
    finally:
        watch.stop()


def test_tail_shows_a_message_posted_through_the_sdk(fresh_network: Network) -> None:
    tail = fresh_network.spawn("tail", fresh_network.channel_id, "--json")
    plain = fresh_network.spawn(
        "--credential-file", str(fresh_network.bob_credential_file), "tail", fresh_network.channel_id
    )
    try:
        tail.wait_for(lambda line: "hi alice" in line, "the stored envelopes")
        plain.wait_for(lambda line: "hi alice" in line, "bob's view of the stored envelopes")

        async def post() -> None:
            async with HubClient.connect(fresh_network.hub.target) as hub:
                bob = await hub.register_human(
                    Passport(name="bob", kind="human"), credential_file=fresh_network.bob_credential_file
                )
                await bob.send(fresh_network.channel_id, "live from the SDK")

        asyncio.run(post())
        line = tail.wait_for(lambda line: "live from the SDK" in line, "the new message")
        envelope = json.loads(line)
        assert (envelope["sender_id"], envelope["event_data"]["text"]) == (
            fresh_network.names["bob"],
            "live from the SDK",
        )
        plain.wait_for(lambda line: "live from the SDK" in line, "the new message in bob's view")
    finally:
        assert tail.stop() == 130
        plain.stop()


def test_audit_follow_prints_new_records(fresh_network: Network) -> None:
    follow = fresh_network.spawn("audit", "--follow", "--kind", "agent_registered")
    try:
        follow.wait_for(
            lambda line: "agent_registered" in line and fresh_network.names["alice"] in line, "alice's record"
        )
        dave = asyncio.run(register(fresh_network.hub.target, "dave"))
        follow.wait_for(lambda line: dave.agent_id in line, "dave's registration")
    finally:
        follow.stop()


def test_refusals_say_why_and_what_to_do(network: Network, tmp_path: Path) -> None:
    no_token = network.run("channels", env={"AGENTNET_DATA_DIR": str(tmp_path)})
    assert no_token.exit_code == 2
    assert "cannot read the operator token" in no_token.stderr and "--token-file" in no_token.stderr

    wrong = network.run("channels", env={"AGENTNET_DATA_DIR": str(tmp_path), "AGENTNET_OPERATOR_TOKEN": "wrong"})
    assert wrong.exit_code == 4 and "UNAUTHENTICATED" in wrong.stderr and "hint:" in wrong.stderr

    for args in (["audit"], ["audit", "--follow"]):
        as_agent = network.run("--credential-file", str(network.bob_credential_file), *args)
        assert as_agent.exit_code == 4 and "operator only" in as_agent.stderr, args
        assert "--token-file" in as_agent.stderr and "Traceback" not in as_agent.output, args

    for args in (["wal", "no-such-channel"], ["describe", "nothing-here"], ["calls", "no-such-call"]):
        unknown = network.run(*args)
        assert unknown.exit_code == 5 and "NOT_FOUND" in unknown.stderr, args

    bad_state = network.run("channels", "--state", "sleeping")
    assert bad_state.exit_code == 2 and "unknown channel state 'sleeping'" in bad_state.stderr

    down = network.run("agents", env={"AGENTNET_HUB": "127.0.0.1:1"})
    assert down.exit_code == 3 and "is the hub running at 127.0.0.1:1" in down.stderr


def test_the_operations_doc_examples_run(network: Network, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every command line of docs/operations.md's agentnet section runs (the live ones print, then stop),
    in a directory of its own (`backup` and `export` write files there)."""
    monkeypatch.chdir(tmp_path)
    doc = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    section = doc.split("## The agentnet command line", 1)[1].split("\n## ", 1)[0]
    block = re.findall(r"```bash\n(.*?)```", section, re.DOTALL)[0]
    commands = [line for line in block.splitlines() if line.strip()]
    assert len(commands) >= 10
    for line in commands:
        args = shlex.split(line.replace("$CHANNEL", network.channel_id).replace("$TASK", network.task_id))
        assert args[0] == "agentnet", line
        if "tail" in args or "--follow" in args or "watch" in args:
            live = network.spawn(*args[1:])
            try:
                live.wait_for(lambda _line: True, line, stderr="watch" in args)
            finally:
                live.stop()
            continue
        result = network.run(*args[1:])
        assert result.exit_code == 0, (line, result.output)
        assert result.stdout.strip(), line


def test_wal_dumps_a_large_wal_in_order(fresh_network: Network) -> None:
    """A WAL past the progress-bar threshold (the bar goes to stderr) is dumped whole, in seq order."""

    async def fill() -> str:
        alice = await register(fresh_network.hub.target, "writer")
        bob = await register(fresh_network.hub.target, "reader")
        await alice.connect()
        await bob.connect()
        channel_id = await open_channel(alice, "conversation", [bob])
        try:
            envelopes = [make_envelope(channel_id, EV_TEXT, {"text": f"line {i}"}) for i in range(PROGRESS_AT + 50)]
            for start in range(0, len(envelopes), 200):
                results = await alice.post_batch(envelopes[start : start + 200])
                assert all(r.WhichOneof("result") == "envelope" for r in results)
        finally:
            await alice.close()
            await bob.close()
        return channel_id

    channel_id = asyncio.run(fill())
    lines = _ok(fresh_network.run("wal", channel_id, "--json")).splitlines()
    texts = [json.loads(line)["event_data"].get("text") for line in lines]
    assert [t for t in texts if t] == [f"line {i}" for i in range(PROGRESS_AT + 50)]


def test_an_agent_credential_shows_that_agents_view(network: Network) -> None:
    """With bob's credential every command an agent may use answers as the hub answers bob: his
    identity, the identities he may see, his channels (named, not by id), call trees he took no part
    in refused with what to do instead."""
    as_bob = ["--credential-file", str(network.bob_credential_file)]
    status = _json(network.run(*as_bob, "status", "--json"))
    assert status["health"] == {"hub": "serving", "knowledge": "serving"}
    assert (status["agent"]["agent_id"], status["live_channels"]) == (network.names["bob"], {"opened": 1})
    assert "bob" in _ok(network.run(*as_bob, "status"))

    assert {"alice", "bob"} <= {a["name"] for a in _json(network.run(*as_bob, "agents", "--json"))}
    assert [c["channel_id"] for c in _json(network.run(*as_bob, "channels", "--json"))] == [network.channel_id]
    assert _json(network.run(*as_bob, "channels", "--state", "closed", "--json")) == []  # the A2A channel is not his
    assert _json(network.run(*as_bob, "tasks", "--json")) == []  # alice's task is in no channel of his
    described = _json(network.run(*as_bob, "describe", network.channel_id, "--json"))
    assert described["kind"] == "channel" and described["channel"]["live"] is True
    assert "alice (initiator, acked), bob (target, acked)" in _ok(network.run(*as_bob, "describe", network.channel_id))
    assert _json(network.run(*as_bob, "describe", "alice", "--json"))["agent"]["agent_id"] == network.names["alice"]
    assert "write the report" in _ok(network.run(*as_bob, "describe", network.task_id))

    out = _ok(network.run(*as_bob, "wal", network.channel_id))
    assert "alice: hello bob" in out and "bob: hi alice" in out  # names, not ids

    not_his = network.run(*as_bob, "calls", "cli-session")
    assert not_his.exit_code == 4 and "PERMISSION_DENIED" in not_his.stderr and "hint:" in not_his.stderr


def test_knowledge_refusals_say_what_to_do(network: Network, tmp_path: Path) -> None:
    missing_source = network.run("knowledge", "put", "drafts/x.md", str(tmp_path / "no-such-file"))
    assert missing_source.exit_code == 2 and "cannot read" in missing_source.stderr
    assert missing_source.exception is None or isinstance(missing_source.exception, SystemExit)
    missing = network.run("knowledge", "cat", "drafts/never-written.md")
    assert missing.exit_code == 5 and "knowledge ls" in missing.stderr and "channels" not in missing.stderr


def test_audit_shows_the_newest_records_unless_asked_for_older(network: Network) -> None:
    every = _json(network.run("audit", "--after", "0", "--limit", "10000", "--json"))
    assert len(every) > 3
    newest = _json(network.run("audit", "--limit", "2", "--json"))
    assert [r["audit_id"] for r in newest] == [r["audit_id"] for r in every[-2:]]
    oldest = _json(network.run("audit", "--after", "0", "--limit", "2", "--json"))
    assert [r["audit_id"] for r in oldest] == [r["audit_id"] for r in every[:2]]
    registered = [r for r in every if r["kind"] == "agent_registered"]
    newest_of_kind = _json(network.run("audit", "--kind", "agent_registered", "--limit", "1", "--json"))
    assert [r["audit_id"] for r in newest_of_kind] == [registered[-1]["audit_id"]]
    bad = network.run("audit", "--limit", "0")
    assert bad.exit_code == 2 and "--limit 0 is out of range" in bad.stderr
