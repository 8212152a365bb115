"""Fixtures for hub integration tests: a real hub on a free port, on each store.

Every test of a module that builds hubs with the harness (the ``hub`` fixture or
``running_hub``) runs twice: on SQLite and on Redis (the session's redis-server, DB 1,
flushed after each test). A test that is about the SQLite file itself carries
``@pytest.mark.sqlite_only("why")`` and runs on SQLite alone.

``AGENTNET_HUB_TEST_STORES`` (comma-separated) replaces the store kinds, e.g.
``redis-cluster`` runs the harness-built tests on the session's local Redis Cluster
(``redis+cluster://``, the hub's keys under one hash tag) instead, ``redis-cluster-spread`` on
the Cluster with each channel under its own hash tag (``?spread=1``); the replica and store
tests (test_replicas.py, test_redis_store.py) run on the Cluster, both layouts, in every run.
``redis-divided`` runs them against a replica that holds no channel (``--partitions 1``, a second
replica holding the one partition): every channel is held elsewhere, so every call about it is
forwarded and every delivery is told by channel notices (docs/scale-out.md). Tests that read the
serving replica's own memory (what it holds, its live-channel counts) do not apply there.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from hubsvc.storage.sqlite import SqliteHubStore
from tests.hubsvc import harness
from tests.hubsvc.harness import Participant, RunningHub, conversation, register, running_hub

STORE_KINDS = ("sqlite", "redis", "redis-cluster", "redis-cluster-spread", "redis-divided")
STORES = [k for k in os.environ.get("AGENTNET_HUB_TEST_STORES", "sqlite,redis").split(",") if k]
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
    with harness.on_redis(request, kind, REDIS_DB):
        yield kind


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
