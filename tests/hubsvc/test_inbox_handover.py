"""Inbox caps across replicas that divide the channels, when a replica stops: its published counts
go with it and its channels' counts move with its partitions to their new holder, which rebuilds
them from the WAL and publishes them (docs/governance.md "Inbox caps"), so the cap keeps counting
what waits there.

Replicas are real gRPC servers in this process on one redis-server (tests/hubsvc/test_divided_replicas.py).
"""

from __future__ import annotations

import itertools

import pytest

from hubsvc.core.partition_map import desired
from netkernel.errors import InboxFull
from netkernel.partitions import partition_of
from tests.eventually import assert_eventually
from tests.hubsvc.harness import RunningHub, open_channel, register
from tests.hubsvc.test_divided_replicas import PARTITIONS, Divided, divided, holder, redis_url
from tests.hubsvc.test_inbox_caps import inbox_policy
from tests.hubsvc.test_replicas import on

__all__ = ["divided", "redis_url"]  # fixtures used here

OPENINGS = 40
"""How many channels carol may open to get one in a partition that moves to ``b``."""


def replica_id(hub: RunningHub) -> str:
    """``hub``'s replica id (its partitions' owner name)."""
    ownership = hub.core.placement.ownership
    assert ownership is not None
    return ownership.replica_id


def held(hub: RunningHub) -> set[int]:
    """The partitions ``hub`` holds (a channel opened through it is held in one of them)."""
    ownership = hub.core.placement.ownership
    assert ownership is not None
    return set(ownership.held)


def roles(hubs: list[RunningHub]) -> tuple[RunningHub, RunningHub, RunningHub, set[int]]:
    """(a, c, b, moving): ``a`` and ``c`` hold partitions, and ``moving`` (not empty) are the partitions
    of ``c`` that go to ``b`` when ``c`` stops, so a channel in one of them is held by neither ``a`` nor
    ``c`` after the handover."""
    for a, c, b in itertools.permutations(hubs):
        moving = held(c) & desired(replica_id(b), PARTITIONS, [replica_id(a), replica_id(b)])
        if held(a) and moving:
            return a, c, b, moving
    raise AssertionError("no replica's partitions go to a third one when it stops")  # rendezvous: ~never


async def counted_by(hub: RunningHub, agent_id: str) -> int:
    """What ``hub`` counts as waiting for ``agent_id`` on every replica, read as admission reads it."""
    shared = hub.core.shared_inboxes
    assert shared is not None, "a replica dividing the channels shares its inbox counts"
    await shared.refresh([agent_id])
    return hub.core.inboxes.pending(agent_id) + hub.core.inboxes.elsewhere.get(agent_id, 0)


async def test_a_replica_that_stops_hands_its_inbox_counts_over(divided: Divided) -> None:
    """bob (cap 2) waits on a channel held by ``a`` and one held by ``c``; ``c`` stops cleanly and ``b``
    takes the second: the cap on ``a`` still counts both once ``b`` has rebuilt and published its
    count, and bob's answer there frees a place on ``a``."""
    policy = inbox_policy("bob", 2)
    hubs = [await divided.start(policy=policy) for _ in range(3)]
    await divided.settled()
    a, c, b, moving = roles(hubs)
    alice = await register(a.target, "alice")
    bob = await register(a.target, "bob")
    carol = on(c, await register(a.target, "carol"))
    for p in (alice, bob, carol):
        await p.connect()
    try:
        with_alice = await open_channel(alice, "conversation", [bob])
        with_carol = await open_channel(carol, "conversation", [bob])
        for _ in range(OPENINGS):  # opened in a partition c holds: one that will move to b
            if partition_of(with_carol, PARTITIONS) in moving:
                break
            with_carol = await open_channel(carol, "conversation", [bob])
        assert partition_of(with_carol, PARTITIONS) in moving, f"no channel of {OPENINGS} in {moving}"
        assert holder(divided.hubs, with_alice) is a
        assert holder(divided.hubs, with_carol) is c
        await alice.say(with_alice, "one")
        await carol.say(with_carol, "two")
        await assert_eventually(lambda: _counts(a, bob.agent_id, 2))

        await carol.close()
        await divided.stop(c)  # a clean stop: c withdraws its counts and hands its partitions over
        await divided.settled()
        live = [a, b]
        assert holder(live, with_carol) is b
        assert b.core.inboxes.pending(bob.agent_id) == 1  # rebuilt from the WAL
        await assert_eventually(lambda: _counts(a, bob.agent_id, 2))
        with pytest.raises(InboxFull):
            await alice.say(with_alice, "three")

        await bob.say(with_carol, "two, answered")  # through a, to the channel's new holder
        await assert_eventually(lambda: alice.say(with_alice, "three, now"))
        assert sum(h.core.inboxes.pending(bob.agent_id) for h in live) == 2
    finally:
        for p in (alice, bob):
            await p.close()


async def _counts(hub: RunningHub, agent_id: str, expected: int) -> bool:
    """Whether ``hub`` counts ``expected`` waiting for ``agent_id`` over every replica."""
    counted = await counted_by(hub, agent_id)
    assert counted == expected, f"{counted} counted, not {expected}"
    return True
