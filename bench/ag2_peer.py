"""The AG2 side of ``bench/ag2_bench.py``; runs in ``.venv-ag2`` (the released ag2==1.2.1).

``serve DIR``: AG2's own hub (``Hub.open`` on a ``DiskKnowledgeStore`` under DIR) over its WebSocket
link (``serve_ws``) on a free loopback port; prints ``listening on ws://...``.
``run URL``: the three workloads with unmodified AG2 clients (``HubClient(WsLink(url))``, human
participants, a custom event type so no turn rule applies) against whatever serves URL — AG2's hub
or the AG2 gateway in front of ours; prints one JSON line with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from typing import Any

from ag2.knowledge import DiskKnowledgeStore
from ag2.network import Envelope, Hub, HubClient, Passport
from ag2.network.transport import WsLink, serve_ws


async def serve(directory: str) -> None:
    """AG2's hub on disk, over WebSocket, until stdin closes."""
    hub = await Hub.open(DiskKnowledgeStore(directory))
    async with serve_ws(hub, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        print(f"listening on ws://127.0.0.1:{port}", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await hub.close()


class Inbox:
    """Counts one human's deliveries and wakes a waiter at a target."""

    def __init__(self) -> None:
        self.seen = 0
        self.target = 0
        self.done: asyncio.Future[None] | None = None

    def expect(self, n: int) -> asyncio.Future[None]:
        self.seen, self.target = 0, n
        self.done = asyncio.get_running_loop().create_future()
        return self.done

    async def __call__(self, envelope: Envelope) -> None:
        if not envelope.event_type.startswith("bench."):
            return
        self.seen += 1
        if self.done is not None and self.seen >= self.target and not self.done.done():
            self.done.set_result(None)


async def _humans(url: str, n: int, tag: str) -> tuple[list[HubClient], list[Any]]:
    hubs, humans = [], []
    for i in range(n):
        hub = await HubClient(WsLink(url)).open()
        humans.append(await hub.register_human(Passport(name=f"{tag}-{i}", kind="human")))
        hubs.append(hub)
    return hubs, humans


async def _channel(opener: Any, targets: list[str], channel_type: str) -> str:
    """Open a channel as AG2 code does: ``open()`` answers once it is open (both hubs), so the
    workload sends right after it."""
    channel = await opener.open(type=channel_type, target=targets)
    if channel.metadata.state.value != "active":
        raise RuntimeError(f"open() answered with the channel {channel.metadata.state.value}, not active")
    return channel.channel_id


def _env(sender: Any, channel_id: str, event_type: str, audience: list[str] | None) -> Envelope:
    return Envelope(
        channel_id=channel_id,
        sender_id=sender.agent_id,
        audience=audience,
        event_type=event_type,
        event_data={"body": "x" * 64},
    )


async def rtt(url: str, iterations: int) -> dict[str, float]:
    """Request / reply: A posts a ping to B, B's callback posts a pong, A waits for it."""
    tag = uuid.uuid4().hex[:6]
    hubs, (a, b) = await _humans(url, 2, f"rtt-{tag}")
    channel_id = await _channel(a, [b.agent_id], "conversation")
    inbox = Inbox()
    a.on_envelope(inbox)

    async def echo(envelope: Envelope) -> None:
        if envelope.event_type == "bench.ping":
            await b.post_envelope(_env(b, channel_id, "bench.pong", [a.agent_id]))

    b.on_envelope(echo)
    samples = []
    for i in range(iterations + 20):
        done = inbox.expect(1)
        start = time.perf_counter()
        await a.post_envelope(_env(a, channel_id, "bench.ping", [b.agent_id]))
        await done
        if i >= 20:
            samples.append((time.perf_counter() - start) * 1000)
    for hub in hubs:
        await hub.close()
    samples.sort()
    return {"rtt_p50_ms": statistics.median(samples), "rtt_p99_ms": samples[int(len(samples) * 0.99) - 1]}


async def one_way(url: str, count: int, receivers: int, window: int) -> float:
    """A posts ``count`` envelopes (``window`` in flight) to ``receivers`` humans; deliveries/s until all arrived."""
    tag = uuid.uuid4().hex[:6]
    hubs, humans = await _humans(url, receivers + 1, f"ow{receivers}-{tag}")
    sender, rest = humans[0], humans[1:]
    channel_id = await _channel(sender, [h.agent_id for h in rest], "conversation" if receivers == 1 else "discussion")
    inboxes = [Inbox() for _ in rest]
    for human, inbox in zip(rest, inboxes, strict=True):
        human.on_envelope(inbox)
    waits = [inbox.expect(count) for inbox in inboxes]
    gate = asyncio.Semaphore(window)

    async def post() -> None:
        async with gate:
            await sender.post_envelope(_env(sender, channel_id, "bench.msg", None))

    start = time.perf_counter()
    await asyncio.gather(*(post() for _ in range(count)))
    await asyncio.gather(*waits)
    elapsed = time.perf_counter() - start
    for hub in hubs:
        await hub.close()
    return count * receivers / elapsed


async def run(url: str, iterations: int, count: int) -> dict[str, float]:
    """All three workloads."""
    out: dict[str, float] = dict(await rtt(url, iterations))
    out["throughput_per_s"] = await one_way(url, count, 1, 64)
    out["fanout8_deliveries_per_s"] = await one_way(url, max(count // 8, 8), 8, 64)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(prog="ag2_peer")
    sub = parser.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("directory")
    r = sub.add_parser("run")
    r.add_argument("url")
    r.add_argument("--iterations", type=int, default=200)
    r.add_argument("--count", type=int, default=1000)
    args = parser.parse_args()
    if args.cmd == "serve":
        asyncio.run(serve(args.directory))
    else:
        print(json.dumps(asyncio.run(run(args.url, args.iterations, args.count))), flush=True)


if __name__ == "__main__":
    main()
