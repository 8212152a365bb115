"""The Go and TypeScript bridges' per-RPC tables (scripts/rpc_tables/go.py and ts.py): the committed
files are what ``make proto`` writes now, and the generators refuse what they cannot write. That every
HubService RPC has a client method is checked in each bridge's own unit tests
(bridges/go/rpc_table_unit_test.go, bridges/ts/test/rpc_table.test.ts)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

from scripts.rpc_tables import go as go_tables
from scripts.rpc_tables import ts as ts_tables
from scripts.rpc_tables.descriptors import MessageRef, Method, Service, load

ROOT = Path(__file__).resolve().parents[2]
GENERATORS = [pytest.param(go_tables, id="go"), pytest.param(ts_tables, id="ts")]
HAND_WRITTEN = ("Connect", "Register", "RegisterHuman", "ReadWal")


@pytest.mark.parametrize("generator", GENERATORS)
def test_the_committed_table_is_what_make_proto_writes_now(generator: ModuleType) -> None:
    """``make check-gen`` checks the same in CI: an RPC added to hub.proto reaches both bridges."""
    written = (ROOT / generator.OUTPUT).read_text(encoding="utf-8")
    assert written == generator.emit(load(ROOT / "proto"), ROOT)
    assert "make proto" in written.splitlines()[0] and "not edit" in written.splitlines()[0].lower()


def test_the_go_table_is_gofmt_clean() -> None:
    """gofmt leaves the emitted source as it is (the generator emits formatted code)."""
    gofmt = shutil.which("gofmt")
    if gofmt is None:
        pytest.skip("gofmt is not installed")
    source = go_tables.emit_unformatted(load(ROOT / "proto"))
    done = subprocess.run([gofmt], input=source, capture_output=True, text=True, check=True)
    assert done.stdout == source


def _method(name: str, *, server_streaming: bool = False, comment: str = "") -> Method:
    request = MessageRef(f"agentnet.v1.{name}Request", f"{name}Request", "agentnet/v1/hub.proto")
    response = MessageRef(f"agentnet.v1.{name}Response", f"{name}Response", "agentnet/v1/hub.proto")
    return Method(name, request, response, False, server_streaming, comment)


def _hub(*methods: Method) -> list[Service]:
    return [Service("HubService", "agentnet.v1.HubService", "agentnet/v1/hub.proto", "", methods)]


HAND = tuple(_method(name) for name in HAND_WRITTEN)


@pytest.mark.parametrize("generator", GENERATORS)
def test_the_generator_refuses_a_stream_nobody_wrote_by_hand(generator: ModuleType) -> None:
    with pytest.raises(ValueError, match=r"HubService\.Tail streams: write its .* by hand"):
        generator.methods(_hub(*HAND, _method("Tail", server_streaming=True)))


@pytest.mark.parametrize("generator", GENERATORS)
def test_the_generator_refuses_a_stale_hand_written_name(generator: ModuleType) -> None:
    with pytest.raises(ValueError, match=r"has no RPC \['ReadWal'\]"):
        generator.methods(_hub(*HAND[:3], _method("Ping")))


def test_a_proto_comment_becomes_the_go_doc_comment() -> None:
    source = go_tables.emit_unformatted(
        _hub(*HAND, _method("Ping", comment="Ping answers.\n\nSecond paragraph."), _method("Pong"))
    )
    assert "// Ping answers.\n//\n// Second paragraph.\nfunc (r HubRPC) Ping(" in source
    assert "// Pong calls the Pong RPC: (no comment in the proto)\nfunc (r HubRPC) Pong(" in source


def test_a_proto_comment_cannot_end_the_tsdoc_block() -> None:
    table = ts_tables.emit(_hub(*HAND, _method("Ping", comment="Ping matches a/*/b globs.")), ROOT)
    doc = table[table.index("  /**\n   * Ping") : table.index("  ping(")]
    assert doc.count("*/") == 1 and doc.endswith("   */\n")
    assert "  ping(request: PingRequest, call?: CallOptions): Promise<PingResponse> {\n" in table
