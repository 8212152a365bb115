"""docs/agents.md runs as written; the public names are exported and cheap to import."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import agentsdk

ROOT = Path(__file__).resolve().parents[2]


def test_agents_doc_example_runs(tmp_path: Path) -> None:
    doc = (ROOT / "docs" / "agents.md").read_text()
    code = re.findall(r"```python\n(.*?)```", doc, re.DOTALL)[0]
    expected = re.findall(r"```text\n(.*?)```", doc, re.DOTALL)[0]
    script = tmp_path / "example.py"
    script.write_text(code)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout == expected


def test_public_exports() -> None:
    assert sorted(agentsdk.__all__) == sorted(
        ["Agent", "Inject", "OpenAIConfig", "Reply", "ScriptedConfig", "Stream", "Tool", "tool"]
    )
    for name in agentsdk.__all__:
        value = getattr(agentsdk, name)
        assert value.__doc__, name


def test_import_is_cheap() -> None:
    code = "import sys, agentsdk; print('openai' in sys.modules, 'pydantic' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.stdout.split() == ["False", "False"], out.stderr
    code = "import sys, agentsdk; agentsdk.Agent; print('openai' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.stdout.split() == ["False"], out.stderr
