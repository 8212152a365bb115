"""A rolling restart: three hub replicas on one Redis, each stopped cleanly (SIGTERM) and started
again on its port in turn while conversations keep posting through every one of them.

Real processes (a redis-server, three ``python -m hubsvc --store redis://`` replicas) and the public
SDK. Conversation ``i``'s sender prefers replica ``i`` and its receiver replica ``i + 1``, so every
replica serves senders and receivers and every stop moves some of each. Posts never stop; the
application never retries: whatever the stops cost must be absorbed by the SDK (an ``UNAVAILABLE``
retried with the post's idempotency key). Afterwards every post the SDK acknowledged is in its WAL
exactly once, the seqs are contiguous, each receiver handled every text once and in seq order, and
each client whose replica was stopped began a new session elsewhere (docs/scale-out.md, "Rolling
restart").
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from agentsdk.network.clients import NetworkClient
from agentsdk.network.hub_client import HubClient
from agentsdk.operator import OperatorClient
from hubsvc.core.partition_map import assign
from netkernel.envelope import EV_TEXT, Envelope
from netkernel.identity import Passport
from tests.eventually import assert_eventually
from tests.redis_server import RedisServer
from tests.replicas import Replicas, replicas

DB = 8
"""The DB number of these tests (flushed after each)."""
PAIRS, POSTERS, PACE = 3, 2, 0.02
"""Conversations, the posting tasks of each one's sender (so posts are in flight at every stop), and
the seconds each task rests between posts (a steady load, not a flood the two CI cores drown in)."""
DIVIDED = ["--partitions", "16", "--replica-ttl", "2", "--replica-refresh", "0.3"]
"""Channels divided among the replicas (docs/scale-out.md): a stopped replica hands its partitions over."""


@pytest.fixture
def url(redis_server: RedisServer) -> Iterator[str]:
    yield redis_server.url(DB)
    redis_server.flush(DB)


@pytest.mark.parametrize("extra_args", [[], DIVIDED], ids=["every-replica-holds-all", "divided"])
async def test_replicas_restarted_one_at_a_time_under_load_lose_nothing_and_refuse_nothing(
    url: str, tmp_path: Path, extra_args: list[str]
) -> None:
    with replicas(url, tmp_path, 3, extra_args=extra_args) as hubs:
        t = hubs.targets

        def preferring(r: int) -> list[str]:  # pick_first: replica r, else the next that answers
            return [t[(r + k) % 3] for k in range(3)]

        handled: list[list[Envelope]] = [[] for _ in range(PAIRS)]
        async with AsyncExitStack() as stack:

            async def client(r: int) -> HubClient:
                return await stack.enter_async_context(HubClient.connect(preferring(r)))

            senders = [
                await (await client(i)).register_human(Passport(name=f"s{i}", kind="human")) for i in range(PAIRS)
            ]
            receivers = [
                await (await client(i + 1)).register_human(Passport(name=f"r{i}", kind="human")) for i in range(PAIRS)
            ]
            for i in range(PAIRS):
                receivers[i].on_envelope(_recorder(handled[i]))
            on_replica: list[list[NetworkClient]] = [[senders[r], receivers[(r - 1) % 3]] for r in range(3)]
            chans = [await senders[i].open(type="conversation", target=f"r{i}") for i in range(PAIRS)]
            posted = [[await senders[i].send(chans[i].channel_id, f"before {i}")] for i in range(PAIRS)]
            await assert_eventually(lambda: all(len(h) == 1 for h in handled))

            done = asyncio.Event()

            async def post_until_done(i: int, k: int) -> list[Envelope]:
                acked: list[Envelope] = []
                while not done.is_set():  # any error the SDK did not absorb fails the test
                    acked.append(await senders[i].send(chans[i].channel_id, f"during {i}.{k}.{len(acked)}"))
                    await asyncio.sleep(PACE)  # pacing the load, not waiting for a condition
                return acked

            posters = [asyncio.create_task(post_until_done(i, k)) for i in range(PAIRS) for k in range(POSTERS)]

            def received() -> int:
                return sum(len(h) for h in handled)

            async def load_flows() -> None:  # every conversation advances, through every replica
                marks = [len(h) for h in handled]
                await assert_eventually(lambda: all(len(handled[i]) >= marks[i] + 5 for i in range(PAIRS)), timeout=30)
                assert not any(p.done() for p in posters), [p.exception() for p in posters if p.done()]

            for r in range(3):
                await load_flows()
                # With the channels divided, a stream may have been moved by a Redirect to its channel's
                # holder (docs/scale-out.md "Session steering"): those moved to r move on too.
                here = [c for c in on_replica[r] if c.redirected_to is None]
                here += [c for c in (*senders, *receivers) if c.redirected_to == t[r]]
                moving = [(c, c.session_id) for c in here]
                assert all(s for _, s in moving)
                assert await asyncio.to_thread(hubs.kill, r, signal.SIGTERM) == 0, hubs.output(r)
                # The stopped replica's clients begin new sessions on the others, posts go on.
                await assert_eventually(
                    lambda moving=moving: all(c.session_id not in ("", s) for c, s in moving),
                    timeout=30,
                )
                await load_flows()
                await asyncio.to_thread(hubs.restart, r)
                await _rejoined(hubs, r, tmp_path, divided=bool(extra_args))
            await load_flows()
            done.set()
            during = await asyncio.wait_for(asyncio.gather(*posters), 60)
            for n, acked in enumerate(during):
                posted[n // POSTERS] += acked
            for i in range(PAIRS):
                posted[i].append(await senders[i].send(chans[i].channel_id, "last"))
            await assert_eventually(lambda: all(len(handled[i]) >= len(posted[i]) for i in range(PAIRS)), timeout=30)
            for i in range(PAIRS):
                by_seq = [p.envelope_id for p in sorted(posted[i], key=lambda e: e.seq)]
                assert [e.envelope_id for e in handled[i]] == by_seq  # once each, in seq order
                wal = await receivers[i].read_wal(chans[i].channel_id)
                assert [e.seq for e in wal] == list(range(1, len(wal) + 1))
                texts = [e for e in wal if e.event_type == EV_TEXT]
                keys = [e.idempotency_key for e in texts]
                assert None not in keys and len(set(keys)) == len(keys)
                assert sorted(keys) == sorted(p.idempotency_key for p in posted[i])  # each acked post once, no other
            assert received() > 3 * PAIRS * 10
        assert hubs.stop_all() == [0, 0, 0]


async def _rejoined(hubs: Replicas, r: int, data_dir: Path, *, divided: bool) -> None:
    """Wait until replica ``r``, started again, serves, and (``divided``) every replica sees each
    partition held where the rendezvous assignment of the three puts it (replica ``r`` may be given
    none: with 16 partitions that happens once in about 600 restarts)."""
    token = (data_dir / "hub-operator.token").read_text().strip()
    async with AsyncExitStack() as stack:
        ops = [await stack.enter_async_context(OperatorClient(hubs.target(j), token, timeout=5)) for j in range(3)]

        async def settled() -> bool:
            statuses = [await op.status() for op in ops]
            if not divided:
                return True
            views = [{o.partition: o.replica_id for o in s.partitions.owners} for s in statuses]
            count = statuses[0].partitions.count
            held = [set(s.partitions.held) for s in statuses]
            should = assign(count, [s.replica_id for s in statuses])  # the rendezvous assignment of the three
            assert all(v == should for v in views), (should, views)
            assert all(held[j] == {p for p, o in should.items() if o == s.replica_id} for j, s in enumerate(statuses))
            return True

        await assert_eventually(settled, timeout=30)


def _recorder(into: list[Envelope]) -> Callable[[Envelope], Awaitable[None]]:
    async def record(env: Envelope) -> None:
        if env.event_type == EV_TEXT:
            into.append(env)

    return record
