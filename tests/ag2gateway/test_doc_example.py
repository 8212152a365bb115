"""docs/ag2.md's AG2 example runs as written, in the AG2 venv, against a gateway."""

from __future__ import annotations

import asyncio
import os
import re
import textwrap
from pathlib import Path

from tests.ag2gateway.conftest import AG2_PYTHON, ROOT, Net


async def test_the_ag2_doc_example_registers_through_the_gateway(net: Net, tmp_path: Path) -> None:
    [block] = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "ag2.md").read_text(), re.DOTALL)
    script = tmp_path / "example.py"
    script.write_text(textwrap.dedent(block))  # the block sits in a numbered list
    proc = await asyncio.create_subprocess_exec(  # not subprocess.run: the gateway runs on this event loop
        str(AG2_PYTHON),
        str(script),
        env=dict(os.environ, AG2_GATEWAY_URL=net.gateway.url),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, stderr.decode()
    assert stdout.decode().splitlines() == ["registered alice 32"]
