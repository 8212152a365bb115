"""Every service declares its options once (netkernel/options.py): its --help and its docs page list them all."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from a2agateway.config import gateway_option_specs
from ag2gateway.config import ag2_gateway_option_specs
from agentsdk.tls import hub_tls_option_specs
from hubsvc.config import hub_option_specs
from knowledgesvc.config import knowledge_option_specs
from netkernel.options import OptionSpec
from servicekit.metrics import metrics_option_specs
from servicekit.tls import tls_option_specs

ROOT = Path(__file__).resolve().parents[2]

#: module run with ``python -m`` -> (its declared options, the docs pages that table its flags: the
#: knowledge service's TLS and metrics flags share the hub's rows in operations.md).
SERVICES: dict[str, tuple[Callable[[], list[tuple[str, OptionSpec]]], tuple[str, ...]]] = {
    "hubsvc": (hub_option_specs, ("docs/operations.md",)),
    "knowledgesvc": (knowledge_option_specs, ("docs/knowledge.md", "docs/operations.md")),
    "a2agateway": (gateway_option_specs, ("docs/operations.md",)),
    "ag2gateway": (ag2_gateway_option_specs, ("docs/ag2.md",)),
}

#: module -> the shared option groups it takes, as it names their variables (``prefixed``).
SHARED: dict[str, list[tuple[str, OptionSpec]]] = {
    "hubsvc": tls_option_specs("AGENTNET_HUB_") + metrics_option_specs("AGENTNET_HUB_"),
    "knowledgesvc": tls_option_specs("AGENTNET_KNOWLEDGE_") + metrics_option_specs("AGENTNET_KNOWLEDGE_"),
    "a2agateway": hub_tls_option_specs("AGENTNET_A2A_"),
    "ag2gateway": tls_option_specs("AGENTNET_AG2_") + hub_tls_option_specs("AGENTNET_AG2_"),
}


@pytest.mark.parametrize("module", sorted(SERVICES))
def test_help_and_docs_list_every_declared_flag_with_its_variable(module: str) -> None:
    specs, pages = SERVICES[module]
    declared = [spec for _, spec in specs() + SHARED[module]]
    assert declared, f"{module} declares no options"
    shown = subprocess.run(
        [sys.executable, "-m", module, "--help"], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    words = set(shown.replace("[", " ").replace("]", " ").replace("=1", " ").split())
    assert [s.flag for s in declared if s.flag not in words or s.env not in words] == []
    lines = [line for page in pages for line in (ROOT / page).read_text().splitlines()]
    undocumented = [s.flag for s in declared if not any(f"`{s.flag}`" in line and s.env in line for line in lines)]
    assert undocumented == [], f"{' / '.join(pages)}: no row names these flags beside their environment variables"
