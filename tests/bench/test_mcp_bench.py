"""bench/mcp_bench.py runs end to end (a few calls) and reports every row."""

from __future__ import annotations

from bench.mcp_bench import run


async def test_the_mcp_bench_times_every_path() -> None:
    rows = await run(calls=5)
    assert list(rows) == ["python tool", "MCP over stdio", "MCP over streamable HTTP"]
    for row in rows.values():
        assert 0 < row["p50_ms"] <= row["p99_ms"]
    assert "overhead_p50_ms" in rows["MCP over stdio"]
