"""Every ag2.* event type is documented once, in the same words everywhere a client author looks:
the docs/hub.md table, the Envelope.event_type comment of envelope.proto, the Python constants
(netkernel/envelope.py) and the Go and TypeScript bridges' constants."""

from __future__ import annotations

import re

import netkernel.envelope as envelope_module
from tests.event_table import event_table
from tests.procs import ROOT


def python_event_types() -> set[str]:
    """The values of netkernel.envelope's EV_* constants."""
    return {v for k, v in vars(envelope_module).items() if k.startswith("EV_") and isinstance(v, str)}


def quoted_event_types(path: str) -> set[str]:
    """The "ag2.*" string literals of a source file."""
    return set(re.findall(r'"(ag2\.[a-z_.]+)"', (ROOT / path).read_text()))


def field_comment(declaration: str) -> str:
    """The comment lines right above a field declaration of envelope.proto."""
    lines = (ROOT / "proto/agentnet/v1/envelope.proto").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip() == declaration)
    start = at
    while lines[start - 1].strip().startswith("//"):
        start -= 1
    return "\n".join(lines[start:at])


def test_the_hub_doc_table_lists_exactly_the_event_type_constants() -> None:
    assert set(event_table()) == python_event_types()


def test_every_row_names_its_sender() -> None:
    for row in event_table().values():
        assert row.sender, row.event_type


def test_envelope_proto_lists_every_event_type() -> None:
    assert quoted_event_types_in(field_comment("string event_type = 4;")) == python_event_types()


def quoted_event_types_in(text: str) -> set[str]:
    """The "ag2.*" literals of ``text``."""
    return set(re.findall(r'"(ag2\.[a-z_.]+)"', text))


def test_bridges_name_the_same_event_types() -> None:
    assert quoted_event_types("bridges/go/envelope.go") == python_event_types()
    assert quoted_event_types("bridges/ts/src/envelope.ts") == python_event_types()


def test_reserved_senders_are_documented() -> None:
    comment = field_comment("string sender_id = 2;")
    assert '"hub"' in comment and '""' in comment
