"""The public names are exported, documented and cheap to import (docs/agents.md runs in tests/system/test_docs.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import agentsdk

ROOT = Path(__file__).resolve().parents[3]


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
