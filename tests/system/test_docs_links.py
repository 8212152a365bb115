"""The docs' cross-references hold: every relative link names a file of the repository and, with
``#anchor``, one of its headings; every ``agentsdk.…`` name docs/from-ag2.md maps an AG2 name to
imports; and no tracked file keeps the markers of an unresolved merge (a merge once left them in
docs/operations.md, with two contradicting rows of one flag)."""

from __future__ import annotations

import importlib
import re
import subprocess
import textwrap
from pathlib import Path

import pytest

from hubsvc.governance.policy import load_policy

ROOT = Path(__file__).resolve().parents[2]
DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
LINK = re.compile(r"\]\(([^)\s]+)\)")
DOTTED = re.compile(r"`(agentsdk(?:\.[A-Za-z_][A-Za-z0-9_]*)+)")


def heading_anchors(markdown: str) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces to hyphens."""
    anchors = set()
    in_code = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        title = line.lstrip("#").strip().lower()
        title = re.sub(r"[^\w\- ]", "", title)
        anchors.add(title.replace(" ", "-"))
    return anchors


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_relative_links_name_an_existing_file_and_heading(doc: Path) -> None:
    broken = []
    for target in LINK.findall(doc.read_text()):
        if "://" in target or target.startswith("mailto:"):
            continue
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        if not file.exists():
            broken.append(f"{target}: no file {file.relative_to(ROOT) if file.is_relative_to(ROOT) else file}")
        elif anchor and file.suffix == ".md" and anchor not in heading_anchors(file.read_text()):
            broken.append(f"{target}: no heading '#{anchor}' in {file.name}")
    assert not broken, f"{doc.name} links to what is not there:\n" + "\n".join(broken)


def test_every_name_the_ag2_page_maps_to_imports() -> None:
    names = sorted(set(DOTTED.findall((ROOT / "docs" / "from-ag2.md").read_text())))
    assert len(names) > 10, "docs/from-ag2.md should map AG2's names to agentsdk names"
    missing = []
    for dotted in names:
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):
            try:
                obj: object = importlib.import_module(".".join(parts[:cut]))
            except ModuleNotFoundError:
                continue
            try:
                for attr in parts[cut:]:
                    obj = getattr(obj, attr)
            except AttributeError:
                missing.append(dotted)
            break
        else:
            missing.append(dotted)
    assert not missing, f"docs/from-ag2.md names what agentsdk does not have: {missing}"


def test_the_ag2_expectation_defaults_of_the_ag2_page_load_as_a_policy(tmp_path: Path) -> None:
    """docs/from-ag2.md's policy file gives each channel type AG2's built-in deadline and action."""
    doc = (ROOT / "docs" / "from-ag2.md").read_text()
    (block,) = re.findall(r"```yaml\n(.*?)```", doc, flags=re.S)
    path = tmp_path / "policy.yaml"
    path.write_text(textwrap.dedent(block))
    policy = load_policy(path)
    got = {
        kind: {name: (spec.seconds, spec.action) for name, spec in entries.items() if spec is not None}
        for kind, entries in policy.expectations.items()
    }
    assert got == {
        "consulting": {"acks_within": (30, "auto_close"), "reply_within": (600, "auto_close")},
        "conversation": {"max_silence": (3600, "audit")},
        "discussion": {"turn_within": (600, "hide")},
        "workflow": {"turn_within": (600, "auto_close")},
    }


def test_no_file_keeps_the_markers_of_an_unresolved_merge() -> None:
    tracked = (
        subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    )
    left = []
    for name in tracked:
        path = ROOT / name
        if not name or path.suffix not in {".md", ".py", ".go", ".ts", ".proto", ".lua", ".toml", ".yaml", ".yml"}:
            continue
        if not path.is_file():
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if line.startswith(("<<<<<<< ", ">>>>>>> ")) or line == "<<<<<<<":
                left.append(f"{name}:{number}")
    assert not left, f"unresolved merge markers at {left}"
