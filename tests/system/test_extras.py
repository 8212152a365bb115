"""The optional parts of the distribution: importing the SDK loads none of their packages, a missing one
fails with an error naming the extra that installs it, and pyproject.toml declares those extras."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from netkernel.extras import DISTRIBUTION, EXTRAS

ROOT = Path(__file__).resolve().parents[2]

#: Top-level modules of the optional packages (console, command line, gateway, Redis, LangGraph).
OPTIONAL = [
    "starlette",
    "sse_starlette",
    "uvicorn",
    "jinja2",
    "typer",
    "rich",
    "redis",
    "langgraph",
    "langchain_core",
    "mcp",
]

#: What an SDK user imports: none of it may load an optional package.
SDK_MODULES = [
    "agentsdk",
    "agentsdk.network",
    "agentsdk.knowledge",
    "agentsdk.operator",
    "agentsdk.rpc",
    "agentsdk.a2a",
    "agentsdk.langchain",
    "agentsdk.mcp",
]


def run(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_importing_the_sdk_loads_no_optional_package() -> None:
    imports = "; ".join(f"import {m}" for m in SDK_MODULES)
    loaded = run(f"import sys; {imports}; print(sorted({{n.split('.')[0] for n in sys.modules}} & set({OPTIONAL!r})))")
    assert loaded.strip() == "[]"


def test_the_sdk_hub_and_knowledge_service_work_without_the_optional_packages() -> None:
    """With every optional package absent the SDK, the embedded hub (Hub.open) and the knowledge
    service's process still import."""
    blocked = "; ".join(f"sys.modules[{m!r}] = None" for m in OPTIONAL)
    imports = "; ".join(
        f"import {m}" for m in [*SDK_MODULES, "hubsvc.server", "hubsvc.__main__", "knowledgesvc.__main__"]
    )
    assert run(f"import sys; {blocked}; {imports}; print('ok')").strip() == "ok"


#: Each optional part (an import, or an attribute read) and the extra its error must name.
PARTS = [
    ("import agentsdk.cli.app", "cli"),
    ("import agentsdk.console.app", "console"),
    ("import agentsdk.console.server", "console"),
    ("import a2agateway.server", "a2a"),
    ("import agentsdk.langgraph", "langgraph"),
    ("import agentsdk.knowledge as k; k.RedisKnowledgeStore", "redis"),
    ("import knowledgestore.redis_store", "redis"),
    ("import agentsdk.mcp as m; m.MCPServerStdio('server')", "mcp"),
    ("import agentsdk.mcp_server", "mcp"),
    (
        "import hubsvc.__main__ as m, hubsvc.config as c; m.make_store(c.parse_args(['--store', 'redis://h:1']))",
        "redis",
    ),
]


def test_a_missing_optional_package_names_the_extra_to_install() -> None:
    """One process with every optional package absent tries each part; each fails with its extra."""
    blocked = "; ".join(f"sys.modules[{m!r}] = None" for m in OPTIONAL)
    cases = "".join(
        f"try:\n    {code}\n    print('imported')\nexcept ImportError as exc:\n    print(exc)\n" for code, _ in PARTS
    )
    lines = run(f"import sys; {blocked}\n{cases}").splitlines()
    assert len(lines) == len(PARTS)
    for (code, extra), line in zip(PARTS, lines, strict=True):
        assert f"pip install '{DISTRIBUTION}[{extra}]'" in line, code


def test_pyproject_declares_the_extras_and_dev_installs_them_all() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == DISTRIBUTION
    extras = project["optional-dependencies"]
    assert set(EXTRAS) <= set(extras)
    core = " ".join(project["dependencies"])
    for package in ("redis", "starlette", "uvicorn", "jinja2", "typer", "rich", "langgraph", "http-server"):
        assert package not in core, package
    assert f"{DISTRIBUTION}[all]" in extras["dev"]
    (everything,) = extras["all"]
    assert set(everything.removeprefix(DISTRIBUTION).strip("[]").split(",")) == set(EXTRAS)
