"""The layering docs/architecture.md describes holds, and the files it names exist."""

from __future__ import annotations

import ast
import fnmatch
import re
import tomllib
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
    # The AG2 WebSocket gateway likewise: a hub client speaking AG2's protocol to AG2 clients.
    "ag2gateway": {"ag2gateway", "agentsdk", "servicekit", "netkernel"},
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
    "ag2gateway",
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
            r"`((?:netkernel|servicekit|knowledgestore|knowledgesvc|hubsvc|agentsdk|a2agateway|ag2gateway)/[\w/.]*)`",
            DOC.read_text(),
        )
    )
    assert len(paths) > 30
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert missing == []


#: Longest hand-written module under hubsvc/: a longer one does more than one job; split it along its seams.
MAX_MODULE_LINES = 600


def test_no_hand_written_hub_module_is_over_600_lines() -> None:
    too_long = {
        str(path.relative_to(ROOT)): lines
        for path in sorted((ROOT / "hubsvc").rglob("*.py"))
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert too_long == {}


#: Where a channel type's or a view's name may be written as a string literal: the vocabulary module (the one
#: declaration every other file imports) and, per name, the places where the same word means something else.
VOCABULARY_MODULE = "netkernel/channel_types.py"
OTHER_MEANINGS = {
    # An SDK assembly (reduction) policy that keeps the conversation events: not the channel type.
    ("agentsdk/policies.py", "conversation"),
}
SOURCE_PACKAGES = tuple(sorted(OURS - {"localprocs", "tests"}))


def _string_literals(path: Path) -> set[str]:
    return {
        node.value
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }


def test_a_channel_type_or_view_name_is_written_once() -> None:
    """One vocabulary: the code spells a channel type or a view by its netkernel constant, so a new channel
    type is declared in its adapter (and the vocabulary), not in every list that names the types."""
    from netkernel.channel_types import CHANNEL_TYPES, VIEW_NAMES

    names = set(CHANNEL_TYPES) | set(VIEW_NAMES)
    found = sorted(
        (rel, name)
        for package in SOURCE_PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if (rel := str(path.relative_to(ROOT))) != VOCABULARY_MODULE
        for name in _string_literals(path) & names
        if (rel, name) not in OTHER_MEANINGS
    )
    assert found == []
    # The TypeScript bridge writes the list once too (its OpenChannel type is derived from it) ...
    code = re.compile(r'"(' + "|".join(sorted(CHANNEL_TYPES)) + r')"')
    ts_lists = {
        str(path.relative_to(ROOT)): code.findall(re.sub(r"//.*|/\*[\s\S]*?\*/", "", path.read_text()))
        for path in sorted((ROOT / "bridges" / "ts" / "src").glob("*.ts"))
    }
    assert {path: found for path, found in ts_lists.items() if found} == {
        "bridges/ts/src/channel_types.ts": list(CHANNEL_TYPES)
    }


def test_the_adapter_registries_and_the_policy_read_the_one_list() -> None:
    from agentsdk.network.adapters import ADAPTERS as SDK_ADAPTERS
    from hubsvc.adapters import ADAPTERS
    from hubsvc.governance.policy import CHANNEL_TYPES as POLICY_TYPES
    from hubsvc.governance.policy import EXPECTATION_TYPES
    from netkernel.channel_types import CHANNEL_TYPES
    from netkernel.tool_schemas import ChannelsArgs

    assert tuple(ADAPTERS) == CHANNEL_TYPES == POLICY_TYPES
    assert set(CHANNEL_TYPES) <= set(SDK_ADAPTERS)  # a test may register a custom SDK adapter beside them
    assert ChannelsArgs.model_json_schema()["properties"]["type"]["anyOf"][0]["enum"] == list(CHANNEL_TYPES)
    assert {n for adapter in ADAPTERS.values() for n in adapter.expectations} == set(EXPECTATION_TYPES)


def test_the_message_conversion_is_where_its_name_says() -> None:
    """Envelopes reach the model as views' events (agentsdk/network/views.py), then as chat messages
    (agentsdk/llm_messages.py); agentsdk/config.py only re-exports the second."""
    defined = {
        node.name
        for node in ast.parse((ROOT / "agentsdk" / "config.py").read_text()).body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }
    assert not defined & {"events_to_messages", "message_from_completion", "message_from_chunks"}


def test_every_data_file_a_package_reads_is_shipped() -> None:
    """Files beside the code that the code reads at run time (the Redis stores' Lua scripts, the hub's
    and the knowledge store's) are package data, so a wheel or sdist install has them too."""
    declared: dict[str, list[str]] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]
    unshipped = []
    for path in sorted(p for package in SOURCE_PACKAGES for p in (ROOT / package).rglob("*.lua")):
        package_dir = next(p for p in path.parents if (p / "__init__.py").exists())
        package = ".".join(package_dir.relative_to(ROOT).parts)
        relative = path.relative_to(package_dir).as_posix()
        patterns = declared.get(package, []) + declared.get("*", [])
        if not any(fnmatch.fnmatch(relative, pattern) for pattern in patterns):
            unshipped.append(str(path.relative_to(ROOT)))
    assert unshipped == []
    assert list(ROOT.glob("hubsvc/storage/redis_store/lua/*.lua"))  # the check looked at something
    assert list(ROOT.glob("knowledgestore/lua/*.lua"))


def test_the_stores_read_no_environment() -> None:
    """A store is configured by its constructor; a test's fault reaches it through the explicit
    seam (hubsvc/storage/faults.py), never an environment variable read deep in the store."""
    readers = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "hubsvc" / "storage").rglob("*.py")
        if re.search(r"\bos\.environ\b|\bgetenv\(", path.read_text(encoding="utf-8"))
    )
    assert readers == []


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


@pytest.mark.parametrize("package", ["agentsdk", "a2agateway", "ag2gateway"])
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
