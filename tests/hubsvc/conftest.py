"""Fixtures for hub integration tests: a real hub on a free port, on each store.

Every test of a module that builds hubs with the harness (the ``hub`` fixture or
``running_hub``) runs once per store kind of ``AGENTNET_HUB_TEST_STORES`` (comma-separated;
default ``sqlite,redis-replicas``, what ``make test`` runs). The Redis kinds use the session's
redis-server (DB 1, flushed after each test) or its local Redis Cluster:

* ``sqlite``: one hub on a SQLite file.
* ``redis-replicas``: each hub is three replicas on one Redis dividing 16 partitions
  (``--partitions``, docs/scale-out.md "Channels divided among the replicas"), all started alike;
  the participants a test registers talk to the replicas in turn, so a channel is held where its
  opener talks and elsewhere for the others. ``RunningHub.holder(channel_id)``,
  ``RunningHub.serving(participant)`` and ``RunningHub.replicas`` reach one replica's memory.
* ``redis``: one hub on Redis without partitions (the store and replica tests, test_redis_store.py
  and test_replicas.py, cover the undivided Redis replicas in every run).
* ``redis-divided`` (opt-in): each hub is the front of two replicas with ``--partitions 1``, holding
  none: every channel is held by the other, so every call about it is forwarded. The tests marked
  ``clients_on_one_replica`` fail there by design (the front never holds their channel), and so
  does the root-span check of test_tracing.py (a forwarded post's span continues the forward's).
* ``redis-cluster`` / ``redis-cluster-spread``: one hub on the Cluster, the hub's keys under one
  hash tag, or each channel under its own (``?spread=1``).

A test about the SQLite file itself carries ``@pytest.mark.sqlite_only("why")`` and runs on SQLite
alone. A test of behaviour docs/scale-out.md documents as differing when the participants talk to
different replicas (a follower's deliveries carry no ``can_send``) carries
``@pytest.mark.clients_on_one_replica("why")``: on the divided kinds its participants all talk to
the front replica.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from hubsvc.storage.sqlite import SqliteHubStore
from tests.hubsvc import harness
from tests.hubsvc.harness import Participant, RunningHub, conversation, register, running_hub

STORE_KINDS = (
    "sqlite",
    "redis",
    "redis-cluster",
    "redis-cluster-spread",
    "redis-divided",
    "redis-replicas",
    "redis-cluster-spread-replicas",
)
STORES = [k for k in os.environ.get("AGENTNET_HUB_TEST_STORES", "sqlite,redis-replicas").split(",") if k]
if not set(STORES) <= set(STORE_KINDS):
    raise ValueError(f"AGENTNET_HUB_TEST_STORES may name {', '.join(STORE_KINDS)}, not {STORES}")
REDIS_DB = 1
"""The DB number hub tests use (the knowledge tests use DB 0 of the same server)."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run harness-built hub tests on every store, unless marked ``sqlite_only``."""
    module = metafunc.module
    uses_harness = "hub" in metafunc.fixturenames or hasattr(module, "running_hub") or hasattr(module, "make_store")
    if uses_harness and metafunc.definition.get_closest_marker("sqlite_only") is None:
        metafunc.parametrize("hub_store", STORES, indirect=True)


@pytest.fixture(autouse=True)
def hub_store(request: pytest.FixtureRequest) -> Iterator[str]:
    """The store kind hubs of this test use ("sqlite" unless parametrised)."""
    kind = getattr(request, "param", "sqlite")
    if kind == "sqlite":
        yield kind
        return
    harness.STORE.together = request.node.get_closest_marker("clients_on_one_replica") is not None
    try:
        with harness.on_redis(request, kind, REDIS_DB):
            yield kind
    finally:
        harness.STORE.together = False


@pytest.fixture
async def hub(tmp_path: Path) -> AsyncIterator[RunningHub]:
    async with running_hub(tmp_path / "hub.db") as h:
        yield h


@pytest.fixture
async def trio(hub: RunningHub) -> AsyncIterator[tuple[Participant, Participant, Participant]]:
    """alice, bob and carol, registered and connected."""
    people = [await register(hub.target, n) for n in ("alice", "bob", "carol")]
    for p in people:
        await p.connect()
    yield people[0], people[1], people[2]
    for p in people:
        await p.close()


@pytest.fixture
async def conv(hub: RunningHub) -> AsyncIterator[tuple[Participant, Participant, str]]:
    """alice and bob, connected, in an opened conversation channel (closed afterwards)."""
    alice, bob, channel_id = await conversation(hub.target)
    yield alice, bob, channel_id
    await alice.close()
    await bob.close()


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteHubStore]:
    """An opened SQLite hub store on a fresh file, for tests of the SQLite store's own mechanics
    (a module that tests every store defines its own ``store``)."""
    s = SqliteHubStore(tmp_path / "hub.db")
    await s.open()
    yield s
    await s.close()
