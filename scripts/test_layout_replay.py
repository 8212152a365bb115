"""Replay issue #44's test move (scripts/test_layout_moves.txt) on a tree that gained files since.

Run from the repository root after merging: it ``git mv``s every file still under an old test path to
its new home, then rewrites the old paths and dotted module names (``tests/hub/…``, ``tests.hub.harness``)
in every tracked text file outside gen/. It does not change ``Path(__file__).parents[n]`` depths of a
file that moved one level deeper: ``tests/system/test_architecture.py`` and the tests fail on those.
Delete this script with the moves file once the layout is in.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

MOVES = Path(__file__).with_name("test_layout_moves.txt")


def moves() -> list[tuple[str, str]]:
    """The (old, new) pairs of the moves file, longest old path first."""
    pairs = [
        (old.strip(), new.strip())
        for old, new in (line.split("->") for line in MOVES.read_text().splitlines() if "->" in line and line[0] != "#")
    ]
    return sorted(pairs, key=lambda pair: -len(pair[0]))


def tracked() -> list[str]:
    """Every file git tracks."""
    return subprocess.run(["git", "ls-files"], capture_output=True, text=True, check=True).stdout.split()


def move_files(pairs: list[tuple[str, str]]) -> None:
    """``git mv`` what is still at an old path (a file added to an old folder after the move)."""
    for path in tracked():
        for old, new in pairs:
            if path == old or path.startswith(old + "/"):
                target = Path(new + path[len(old) :])
                target.parent.mkdir(parents=True, exist_ok=True)
                subprocess.run(["git", "mv", path, str(target)], check=True)
                print(f"moved {path} -> {target}")
                break


def rewrite_references(pairs: list[tuple[str, str]]) -> None:
    """Old paths and module names -> new ones, in every tracked text file but the generated code."""
    table: dict[str, str] = {}
    for old, new in pairs:
        table[old] = new
        table[old.removesuffix(".py").replace("/", ".")] = new.removesuffix(".py").replace("/", ".")
    keys = sorted(table, key=len, reverse=True)
    pattern = re.compile(r"(?<![\w./])(" + "|".join(map(re.escape, keys)) + r")(?!\w)")
    for name in tracked():
        if name.startswith("gen/") or name.startswith("scripts/test_layout_"):
            continue
        path = Path(name)
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        changed = pattern.sub(lambda m: table[m.group(1)], text)
        if changed != text:
            path.write_text(changed, encoding="utf-8")
            print(f"rewrote {name}")


if __name__ == "__main__":
    pairs = moves()
    move_files(pairs)
    rewrite_references(pairs)
