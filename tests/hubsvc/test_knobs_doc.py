"""docs/hub.md "Knobs" is the adapters' knob table (hubsvc/adapters/knobs.py), row for row."""

from __future__ import annotations

import re

from hubsvc.adapters.knobs import COMMON, OWN
from netkernel.channel_types import CHANNEL_TYPES
from tests.procs import ROOT


def doc_rows() -> list[tuple[str, str, str, str]]:
    """(type, knob, default, meaning) of each row of the Knobs table."""
    text = (ROOT / "docs" / "hub.md").read_text()
    section = text.split("### Knobs", 1)[1].split("\n### ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("| ") else []
        if len(cells) == 4 and cells[0] not in ("type", "---"):
            rows.append((cells[0], cells[1], cells[2], cells[3]))
    return rows


def test_the_knobs_table_is_the_code() -> None:
    expected = [(f"`{t}`", f"`{k.name}`", k.default, k.meaning) for t, knobs in OWN.items() for k in knobs]
    expected += [("every type", f"`{k.name}`", k.default, k.meaning) for k in COMMON]
    assert doc_rows() == expected
    assert set(OWN) == set(CHANNEL_TYPES)


def test_every_knob_an_adapter_reads_is_in_the_table() -> None:
    """The knob names the adapters' code reads (``knobs.get("…")`` / ``"…"`` keys) are all declared."""
    declared = {k.name for knobs in OWN.values() for k in knobs} | {k.name for k in COMMON}
    read: set[str] = set()
    for name in ("conversation", "discussion", "workflow_graph"):
        source = (ROOT / "hubsvc" / "adapters" / f"{name}.py").read_text()
        read |= set(re.findall(r'knobs\.get\("([a-z_]+)"\)', source))
        read |= set(re.findall(r'knobs\(spec\.knobs, "([a-z_]+)"', source))
    assert read and read <= declared
