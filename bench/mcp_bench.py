"""What a tool call through MCP costs over a plain Python tool, per call (issue 43).

The same one-line tool (``add(a, b)``) three ways, each called one after the other through
``Tool.invoke`` (what the agent's turn loop calls): a Python ``@tool``; an MCP tool of a server the
agent launched over stdio; the same server over streamable HTTP on loopback. The MCP servers are
the ``mcp`` package's own server side (``MCPServer``) in their own processes. Prints the p50 / p99
per call and the MCP paths' overhead over the Python tool's p50.

``python -m bench.mcp_bench [--calls N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

from agentsdk import tool
from agentsdk.mcp import MCPServer, MCPServerStdio, MCPServerStreamableHttp
from agentsdk.tools import Tool
from bench.timing import percentiles

SERVER = '''
import socket
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("bench")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


if "--http" in sys.argv:
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    uvicorn.Server(uvicorn.Config(server.streamable_http_app(), log_level="warning")).run(sockets=[sock])
else:
    server.run()
'''


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def per_call(target: Tool, calls: int, warmup: int = 50) -> dict[str, float]:
    """p50 / p99 of ``calls`` sequential ``invoke`` s (after ``warmup``)."""
    samples = []
    for i in range(warmup + calls):
        t0 = time.perf_counter()
        out = await target.invoke({"a": i, "b": 1})
        elapsed = time.perf_counter() - t0
        if out.is_error or out.content != str(i + 1):
            raise RuntimeError(f"{target!r} answered {out.content!r}")
        if i >= warmup:
            samples.append(elapsed)
    return percentiles(samples)


async def through(server: MCPServer, calls: int) -> dict[str, float]:
    """Start ``server``, time its ``add``, stop it."""
    (mcp_add,) = await server.start()
    try:
        return await per_call(mcp_add, calls)
    finally:
        await server.stop()


async def run(calls: int) -> dict[str, dict[str, float]]:
    """Every row."""
    script = Path(tempfile.mkdtemp()) / "bench_mcp_server.py"
    script.write_text(SERVER)
    rows = {"python tool": await per_call(add, calls)}
    rows["MCP over stdio"] = await through(MCPServerStdio(sys.executable, [str(script)], allow=["add"]), calls)
    proc = await asyncio.create_subprocess_exec(sys.executable, str(script), "--http", stdout=asyncio.subprocess.PIPE)
    try:
        assert proc.stdout is not None
        port = int((await proc.stdout.readline()).split()[1])
        http = MCPServerStreamableHttp(f"http://127.0.0.1:{port}/mcp", allow=["add"])
        rows["MCP over streamable HTTP"] = await through(http, calls)
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 10)
    base = rows["python tool"]["p50_ms"]
    for name in ("MCP over stdio", "MCP over streamable HTTP"):
        rows[name]["overhead_p50_ms"] = rows[name]["p50_ms"] - base
    return rows


def main() -> None:
    """Parse the flags, run, print one line per row (``--json``: the rows as JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = asyncio.run(run(args.calls))
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    for name, row in rows.items():
        extra = f"  (+{row['overhead_p50_ms']:.3f} ms over the Python tool)" if "overhead_p50_ms" in row else ""
        print(f"{name:26} p50 {row['p50_ms']:8.3f} ms  p99 {row['p99_ms']:8.3f} ms{extra}")


if __name__ == "__main__":
    main()
