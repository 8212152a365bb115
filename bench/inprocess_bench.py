"""``python -m bench.inprocess_bench``: the SDK's round trip with the embedded hub, its client calling
the hub over the hub's gRPC port (``Hub.open()``) against calling it in process
(``Hub.open(in_process=True)``, servicekit/inprocess.py), in paired rounds (alternating which goes first).

The workload is the hub benchmark's SDK round trip (:func:`bench.sdk_bench.sdk_round_trips`): two
``register_human`` clients of the embedded hub in a conversation, A sends, B's callback answers. Prints
each path's p50 / p99 (medians of the rounds), this process's CPU milliseconds per round trip (hub and
clients share it), and the ratios in-process / gRPC. Each round trip waits for its answer, so a
finished run answered every one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

from agentsdk.network import Hub, Passport
from bench.sdk_bench import SdkSetup, sdk_round_trips

PATHS = ("grpc", "in_process")


async def one_path(path: str, iterations: int, warmup: int) -> dict[str, float]:
    """The round trip on a fresh embedded hub whose client takes ``path``."""
    async with Hub.open(in_process=path == "in_process") as hub:
        a = await hub.register_human(Passport(name="a", kind="human"))
        b = await hub.register_human(Passport(name="b", kind="human"))
        channel = await a.open(type="conversation", target="b")
        cpu = time.process_time()
        figures = await sdk_round_trips(SdkSetup([a, b], channel), iterations, warmup)
        figures["cpu_ms_per_round_trip"] = (time.process_time() - cpu) * 1000 / (iterations + warmup)
        return figures


async def measure(iterations: int, rounds: int, warmup: int = 200) -> dict[str, Any]:
    """Both paths in ``rounds`` paired rounds; each figure's median per path, and the ratios."""
    per_round: list[dict[str, dict[str, float]]] = []
    for index in range(rounds):
        order = PATHS if index % 2 == 0 else PATHS[::-1]
        per_round.append({path: await one_path(path, iterations, warmup) for path in order})
    report: dict[str, Any] = {
        path: {key: statistics.median(r[path][key] for r in per_round) for key in per_round[0][path]} for path in PATHS
    }
    report["ratios"] = {
        key: statistics.median(r["in_process"][key] / r["grpc"][key] for r in per_round) for key in report["grpc"]
    }
    report["rounds"] = per_round
    return report


def print_report(r: dict[str, Any]) -> None:
    """The figures as a table."""
    print(f"{'SDK round trip, embedded hub':<32}{'gRPC port':>12}{'in process':>12}{'ratio':>10}")
    for key in ("p50_ms", "p99_ms", "cpu_ms_per_round_trip"):
        print(f"{key:<32}{r['grpc'][key]:>12.3f}{r['in_process'][key]:>12.3f}{r['ratios'][key]:>9.2f}x")


def main() -> None:
    """Parse the flags, measure, print."""
    parser = argparse.ArgumentParser(prog="python -m bench.inprocess_bench", description=__doc__)
    parser.add_argument("--iterations", type=int, default=3000, help="round trips measured per round")
    parser.add_argument("--rounds", type=int, default=3, help="paired rounds (medians reported)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    report = asyncio.run(measure(args.iterations, max(1, args.rounds)))
    if args.json:
        print(json.dumps(report))
    else:
        print_report(report)


if __name__ == "__main__":
    main()
