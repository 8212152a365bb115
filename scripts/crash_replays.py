"""Measure how many envelopes a subscriber receives again after a hub crash (kill -9).

    .venv/bin/python scripts/crash_replays.py --seconds 3 --concurrency 16 --runs 3

A hub process runs in a temporary directory; alice posts into a conversation as fast as
``--concurrency`` concurrent posts allow while bob reads and acks every delivery. After
``--seconds`` the hub is killed with SIGKILL and restarted on the same data; bob reconnects
with the hub's stored cursors only (as a client without its own cursor store would) and
the script counts the envelopes delivered to him a second time.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.hubsvc.harness import conversation
from tests.procs import ROOT, start_service


async def one_run(seconds: float, concurrency: int) -> tuple[int, int]:
    with tempfile.TemporaryDirectory() as tmp:
        hub = start_service("hubsvc", ["--data-dir", tmp, "--log-level", "WARNING"], cwd=ROOT)
        alice, bob, cid = await conversation(hub.target)
        seen: set[str] = set()
        stop = asyncio.Event()

        async def reader() -> None:
            while True:
                seen.add((await bob.inbox.get()).envelope.envelope_id)

        async def poster() -> None:
            while not stop.is_set():
                try:
                    await alice.post(cid, "myapp.note", {"n": 1})
                except Exception:
                    return

        read_task = asyncio.create_task(reader())
        posters = [asyncio.create_task(poster()) for _ in range(concurrency)]
        await asyncio.sleep(seconds)
        hub.terminate(signal.SIGKILL)
        stop.set()
        await asyncio.gather(*posters, return_exceptions=True)
        read_task.cancel()
        await bob.disconnect()
        await alice.disconnect()
        before = len(seen)
        hub = start_service("hubsvc", ["--data-dir", tmp, "--log-level", "WARNING"], cwd=ROOT, port=hub.port)
        try:
            bob.inbox = asyncio.Queue()
            await bob.connect()  # no client cursors: the hub's stored ones
            again = 0
            while True:
                try:
                    delivery = await asyncio.wait_for(bob.inbox.get(), 2.0)
                except TimeoutError:
                    break
                again += delivery.envelope.envelope_id in seen
            await bob.close()
            await alice.close()
        finally:
            hub.terminate()
        return before, again


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0, help="load before the kill")
    parser.add_argument("--concurrency", type=int, default=16, help="concurrent posts")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for run in range(args.runs):
        received, again = await one_run(args.seconds, args.concurrency)
        print(f"run {run + 1}: bob received {received} envelopes before the kill; {again} delivered again after it")


if __name__ == "__main__":
    asyncio.run(main())
