"""The examples of docs/governance.md (the parts about rules, registration and the arbiter) run as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from agentnet.v1 import hub_pb2

from hubsvc.governance.policy import Policy, load_policy
from netkernel.errors import RuleDenied
from tests.hubsvc.harness import open_channel, register
from tests.procs import ROOT, start_service

DOC = ROOT / "docs" / "governance.md"


def section(heading: str, level: int = 2) -> str:
    """The text of one ``## heading`` section (``level`` 3: ``### heading``) of docs/governance.md."""
    text = DOC.read_text(encoding="utf-8")
    marks = "#" * level
    start = text.index(f"\n{marks} {heading}\n")
    ends = [i for i in (text.find(f"\n{'#' * n} ", start + 1) for n in range(2, level + 1)) if i != -1]
    return text[start : min(ends) if ends else len(text)]


def blocks(heading: str, lang: str, level: int = 2) -> list[str]:
    """The fenced ``lang`` blocks of a section."""
    return re.findall(rf"```{lang}\n(.*?)```", section(heading, level), re.DOTALL)


def test_the_policy_file_example_is_a_valid_policy(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(blocks("The policy file", "yaml")[0])
    policy = load_policy(path)
    assert policy == Policy.model_validate(yaml.safe_load(path.read_text()))
    (interns,) = policy.rules
    assert interns.id == "interns" and interns.rule.access is not None
    assert interns.rule.access.channel_types == ("consulting",)


def test_the_own_rule_example_prints_what_the_doc_says(tmp_path: Path) -> None:
    """The "own rule" example, run as a script beside the policy file example, prints its ```text block."""
    (tmp_path / "policy.yaml").write_text(blocks("The policy file", "yaml")[0])
    script = tmp_path / "example.py"
    script.write_text(blocks("An identity's own rule", "python", 3)[0])
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout == blocks("An identity's own rule", "text", 3)[-1]


async def test_the_access_refusals_the_doc_quotes_are_what_the_hub_says(tmp_path: Path) -> None:
    quoted = blocks("Rules", "text")[0].splitlines()
    policy = tmp_path / "policy.yaml"
    policy.write_text(blocks("The policy file", "yaml")[0])
    hub = start_service("hubsvc", ["--data-dir", str(tmp_path), "--policy", str(policy)], cwd=tmp_path)
    try:
        intern = await register(hub.target, "intern-ann")
        bob = await register(hub.target, "bob")
        messages = []
        for type in ("conversation", "consulting"):
            with pytest.raises(RuleDenied) as err:
                await intern.rpc("OpenChannel", hub_pb2.OpenChannelRequest(type=type, targets=[bob.agent_id]))
            messages.append(err.value.message)
        assert messages == quoted
    finally:
        assert hub.terminate() == 0


async def test_the_arbiter_example_loads_with_the_flag_and_refuses_what_it_says(tmp_path: Path) -> None:
    (tmp_path / "payments_arbiter.py").write_text(blocks("The arbiter", "python")[0])
    flag = re.search(r"--arbiter (\S+)`", section("The arbiter"))
    assert flag is not None and flag.group(1) == "payments_arbiter:PaymentsDesk"
    hub = start_service("hubsvc", ["--data-dir", str(tmp_path), "--arbiter", flag.group(1)], cwd=tmp_path)
    try:
        clerk = await register(hub.target, "clerk")
        cashier = await register(hub.target, "cashier", capabilities=["payments"])
        for p in (clerk, cashier):
            await p.connect()
        channel_id = await open_channel(clerk, "conversation", [cashier])
        with pytest.raises(RuleDenied, match=r"only the payments team posts payments\.\* events") as err:
            await clerk.post(channel_id, "payments.refund", {"amount": 5})
        assert err.value.metadata["rule"] == "arbiter"
        await clerk.post(channel_id, "ag2.msg.text", {"text": "please refund"})
        await cashier.post(channel_id, "payments.refund", {"amount": 5})
        for p in (clerk, cashier):
            await p.close()
    finally:
        assert hub.terminate() == 0
