"""The arbiter (docs/governance.md "The arbiter"): consulted, obeyed, fail closed, loaded by --arbiter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from agentnet.v1 import hub_pb2

from hubsvc.core.options import HubOptions
from netkernel.errors import RuleDenied
from tests.hubsvc.arbiters import Broken, Desk, Stuck
from tests.hubsvc.harness import assert_eventually, list_audit, open_channel, register, running_hub
from tests.procs import ROOT, start_service


def open_request(type: str, *targets: str) -> hub_pb2.OpenChannelRequest:
    return hub_pb2.OpenChannelRequest(type=type, targets=list(targets))


async def test_arbiter_sees_each_decision_and_its_refusals_are_rule_denied_and_audited(tmp_path: Path) -> None:
    desk = Desk()
    async with running_hub(tmp_path / "hub.db", arbiter=desk) as hub:
        with pytest.raises(RuleDenied, match="arbiter refuses this register: bots register through the operator"):
            await register(hub.target, "bot-1")
        a = await register(hub.target, "a", capabilities=["writing"])
        b = await register(hub.target, "b")
        for p in (a, b):
            await p.connect()
        with pytest.raises(RuleDenied, match="workflows need a ticket") as err:
            await a.rpc("OpenChannel", open_request("workflow", b.agent_id))
        assert err.value.metadata == {"rule": "arbiter", "check": "arbiter", "reason": "workflows need a ticket"}
        channel_id = await open_channel(a, "conversation", [b])
        with pytest.raises(RuleDenied, match="no secrets in channels"):
            await a.post(channel_id, "secret.plan", {})
        await a.post(channel_id, "ag2.msg.text", {"text": "hello"})
        opened = next(d for d in desk.seen if d.action == "open_channel" and d.channel_type == "conversation")
        assert (opened.actor_id, opened.actor_name, opened.actor_kind) == (a.agent_id, "a", "agent")
        assert opened.capabilities == ("writing",) and opened.targets == ("b",)
        posted = next(d for d in desk.seen if d.action == "post" and d.event_type == "ag2.msg.text")
        assert (posted.channel_id, posted.channel_type) == (channel_id, "conversation")

        async def rows() -> list[dict[str, str]]:
            found = [json.loads(r.detail_json) for r in await list_audit(hub, kind="action_refused")]
            found += [json.loads(r.detail_json) for r in await list_audit(hub, kind="post_refused")]
            assert len(found) == 3
            return found

        assert {(r.get("action", "post"), r["rule"]) for r in await assert_eventually(rows)} == {
            ("register", "arbiter"),
            ("open_channel", "arbiter"),
            ("post", "arbiter"),
        }


async def test_a_failing_or_stuck_arbiter_refuses(tmp_path: Path) -> None:
    async with running_hub(tmp_path / "broken.db", arbiter=Broken()) as hub:
        with pytest.raises(RuleDenied, match="arbiter failed while deciding") as err:
            await register(hub.target, "a")
        assert err.value.metadata["check"] == "arbiter.error"
    async with running_hub(tmp_path / "stuck.db", HubOptions(arbiter_timeout=0.1), arbiter=Stuck()) as hub:
        with pytest.raises(RuleDenied, match="did not decide in time") as err:
            await register(hub.target, "a")
        assert err.value.metadata["check"] == "arbiter.timeout"


async def test_hub_process_loads_the_arbiter_named_by_the_flag(tmp_path: Path) -> None:
    hub = start_service("hubsvc", ["--data-dir", str(tmp_path), "--arbiter", "tests.hubsvc.arbiters:DESK"], cwd=ROOT)
    try:
        with pytest.raises(RuleDenied, match="bots register through the operator"):
            await register(hub.target, "bot-7")
        a = await register(hub.target, "a")
        b = await register(hub.target, "b")
        with pytest.raises(RuleDenied, match="workflows need a ticket"):
            await a.rpc("OpenChannel", open_request("workflow", b.agent_id))
        await a.rpc("OpenChannel", open_request("conversation", b.agent_id))
    finally:
        assert hub.terminate() == 0


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--arbiter", "tests.hubsvc.arbiters:Nobody"], "has no attribute 'Nobody'"),
        (["--arbiter", "tests.hubsvc.arbiters"], "must be 'package.module:attribute'"),
        (["--arbiter", "no_such_module_here:x"], "cannot import 'no_such_module_here'"),
    ],
)
def test_an_unusable_arbiter_stops_the_hub_at_start(tmp_path: Path, flags: list[str], message: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "hubsvc", "--port", "0", "--data-dir", str(tmp_path), *flags],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0
    assert message in out.stderr
