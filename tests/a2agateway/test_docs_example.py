"""docs/a2a.md's gateway example runs as written and prints what the doc says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_gateway_example_runs_and_prints_what_the_doc_says(tmp_path: Path) -> None:
    doc = (ROOT / "docs" / "a2a.md").read_text()
    section = doc[
        doc.index("## The A2A gateway (outside clients call hub agents)") : doc.index("## A2A protocol mapping")
    ]
    script_text = re.findall(r"```python\n(.*?)```", section, re.DOTALL)[0]
    expected = re.findall(r"```text\n(.*?)```", section, re.DOTALL)[0]
    script = tmp_path / "example.py"
    script.write_text(script_text)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout == expected
