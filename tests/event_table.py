"""The "Event types" table of docs/hub.md, parsed: what a client author reads about each ag2.* type."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tests.procs import ROOT

HUB_DOC = ROOT / "docs" / "hub.md"


@dataclass(frozen=True)
class EventRow:
    """One row: the event type, who posts it, and every key the row names in backticks."""

    event_type: str
    sender: str
    keys: frozenset[str]


def event_table() -> dict[str, EventRow]:
    """The rows of the table under "## Event types", by event type."""
    section = HUB_DOC.read_text().split("## Event types", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, EventRow] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        match = re.fullmatch(r"`(ag2\.[a-z_.]+)`", cells[0]) if len(cells) == 3 else None
        if match is None:
            continue
        assert match.group(1) not in rows, f"{match.group(1)} is listed twice in docs/hub.md"
        keys = frozenset(re.findall(r"`([a-z0-9_]+)`", cells[2]))
        rows[match.group(1)] = EventRow(match.group(1), cells[1], keys)
    return rows
