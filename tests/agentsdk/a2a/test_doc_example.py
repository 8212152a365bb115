"""docs/a2a.md "Calling outside A2A agents": its example runs as written and prints what the doc says."""

from __future__ import annotations

from pathlib import Path

from tests.doc_examples import assert_example_prints_its_text, doc_text


def test_outbound_doc_example_runs(tmp_path: Path) -> None:
    section = doc_text("a2a.md").split("## Calling outside A2A agents", 1)[1]
    assert_example_prints_its_text(section, tmp_path)
