"""Open many Connect streams at once against a real hub process and count how they start.

    .venv/bin/python scripts/connect_burst.py --streams 3000 --channels 1
    .venv/bin/python scripts/connect_burst.py --streams 3000 --channels 8 --target 127.0.0.1:50051

Without --target it starts ``python -m hubsvc`` on a free port in a temporary directory.
Every stream sends Hello and waits for Welcome; the script prints how many were welcomed
and the status codes (with their first message) of those that were not.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import sys
import tempfile
import time
from pathlib import Path

import grpc
from agentnet.v1 import connect_pb2, hub_pb2, hub_pb2_grpc, identity_pb2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.procs import ROOT, start_service


async def register_all(target: str, n: int) -> list[str]:
    """Register ``n`` agents (50 at a time); returns their credentials."""
    async with grpc.aio.insecure_channel(target) as ch:
        stub = hub_pb2_grpc.HubServiceStub(ch)
        creds: list[str] = []
        for start in range(0, n, 50):
            calls = [
                stub.Register(
                    hub_pb2.RegisterRequest(passport=identity_pb2.Passport(name=f"burst-{time.time_ns()}-{i}"))
                )
                for i in range(start, min(n, start + 50))
            ]
            creds += [r.credential for r in await asyncio.gather(*calls)]
        return creds


async def burst(target: str, creds: list[str], channels: int, timeout: float) -> None:
    chans = [grpc.aio.insecure_channel(target) for _ in range(channels)]
    stubs = [hub_pb2_grpc.HubServiceStub(c) for c in chans]
    outcomes: collections.Counter[str] = collections.Counter()
    examples: dict[str, str] = {}
    stop = asyncio.Event()
    calls = []

    async def one(i: int, cred: str) -> None:
        async def frames():  # type: ignore[no-untyped-def]
            yield connect_pb2.ConnectRequest(hello=connect_pb2.Hello(credential=cred))
            await stop.wait()

        call = stubs[i % channels].Connect(frames())
        calls.append(call)
        try:
            frame = await asyncio.wait_for(call.read(), timeout)
            outcomes["welcomed" if frame is not grpc.aio.EOF and frame.HasField("welcome") else "eof"] += 1
        except grpc.aio.AioRpcError as err:
            key = err.code().name
            outcomes[key] += 1
            examples.setdefault(key, f"{err.details()} | {err.debug_error_string()}"[:400])
        except TimeoutError:
            outcomes["timeout"] += 1

    started = time.perf_counter()
    await asyncio.gather(*(one(i, c) for i, c in enumerate(creds)))
    elapsed = time.perf_counter() - started
    print(f"{len(creds)} streams over {channels} channel(s) in {elapsed:.1f}s: {dict(outcomes)}")
    for code, message in examples.items():
        print(f"  {code}: {message}")
    stop.set()
    for call in calls:
        call.cancel()
    for c in chans:
        await c.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=2000)
    parser.add_argument("--channels", type=int, default=1, help="gRPC channels the streams are spread over")
    parser.add_argument("--rounds", type=int, default=1, help="bursts to run (the same agents reconnect)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds a stream may wait for Welcome")
    parser.add_argument("--target", help="a running hub (default: start one)")
    args = parser.parse_args()
    service = None
    with tempfile.TemporaryDirectory() as tmp:
        target = args.target
        if target is None:
            service = start_service("hubsvc", ["--data-dir", tmp, "--log-level", "WARNING"], cwd=ROOT)
            target = service.target
        try:
            creds = await register_all(target, args.streams)
            for _ in range(args.rounds):
                await burst(target, creds, args.channels, args.timeout)
        finally:
            if service is not None:
                service.terminate()
                hub_log = "".join(service.output[-20:])
                if hub_log.strip():
                    print("hub log (last lines):\n" + hub_log)


if __name__ == "__main__":
    asyncio.run(main())
