"""``python -m bench``: every benchmark, one after the other (``make bench``)."""

from __future__ import annotations

import subprocess
import sys


def main() -> None:
    """Run the hub, scale-out, turns, A2A, knowledge, AG2 gateway, in-process, history and MCP benchmarks,
    passing extra flags to the hub one."""
    for module, args in (
        ("bench.hub_bench", sys.argv[1:]),
        ("bench.scale_bench", []),
        ("bench.turns_bench", []),
        ("bench.a2a_bench", []),
        ("bench.knowledge_bench", []),
        ("bench.ag2_bench", ["--rounds", "3"]),  # paired rounds: the ratios are their medians
        ("bench.ag2_bench", ["--rounds", "3", "--embedded"]),  # the one-process row (python -m ag2embedded)
        ("bench.inprocess_bench", []),  # the SDK's embedded hub: gRPC port vs in process
        ("bench.history_bench", []),
        ("bench.mcp_bench", []),
    ):
        print(f"\n### {module}", flush=True)
        subprocess.run([sys.executable, "-m", module, *args], check=True)


if __name__ == "__main__":
    main()
