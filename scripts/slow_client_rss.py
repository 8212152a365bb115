"""Measure the hub's resident memory while a client floods it with pings and stops reading.

    .venv/bin/python scripts/slow_client_rss.py --pings 200000 --posts 600 --post-kib 900

A hub process runs in a temporary directory. bob opens a raw ``Connect`` stream that sends
``--pings`` pings and never reads a frame; then alice posts ``--posts`` envelopes of
``--post-kib`` KiB to a channel with bob, so they queue for his stalled stream (the hub ends
it once its byte budget is spent). The script prints the hub's RSS (from /proc) at each step
and after bob's stream is gone.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
from agentnet.v1 import connect_pb2, hub_pb2_grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.hubsvc.harness import conversation
from tests.procs import ROOT, start_service


def rss_mib(pid: int) -> int:
    """Resident set size of a process, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    raise RuntimeError("no VmRSS")


async def main(pings: int, posts: int, post_kib: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        hub = start_service("hubsvc", ["--data-dir", tmp, "--log-level", "WARNING"], cwd=ROOT)
        pid = hub.proc.pid
        try:
            print(f"hub RSS at start: {rss_mib(pid)} MiB")
            alice, bob, cid = await conversation(hub.target)
            await bob.disconnect()

            async def frames() -> AsyncIterator[connect_pb2.ConnectRequest]:
                yield connect_pb2.ConnectRequest(hello=connect_pb2.Hello())
                for nonce in range(pings):
                    yield connect_pb2.ConnectRequest(ping=connect_pb2.Ping(nonce=nonce))

            async with grpc.aio.insecure_channel(hub.target) as channel:
                stub = hub_pb2_grpc.HubServiceStub(channel)
                stalled = stub.Connect(frames(), metadata=(("authorization", f"Bearer {bob.credential}"),))
                await asyncio.sleep(5)  # a measurement script: let the pings arrive
                print(f"after {pings} pings never read: {rss_mib(pid)} MiB")
                body = "x" * (post_kib * 1024)
                for _ in range(posts):
                    await alice.post(cid, "myapp.big", {"b": body})
                print(f"after {posts} posts of {post_kib} KiB to the stalled reader: {rss_mib(pid)} MiB")
                stalled.cancel()
            await asyncio.sleep(2)
            print(f"after the stalled client left: {rss_mib(pid)} MiB")
            await alice.close()
        finally:
            hub.terminate()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pings", type=int, default=200_000)
    parser.add_argument("--posts", type=int, default=600)
    parser.add_argument("--post-kib", type=int, default=900)
    args = parser.parse_args()
    asyncio.run(main(args.pings, args.posts, args.post_kib))
