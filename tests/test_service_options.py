"""Every service declares its options once (servicekit/options.py): its --help and its docs page list them all."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from a2agateway.config import gateway_option_specs
from ag2gateway.config import ag2_gateway_option_specs
from hubsvc.config import hub_option_specs
from knowledgesvc.config import knowledge_option_specs
from servicekit.options import OptionSpec

ROOT = Path(__file__).resolve().parent.parent

#: module run with ``python -m`` -> (its declared options, the docs page that tables its flags).
SERVICES: dict[str, tuple[Callable[[], list[tuple[str, OptionSpec]]], str]] = {
    "hubsvc": (hub_option_specs, "docs/operations.md"),
    "knowledgesvc": (knowledge_option_specs, "docs/knowledge.md"),
    "a2agateway": (gateway_option_specs, "docs/operations.md"),
    "ag2gateway": (ag2_gateway_option_specs, "docs/ag2.md"),
}


@pytest.mark.parametrize("module", sorted(SERVICES))
def test_help_and_docs_list_every_declared_flag_with_its_variable(module: str) -> None:
    specs, page = SERVICES[module]
    declared = [spec for _, spec in specs()]
    assert declared, f"{module} declares no options"
    shown = subprocess.run(
        [sys.executable, "-m", module, "--help"], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    words = set(shown.replace("[", " ").replace("]", " ").replace("=1", " ").split())
    assert [s.flag for s in declared if s.flag not in words or s.env not in words] == []
    lines = (ROOT / page).read_text().splitlines()
    undocumented = [s.flag for s in declared if not any(f"`{s.flag}`" in line and s.env in line for line in lines)]
    assert undocumented == [], f"{page} has no row naming these flags beside their environment variables"
