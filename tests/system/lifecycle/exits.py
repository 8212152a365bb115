"""Run tests/system/lifecycle/exit_probe.py and report whether the interpreter exited on its own (test helper)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.procs import ROOT

PROBE = Path(__file__).with_name("exit_probe.py")

#: How long a probe may take in all. It normally returns within a second or two; a store that blocks
#: interpreter exit blocks it forever, so any generous bound tells the two apart.
EXIT_DEADLINE = 60.0


def run_probe(case: str, directory: Path, target: str = "", token: str = "") -> str:
    """Run the probe for ``case``; its stdout when it exited 0, AssertionError when it hung or failed."""
    try:
        out = subprocess.run(
            [sys.executable, str(PROBE), case, str(directory), target, token],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=EXIT_DEADLINE,
        )
    except subprocess.TimeoutExpired as hung:
        raise AssertionError(
            f"{case}: the interpreter did not exit after main() returned; output: {hung.stdout!r}"
        ) from None
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr and "never awaited" not in out.stderr, out.stderr
    return out.stdout
