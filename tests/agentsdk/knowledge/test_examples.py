"""examples/journal_companion.py and examples/long_doc_chat.py run as separate processes.

The journal test is the cross-process memory test: the working memory written after
conversation 1 (process 1) reaches the system prompt of conversation 2 (process 2), over
the real openai client speaking HTTP to a ScriptedOpenAIServer.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from agentsdk.testing import ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parents[3]
JOURNAL = ROOT / "examples" / "journal_companion.py"
LONG_DOC = ROOT / "examples" / "long_doc_chat.py"
FACT = "I'm Ada; I walked by the river."


def offline_env() -> dict[str, str]:
    """The environment without any OPENAI_* variable (the examples then use their scripted model)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}


def run(script: Path, *args: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    out = subprocess.run(
        [sys.executable, str(script), *args],
        cwd=cwd,
        env=env if env is not None else offline_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def journal_rule(request: dict[str, Any]) -> str:
    """The server-side model: chat turns start with the system prompt; the summarizer call does not."""
    first = request["messages"][0]
    if first["role"] == "system":
        system: str = first["content"]
        if "## Working memory" in system:
            memory = system.split("## Working memory", 1)[1].strip()
            return "I remember: " + memory.splitlines()[0].lstrip("- ")
        return "Nice to meet you!"
    transcript: str = first["content"]
    users = [line.removeprefix("User: ") for line in transcript.splitlines() if line.startswith("User: ")]
    return "\n".join(f"- The user said: {u}" for u in users)


def test_journal_memory_crosses_processes_over_http(tmp_path: Path) -> None:
    state = tmp_path / "journal-state"
    with ScriptedOpenAIServer(rule=journal_rule, api_key="sk-test", models=["gpt-test"]) as server:
        env = {
            **offline_env(),
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "sk-test",
            "OPENAI_MODEL": "gpt-test",
        }
        first = run(JOURNAL, "--state", str(state), FACT, cwd=tmp_path, env=env)
        assert first == "Nice to meet you!\n"
        assert len(server.requests) == 2  # the chat call, then WorkingMemoryAggregate's summary call
        assert "## Working memory" not in server.requests[0]["messages"][0]["content"]
        assert FACT in server.requests[1]["messages"][0]["content"]

        second = run(JOURNAL, "--state", str(state), "Hi again, any ideas for today?", cwd=tmp_path, env=env)
        assert second == f"I remember: The user said: {FACT}\n"
        requests = server.requests
        assert len(requests) == 4
        chat = requests[2]
        assert chat["model"] == "gpt-test"
        assert chat["messages"][0] == {
            "role": "system",
            "content": f"You are a daily journal companion.\n\n## Working memory\n\n- The user said: {FACT}",
        }
        # A new process, a new Agent: no replayed history — only the new line after the system prompt.
        assert [m["role"] for m in chat["messages"]] == ["system", "user"]
        assert chat["messages"][1]["content"] == "Hi again, any ideas for today?"
        # The second summary merges the existing memory with the new conversation.
        assert f"- The user said: {FACT}" in requests[3]["messages"][0]["content"]
    assert (state / "memory" / "working.md").read_text() == "- The user said: Hi again, any ideas for today?\n"


def test_journal_scripted_model_remembers_without_network(tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert run(JOURNAL, "--state", str(state), FACT, cwd=tmp_path) == "Nice to meet you! I'll remember that.\n"
    assert run(JOURNAL, "--state", str(state), "Hi again", cwd=tmp_path) == f"I remember: The user wrote: {FACT}\n"
    memory = (state / "memory" / "working.md").read_text()
    assert memory == f"- The user wrote: {FACT}\n- The user wrote: Hi again\n"


SEEN = re.compile(r"^ask (\d+): model saw (\d+) events", re.MULTILINE)
COMPACTED = re.compile(r"^  compaction #\d+: (\d+) -> (\d+) events$", re.MULTILINE)


def test_long_doc_chat_compacts_and_keeps_the_window(tmp_path: Path) -> None:
    out = run(LONG_DOC, cwd=tmp_path)
    assert out == run(LONG_DOC, cwd=tmp_path), "the scripted run is deterministic"
    seen = [int(n) for _, n in SEEN.findall(out)]
    assert len(seen) == 16
    assert max(seen) == 8  # the window (SlidingWindowPolicy(max_events=8)) is reached, never exceeded
    compactions = [(int(a), int(b)) for a, b in COMPACTED.findall(out)]
    assert len(compactions) >= 3
    assert all(before > 12 and after < before for before, after in compactions)
    assert "(incl. 1 summary)" in out  # the CompactionSummary reaches the model
    assert "latest summary" in out and "parts 1-" in out
    assert out.splitlines()[-1] == f"calls=16 max_seen=8 window=8 compactions={len(compactions)}"


def test_long_doc_chat_tail_compaction_with_a_smaller_window(tmp_path: Path) -> None:
    out = run(LONG_DOC, "--parts", "20", "--window", "5", "--compact", "tail", "--compact-at", "9", cwd=tmp_path)
    seen = [int(n) for _, n in SEEN.findall(out)]
    assert len(seen) == 20 and max(seen) == 5
    assert COMPACTED.findall(out)
    assert "summary" not in out  # TailWindowCompact drops events without a model call
