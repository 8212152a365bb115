"""The AG2 side of ``bench/ag2_bench.py``; runs in ``.venv-ag2`` (the released ag2==1.2.1).

``serve DIR``: AG2's own hub (``Hub.open`` on a ``DiskKnowledgeStore`` under DIR) over its WebSocket
link (``serve_ws``) on a free loopback port; prints ``listening on ws://...``.
``run URL``: the three workloads with unmodified AG2 clients (``HubClient(WsLink(url))``, human
participants, a custom event type so no turn rule applies) against whatever serves URL — AG2's hub
or the AG2 gateway in front of ours; prints one JSON line: ``{"figures": {...}, "counts": {...}}``.
The counts say what happened (round trips made, posts answered, distinct envelopes each receiver got,
duplicates); the smoke test asserts them, never the figures.

Each workload opens its channel and posts right after ``open()`` returns, as AG2 code does. The
one-way and fan-out workloads are pipelined: every post is issued at once (``--window 0``), so the
sender's link and the server, not the client, bound what is in flight. AG2's client gives each
request ``rpc_timeout`` seconds from the moment its frame is written; 20,000 posts in flight need
more than its 30 s default on a busy machine, so both servers' runs use ``--rpc-timeout`` (600 s).
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
from ag2.network import Envelope, Hub, HubClient, InboxBlock, LimitsBlock, Passport, Rule
from ag2.network.transport import WsLink, serve_ws


async def serve(directory: str) -> None:
    """AG2's hub on disk, over WebSocket, until stdin closes."""
    hub = await Hub.open(DiskKnowledgeStore(directory))
    async with serve_ws(hub, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        print(f"listening on ws://127.0.0.1:{port}", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await hub.close()


RPC_TIMEOUT = 600.0
"""Seconds AG2's client waits for each answer (``HubClient(rpc_timeout=)``); set by ``--rpc-timeout``."""


class Inbox:
    """Counts one human's distinct deliveries (and duplicates) and wakes a waiter at a target."""

    def __init__(self) -> None:
        self.ids: set[str] = set()
        """Distinct envelopes since the last :meth:`expect`."""
        self.ever: set[str] = set()
        """Every distinct envelope (a duplicate of an earlier round counts too)."""
        self.duplicates = 0
        self.target = 0
        self.done: asyncio.Future[None] | None = None

    @property
    def seen(self) -> int:
        return len(self.ids)

    def expect(self, n: int) -> asyncio.Future[None]:
        self.ids, self.target = set(), n
        self.done = asyncio.get_running_loop().create_future()
        return self.done

    async def __call__(self, envelope: Envelope) -> None:
        if not envelope.event_type.startswith("bench."):
            return
        if envelope.envelope_id in self.ever:
            self.duplicates += 1
            return
        self.ever.add(envelope.envelope_id)
        self.ids.add(envelope.envelope_id)
        if self.done is not None and self.seen >= self.target and not self.done.done():
            self.done.set_result(None)


NO_INBOX_CAP = Rule(limits=LimitsBlock(inbox=InboxBlock(max_pending=0)))
"""The participants' rule: AG2's default caps an inbox at 1,000 unanswered envelopes (on both hubs), and
the one-way receivers answer none; ``max_pending=0`` turns the cap off, as AG2 documents."""


async def _humans(url: str, n: int, tag: str) -> tuple[list[HubClient], list[Any]]:
    """``n`` humans, each on its own ``HubClient`` (its own WebSocket), registered with :data:`NO_INBOX_CAP`."""
    hubs, humans = [], []
    for i in range(n):
        hub = await HubClient(WsLink(url), rpc_timeout=RPC_TIMEOUT).open()
        humans.append(await hub.register_human(Passport(name=f"{tag}-{i}", kind="human"), rule=NO_INBOX_CAP))
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


async def rtt(url: str, iterations: int) -> tuple[dict[str, float], dict[str, int]]:
    """Request / reply: A posts a ping to B, B's callback posts a pong, A waits for it (20 warm-up
    rounds, then ``iterations`` measured). Returns the figures and the counts."""
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
    pongs = 0
    for i in range(iterations + 20):
        done = inbox.expect(1)
        start = time.perf_counter()
        await a.post_envelope(_env(a, channel_id, "bench.ping", [b.agent_id]))
        await done
        pongs += inbox.seen
        if i >= 20:
            samples.append((time.perf_counter() - start) * 1000)
    for hub in hubs:
        await hub.close()
    samples.sort()
    figures = {"rtt_p50_ms": statistics.median(samples), "rtt_p99_ms": samples[max(int(len(samples) * 0.99) - 1, 0)]}
    return figures, {"rtt_round_trips": len(samples) + 20, "rtt_pongs": pongs, "rtt_duplicates": inbox.duplicates}


async def one_way(url: str, count: int, receivers: int, window: int) -> tuple[float, dict[str, int]]:
    """A posts ``count`` envelopes to ``receivers`` humans right after ``open()`` returns, ``window`` in
    flight (0: all of them at once); deliveries/s until every receiver had every one. Returns the rate
    and the counts: posts answered, distinct envelopes delivered over all receivers, duplicates."""
    tag = uuid.uuid4().hex[:6]
    hubs, humans = await _humans(url, receivers + 1, f"ow{receivers}-{tag}")
    sender, rest = humans[0], humans[1:]
    channel_id = await _channel(sender, [h.agent_id for h in rest], "conversation" if receivers == 1 else "discussion")
    inboxes = [Inbox() for _ in rest]
    for human, inbox in zip(rest, inboxes, strict=True):
        human.on_envelope(inbox)
    waits = [inbox.expect(count) for inbox in inboxes]
    gate = asyncio.Semaphore(window or count)

    async def post() -> str:
        async with gate:
            return await sender.post_envelope(_env(sender, channel_id, "bench.msg", None))

    start = time.perf_counter()
    posted = await asyncio.gather(*(post() for _ in range(count)))
    await asyncio.gather(*waits)
    elapsed = time.perf_counter() - start
    for hub in hubs:
        await hub.close()
    counts = {
        "posted": len(set(posted)),
        "delivered": sum(inbox.seen for inbox in inboxes),
        "duplicates": sum(inbox.duplicates for inbox in inboxes),
    }
    return count * receivers / elapsed, counts


async def run(url: str, iterations: int, count: int, fanout: int, window: int) -> dict[str, dict[str, Any]]:
    """All three workloads (``fanout`` posts to 8 receivers): the figures and the counts."""
    figures, counts = await rtt(url, iterations)
    out: dict[str, float] = dict(figures)
    out["throughput_per_s"], one = await one_way(url, count, 1, window)
    out["fanout8_deliveries_per_s"], fan = await one_way(url, fanout, 8, window)
    counts.update({f"throughput_{k}": v for k, v in one.items()})
    counts.update({f"fanout8_{k}": v for k, v in fan.items()})
    return {"figures": out, "counts": counts}


def main() -> None:
    """``serve DIR`` or ``run URL`` (module docstring)."""
    global RPC_TIMEOUT
    parser = argparse.ArgumentParser(prog="ag2_peer")
    sub = parser.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("directory")
    r = sub.add_parser("run")
    r.add_argument("url")
    r.add_argument("--iterations", type=int, default=200)
    r.add_argument("--count", type=int, default=20_000)
    r.add_argument("--fanout-posts", type=int, default=2_500, help="posts of the 8-way fan-out")
    r.add_argument("--window", type=int, default=0, help="posts in flight (0: every post at once)")
    r.add_argument("--rpc-timeout", type=float, default=RPC_TIMEOUT, help="AG2 HubClient(rpc_timeout=)")
    args = parser.parse_args()
    if args.cmd == "serve":
        asyncio.run(serve(args.directory))
    else:
        RPC_TIMEOUT = args.rpc_timeout
        report = asyncio.run(run(args.url, args.iterations, args.count, args.fanout_posts, args.window))
        print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
