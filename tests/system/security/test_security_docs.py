"""docs/security.md's trial runs as written: the certificate command, the hub command line and the
Python example, against a real hub subprocess over mTLS with identities bound to certificates."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.procs import ROOT, start_service
from tests.system.test_docs import python_blocks

DOC = ROOT / "docs" / "security.md"


def bash_commands() -> list[list[str]]:
    """The command lines of the doc's ```bash blocks, with ``.venv/bin/python`` as this interpreter."""
    blocks = re.findall(r"```bash\n(.*?)```", DOC.read_text(), re.DOTALL)
    commands = [shlex.split(line) for block in blocks for line in block.splitlines() if line.strip()]
    return [[sys.executable if word == ".venv/bin/python" else word for word in command] for command in commands]


def without_port(args: list[str]) -> list[str]:
    """``args`` without ``--port N`` (the test picks a free port)."""
    i = args.index("--port")
    return args[:i] + args[i + 2 :]


def test_security_doc_trial_runs_and_prints_what_the_doc_says(tmp_path: Path) -> None:
    certs, hub = bash_commands()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    made = subprocess.run(certs, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    assert hub[1:3] == ["-m", "hubsvc"]
    proc = start_service("hubsvc", without_port(hub[3:]), cwd=tmp_path)
    try:
        script = tmp_path / "example.py"
        script.write_text(python_blocks("security.md")[0])
        out = subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            env=dict(os.environ, AGENTNET_HUB=f"localhost:{proc.port}"),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        expected = re.findall(r"```text\n(.*?)```", DOC.read_text(), re.DOTALL)[0]
        assert out.stdout == expected
    finally:
        proc.terminate()
