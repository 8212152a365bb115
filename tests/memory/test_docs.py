"""docs/memory.md's first example runs and prints what the doc says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_memory_doc_example_runs(tmp_path: Path) -> None:
    doc = (ROOT / "docs" / "memory.md").read_text()
    code = re.findall(r"```python\n(.*?)```", doc, re.DOTALL)[0]
    expected = re.findall(r"```text\n(.*?)```", doc, re.DOTALL)[0]
    script = tmp_path / "example.py"
    script.write_text(code)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout == expected
