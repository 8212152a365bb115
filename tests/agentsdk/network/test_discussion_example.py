"""examples/discussion.py runs as its own process: a discussion opened from Python, one round."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from agentsdk.testing import ScriptedOpenAIServer

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "discussion.py"


def run(env: dict[str, str]) -> str:
    out = subprocess.run(
        [sys.executable, str(EXAMPLE), "Tabs or spaces?"], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_one_round_over_the_real_openai_client() -> None:
    def rule(request: dict[str, Any]) -> str:
        system = request["messages"][0]["content"]
        return "Tabs." if "tabs" in system else "Spaces."

    with ScriptedOpenAIServer(rule=rule, api_key="sk-test", models=["gpt-test"]) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
        env.update(OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="sk-test", OPENAI_MODEL="gpt-test")
        lines = run(env).splitlines()
        assert len(server.requests) == 2  # one turn each: the round ends the channel
    assert lines[0].startswith("refused: discussion channels have no knob 'rounds' (did you mean 'max_rounds'?)")
    assert [line.split("] ", 1)[1] for line in lines[1:3]] == ["Tabs.", "Spaces."]
    assert lines[1].startswith("[ada-") and lines[2].startswith("[bob-")
    assert lines[3] == "closed: max_turns"
