"""The layering docs/architecture.md describes holds, and the files it names exist."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"

#: package -> the hand-written packages it may import (generated stubs and libraries are always allowed).
ALLOWED = {
    "netkernel": {"netkernel"},
    "servicekit": {"servicekit", "netkernel"},
    "knowledgestore": {"knowledgestore", "netkernel"},
    "knowledgesvc": {"knowledgesvc", "knowledgestore", "servicekit", "netkernel"},
    "hubsvc": {"hubsvc", "servicekit", "netkernel"},
    # The A2A gateway is a client of the hub (beside the SDK, whose TLS and errors it uses), never inside it.
    "a2agateway": {"a2agateway", "agentsdk", "servicekit", "netkernel"},
    "localprocs": {"localprocs"},
}
OURS = {
    "netkernel",
    "servicekit",
    "knowledgestore",
    "knowledgesvc",
    "hubsvc",
    "agentsdk",
    "a2agateway",
    "localprocs",
    "tests",
}


def imported_packages(path: Path) -> set[str]:
    """Top-level names of every module ``path`` imports (at any depth of the file)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_imports_only_point_down_the_layers(package: str) -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted((imported_packages(path) & OURS) - ALLOWED[package])
        for path in sorted((ROOT / package).rglob("*.py"))
    }
    assert {file: bad for file, bad in offenders.items() if bad} == {}


def test_the_benchmarks_do_not_depend_on_the_tests() -> None:
    """What they share with the tests (service processes, redis-server, replicas) is in localprocs/."""
    users = sorted(
        str(path.relative_to(ROOT)) for path in (ROOT / "bench").rglob("*.py") if "tests" in imported_packages(path)
    )
    assert users == []


def test_the_sdk_imports_the_hub_only_for_the_embedded_hub() -> None:
    users = sorted(
        str(path.relative_to(ROOT)) for path in (ROOT / "agentsdk").rglob("*.py") if "hubsvc" in imported_packages(path)
    )
    assert users == ["agentsdk/network/hub_client.py"]


def test_every_path_the_architecture_page_names_exists() -> None:
    paths = set(
        re.findall(
            r"`((?:netkernel|servicekit|knowledgestore|knowledgesvc|hubsvc|agentsdk|a2agateway)/[\w/.]*)`",
            DOC.read_text(),
        )
    )
    assert len(paths) > 30
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert missing == []


#: The typed client layer: the only modules that hold a stub of our services.
TYPED_LAYER = {"agentsdk/rpc.py", "agentsdk/knowledge/rpc.py", "agentsdk/transport.py"}
OUR_STUBS = {"HubServiceStub", "OperatorServiceStub", "KnowledgeServiceStub"}


def stub_uses(path: Path) -> list[str]:
    """Where ``path`` builds one of our services' stubs, reads a connection's ``stub`` or looks a
    method up by name with ``getattr`` on a stub (line: what)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and (node.attr in OUR_STUBS or node.attr in {"stub", "_stub"}):
            found.append(f"{node.lineno}: {node.attr}")
        elif isinstance(node, ast.Name) and node.id in OUR_STUBS:
            found.append(f"{node.lineno}: {node.id}")
    return found


@pytest.mark.parametrize("package", ["agentsdk", "a2agateway"])
def test_clients_call_our_services_only_through_the_typed_layer(package: str) -> None:
    """docs/architecture.md "The SDK": HubRpc, OperatorRpc and KnowledgeRpc are the only holders of a stub."""
    uses = {
        str(path.relative_to(ROOT)): stub_uses(path)
        for path in sorted((ROOT / package).rglob("*.py"))
        if str(path.relative_to(ROOT)) not in TYPED_LAYER
    }
    assert {file: found for file, found in uses.items() if found} == {}


def example_sources() -> dict[str, str]:
    """What a user copies: every ```python block of README.md and docs/, and every file of examples/."""
    sources: dict[str, str] = {}
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        blocks = re.findall(r"```python\n(.*?)```", doc.read_text(encoding="utf-8"), re.DOTALL)
        sources.update({f"{doc.relative_to(ROOT)} block {i}": block for i, block in enumerate(blocks)})
    for path in sorted((ROOT / "examples").rglob("*.py")):
        sources[str(path.relative_to(ROOT))] = path.read_text(encoding="utf-8")
    return sources


def imported_modules(source: str) -> set[str]:
    """Full names of the modules ``source`` imports (``from a.b import c`` → ``a.b``), read line by line
    (a doc's block may be a fragment that does not parse alone)."""
    found = re.findall(r"^\s*(?:from\s+([\w.]+)\s+import\b|import\s+([\w.]+))", source, re.MULTILINE)
    return {a or b for a, b in found}


def test_docs_and_examples_import_only_public_modules() -> None:
    """A module whose name starts with ``_`` (``agentsdk/network/_outbox.py`` …) is internal: it may
    change without notice, so what users copy imports the public facade (``agentsdk.network`` …)."""
    sources = example_sources()
    assert len(sources) > 10
    private = {
        where: sorted(
            m
            for m in imported_modules(code)
            if m.split(".")[0] in OURS and any(p.startswith("_") for p in m.split("."))
        )
        for where, code in sources.items()
    }
    assert {where: found for where, found in private.items() if found} == {}
