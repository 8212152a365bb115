"""docs/a2a.md's gateway example runs as written and prints what the doc says."""

from __future__ import annotations

from pathlib import Path

from tests.doc_examples import assert_example_prints_its_text, doc_text


def test_the_gateway_example_runs_and_prints_what_the_doc_says(tmp_path: Path) -> None:
    doc = doc_text("a2a.md")
    section = doc[
        doc.index("## The A2A gateway (outside clients call hub agents)") : doc.index("## A2A protocol mapping")
    ]
    assert_example_prints_its_text(section, tmp_path)
