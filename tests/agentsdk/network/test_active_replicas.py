"""Three hub replicas serving at once on one Redis; one is SIGKILLed in the middle of a load.

Real processes: a redis-server and three ``python -m hubsvc --store redis://`` replicas
(``tests/replicas.py``). Each conversation's sender starts on replica 0 and its receiver on
replica 1 (even pairs: every post crosses replicas, through the change feed) or also on
replica 0 (odd pairs). Replica 0 dies with posts in flight: the senders and the odd receivers
move to the replicas left, every acknowledged post is in the WAL once, every receiver's
handler gets every post once, and a channel TTL armed before the kill still expires.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from agentsdk.network.hub_client import HubClient
from netkernel.envelope import EV_CHANNEL_CLOSED, EV_CHANNEL_EXPIRED, EV_TEXT, Envelope
from netkernel.identity import Passport
from tests.eventually import assert_eventually
from tests.redis_server import RedisServer
from tests.replicas import replicas

DB = 7
"""The DB number of these tests (flushed after each)."""
PAIRS, IN_FLIGHT, PER_POSTER = 4, 4, 30


@pytest.fixture
def url(redis_server: RedisServer) -> Iterator[str]:
    yield redis_server.url(DB)
    redis_server.flush(DB)


DIVIDED = ["--partitions", "8", "--replica-ttl", "2", "--replica-refresh", "0.3"]
"""Channels divided among the replicas (docs/scale-out.md): the dead replica's channels move to the others."""


@pytest.mark.parametrize("extra_args", [[], DIVIDED], ids=["every-replica-holds-all", "divided"])
async def test_a_replica_killed_under_load_loses_nothing_and_its_clients_move(
    url: str, tmp_path: Path, extra_args: list[str]
) -> None:
    with replicas(url, tmp_path, 3, extra_args=extra_args) as hubs:
        t = hubs.targets
        first_0, first_1 = [t[0], t[2], t[1]], [t[1], t[2], t[0]]  # pick_first: the first that answers
        handled: list[list[Envelope]] = [[] for _ in range(PAIRS)]
        async with AsyncExitStack() as stack:

            async def client(targets: list[str]) -> HubClient:
                return await stack.enter_async_context(HubClient.connect(targets))

            senders = [
                await (await client(first_0)).register_human(Passport(name=f"s{i}", kind="human")) for i in range(PAIRS)
            ]
            receivers = [
                await (await client(first_1 if i % 2 == 0 else first_0)).register_human(
                    Passport(name=f"r{i}", kind="human")
                )
                for i in range(PAIRS)
            ]
            closed: list[Envelope] = []
            for i in range(PAIRS):
                receivers[i].on_envelope(_recorder(handled[i], closed))
            chans = [await senders[i].open(type="conversation", target=f"r{i}") for i in range(PAIRS)]
            # A channel whose TTL runs out after replica 0 is dead: a survivor expires it.
            short = await senders[0].open(type="conversation", target="r0", ttl=4.0)
            posted = [[await senders[i].send(chans[i].channel_id, f"before {i}")] for i in range(PAIRS)]
            await assert_eventually(lambda: all(len(h) == 1 for h in handled))

            async def post_stream(i: int, task: int) -> list[Envelope]:
                return [await senders[i].send(chans[i].channel_id, f"during {i}.{task}.{n}") for n in range(PER_POSTER)]

            posters = [asyncio.create_task(post_stream(i, k)) for i in range(PAIRS) for k in range(IN_FLIGHT)]
            total = PAIRS * IN_FLIGHT * PER_POSTER
            await assert_eventually(lambda: sum(len(h) for h in handled) >= PAIRS + total // 3, timeout=60)
            assert not all(p.done() for p in posters)  # the kill lands in the middle of the load
            hubs.kill(0)
            during = await asyncio.wait_for(asyncio.gather(*posters), 120)  # retried on replicas 2 / 1
            for k, acked in enumerate(during):
                posted[k // IN_FLIGHT] += acked
            for i in range(PAIRS):
                posted[i].append(await senders[i].send(chans[i].channel_id, "last"))
            await assert_eventually(
                lambda: all(len(handled[i]) >= len(posted[i]) for i in range(PAIRS)),
                timeout=60,
            )
            for i in range(PAIRS):
                by_seq = [p.envelope_id for p in sorted(posted[i], key=lambda e: e.seq)]
                # Every receiver (moved with its replica's death or not) handled every acknowledged
                # post exactly once, in seq order.
                assert [e.envelope_id for e in handled[i]] == by_seq
                wal = await receivers[i].read_wal(chans[i].channel_id)
                assert [e.seq for e in wal] == list(range(1, len(wal) + 1))
                keys = [e.idempotency_key for e in wal if e.event_type == EV_TEXT]
                assert None not in keys and len(set(keys)) == len(keys) == len(posted[i])
            # The TTL armed on every replica fired on a survivor.
            await assert_eventually(lambda: any(e.channel_id == short.channel_id for e in closed), timeout=30)
        assert hubs.stop_all()[0] is None


def _recorder(into: list[Envelope], closed: list[Envelope] | None = None) -> Callable[[Envelope], Awaitable[None]]:
    async def record(env: Envelope) -> None:
        if env.event_type == EV_TEXT:
            into.append(env)
        elif env.event_type in (EV_CHANNEL_CLOSED, EV_CHANNEL_EXPIRED) and closed is not None:
            closed.append(env)

    return record
