"""Inbox caps across replicas that divide the channels when one of them dies (docs/governance.md "Inbox
caps"): the dead replica's published counts stop counting, its channels' counts move with its partitions
to the new holder (which rebuilds them from the WAL), and the cap still holds — neither lost nor counted
twice."""

from __future__ import annotations

import pytest

from netkernel.errors import InboxFull
from netkernel.tasks import cancel_and_wait
from tests.eventually import assert_eventually
from tests.hubsvc.harness import Participant, RunningHub, open_channel, register
from tests.hubsvc.test_divided_replicas import Divided, divided, holder, redis_url
from tests.hubsvc.test_inbox_caps import inbox_policy
from tests.hubsvc.test_replicas import on

__all__ = ["divided", "redis_url"]  # the fixtures this module's tests use

CAP = 2


async def two_holding(divided: Divided) -> tuple[RunningHub, RunningHub]:
    """Two settled replicas that each hold partitions (a third is started if rendezvous left one none)."""
    hubs = [await divided.start(), await divided.start()]
    await divided.settled()
    holding = [h for h in hubs if h.core.placement.ownership is not None and h.core.placement.ownership.held]
    if len(holding) < 2:
        hubs.append(await divided.start())
        await divided.settled()
        holding = [h for h in hubs if h.core.placement.ownership is not None and h.core.placement.ownership.held]
    assert len(holding) >= 2
    return holding[0], holding[1]


async def test_a_dead_replicas_counts_move_with_its_channels(divided: Divided) -> None:
    a, b = await two_holding(divided)
    for hub in divided.hubs:
        hub.core.governance.replace(inbox_policy("bob", CAP))
    alice, carol = await register(a.target, "alice"), on(b, await register(a.target, "carol"))
    bob = await register(a.target, "bob")
    people: list[Participant] = [alice, bob, carol]
    for p in people:
        await p.connect()
    try:
        with_alice = await open_channel(alice, "conversation", [bob])  # held by a
        with_carol = await open_channel(carol, "conversation", [bob])  # held by b
        assert holder(divided.hubs, with_alice) is a and holder(divided.hubs, with_carol) is b
        await alice.say(with_alice, "one")
        await carol.say(with_carol, "two")

        shared = a.core.shared_inboxes
        assert shared is not None

        async def read_elsewhere(n: int) -> bool:  # a reads the others' counts of bob once its copy is stale
            await shared.refresh([bob.agent_id])  # what admission does before each post
            return a.core.inboxes.elsewhere.get(bob.agent_id, 0) == n

        await assert_eventually(lambda: read_elsewhere(1))
        with pytest.raises(InboxFull):
            await alice.say(with_alice, "three")

        # b dies as a SIGKILL would leave it: no gRPC, no publish, no liveness beat, no lease renewal.
        await b.server.running.server.stop(0)
        await cancel_and_wait(b.core._loops)
        divided.stopped.add(id(b))
        await divided.settled()
        survivor = holder([h for h in divided.hubs if h is not b], with_carol)
        # b's count of bob counts only with its channel, on its new holder: the cap holds, once.
        if survivor is a:
            await assert_eventually(lambda: read_elsewhere(0))
        else:
            await assert_eventually(lambda: read_elsewhere(1))
        with pytest.raises(InboxFull) as refused:
            await alice.say(with_alice, "three")
        assert "2 envelopes wait" in refused.value.message
        await bob.say(with_carol, "two, answered")  # frees a place (through a, whoever holds it now)
        await assert_eventually(lambda: alice.say(with_alice, "three, now"))
    finally:
        for p in people:
            await p.close()
