"""What the fuzz tests assert after every call: a documented refusal, an unchanged store, a live server."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import grpc
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status
from hypothesis import HealthCheck, Phase, settings

from netkernel.errors import ERROR_DOMAIN
from tests.procs import ROOT

_ROW = re.compile(r"^\| `([A-Z_]+)` \| `([A-Z_]+)` \((\d+)\) \|", re.MULTILINE)


def documented_reasons() -> dict[str, grpc.StatusCode]:
    """reason -> gRPC code, from the table in docs/errors.md (what client authors are promised)."""
    table = {m.group(1): grpc.StatusCode[m.group(2)] for m in _ROW.finditer((ROOT / "docs" / "errors.md").read_text())}
    assert len(table) >= 15, "docs/errors.md's table was not found"
    return table


DOCUMENTED = documented_reasons()
NEVER_FOR_INPUT = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN}


def reason_of(err: grpc.RpcError) -> str | None:
    """The ErrorInfo reason in the status details (None when the status carries none)."""
    try:
        status = rpc_status.from_call(err)  # type: ignore[arg-type]
    except ValueError:  # the details disagree with the status (e.g. the transport replaced it)
        return None
    if status is None:
        return None
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            if info.domain == ERROR_DOMAIN:
                return info.reason
    return None


def assert_documented_refusal(err: grpc.RpcError, what: str) -> None:
    """The refusal is a documented (reason, code) pair, never INTERNAL/UNKNOWN, with a message."""
    code = err.code()
    details = err.details() or ""
    assert code not in NEVER_FOR_INPUT, f"{what}: {code.name} for client input: {details[:300]}"
    reason = reason_of(err)
    assert reason is not None, f"{what}: {code.name} without an ErrorInfo reason: {details[:300]}"
    assert reason in DOCUMENTED, f"{what}: reason {reason!r} is not in docs/errors.md"
    assert DOCUMENTED[reason] == code, (
        f"{what}: reason {reason} documented as {DOCUMENTED[reason].name}, sent {code.name}"
    )
    assert details.strip(), f"{what}: {reason} without a message"


def assert_serving(channel: grpc.Channel, service: str) -> None:
    """The server answers its health check: SERVING."""
    stub = health_pb2_grpc.HealthStub(channel)
    resp = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
    assert resp.status == health_pb2.HealthCheckResponse.SERVING


def sqlite_fingerprint(
    db: Path, skip: frozenset[str] = frozenset(), append_only: frozenset[str] = frozenset()
) -> dict[str, object]:
    """Per table: row count and a content checksum; for an ``append_only`` table (a growing log, e.g. the
    WAL) its row count and total size, which are cheap. Read through a separate read-only connection."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        out: dict[str, object] = {}
        for table in sorted(set(tables) - skip):
            if table in append_only:
                out[table] = conn.execute(f'SELECT count(*), total(length(data)) FROM "{table}"').fetchone()
                continue
            rows = conn.execute(f'SELECT * FROM "{table}"').fetchall()
            # The rows themselves (with their values' types) are hashed, not their repr: a knowledge file the fuzz
            # appended to for a while holds hundreds of kilobytes, and repr() of them cost ~10 ms per fingerprint.
            out[table] = (len(rows), hash(frozenset((row, tuple(map(type, row))) for row in rows)))
        return out
    finally:
        conn.close()


def fuzz_settings(max_examples: int) -> settings:
    """Deterministic, non-shrinking hypothesis settings for the fuzz modules (CI reproduces every run)."""
    return settings(
        max_examples=max_examples,
        deadline=None,
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.generate],  # no shrinking: a failure reports its (reproducible) example at once
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )
