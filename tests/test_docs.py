"""The code examples in docs/ run as written against real services."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.procs import ROOT, start_service


def python_blocks(doc: str) -> list[str]:
    """The ```python blocks of a markdown file."""
    return re.findall(r"```python\n(.*?)```", (ROOT / "docs" / doc).read_text(), re.DOTALL)


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


@pytest.mark.parametrize("doc", ["agents.md", "memory.md", "quickstart.md", "a2a.md"])
def test_doc_example_runs_and_prints_what_the_doc_says(tmp_path: Path, doc: str) -> None:
    """The doc's first ```python block, run as a script, prints exactly its first ```text block."""
    expected = re.findall(r"```text\n(.*?)```", (ROOT / "docs" / doc).read_text(), re.DOTALL)[0]
    script = tmp_path / "example.py"
    script.write_text(python_blocks(doc)[0])
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout == expected


def test_a2a_langgraph_example_runs(tmp_path: Path) -> None:
    """docs/a2a.md's LangGraph example (A2A tools bound to a LangGraph agent whose model is a local
    OpenAI-compatible server) runs as written and prints the ```text block that follows it."""
    doc = (ROOT / "docs" / "a2a.md").read_text()
    start = doc.index("### A2A tools in a LangGraph agent")
    script_text = re.findall(r"```python\n(.*?)```", doc[start:], re.DOTALL)[0]
    expected = re.findall(r"```text\n(.*?)```", doc[start:], re.DOTALL)[0]
    assert "from langgraph" in script_text and "bind_tools" in script_text
    script = tmp_path / "example.py"
    script.write_text(script_text)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout == expected
