"""docs/a2a.md "Calling outside A2A agents": its example runs as written and prints what the doc says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.procs import ROOT


def test_outbound_doc_example_runs(tmp_path: Path) -> None:
    section = (ROOT / "docs" / "a2a.md").read_text().split("## Calling outside A2A agents", 1)[1]
    code = re.findall(r"```python\n(.*?)```", section, re.DOTALL)[0]
    expected = re.findall(r"```text\n(.*?)```", section, re.DOTALL)[0]
    script = tmp_path / "example.py"
    script.write_text(code)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout == expected
