"""The code examples of docs/, run as scripts: a page's (or a section's) first ```python block must
print exactly its first ```text block."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from tests.procs import ROOT


def doc_text(page: str) -> str:
    """The markdown of ``docs/<page>``."""
    return (ROOT / "docs" / page).read_text()


def fenced_blocks(markdown: str, language: str) -> list[str]:
    """The bodies of the ```<language> blocks of ``markdown``, in order."""
    return re.findall(rf"```{re.escape(language)}\n(.*?)```", markdown, re.DOTALL)


def assert_example_prints_its_text(markdown: str, cwd: Path, env: Mapping[str, str] | None = None) -> None:
    """Run the first ```python block of ``markdown`` as ``cwd/example.py`` (from ``cwd``, with ``env``
    or this process's environment) and assert it exits 0 having printed exactly the first ```text block."""
    expected = fenced_blocks(markdown, "text")[0]
    script = cwd / "example.py"
    script.write_text(fenced_blocks(markdown, "python")[0])
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=cwd, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout == expected
