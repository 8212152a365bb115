"""Session steering (docs/scale-out.md "Session steering"): with the channels divided among replicas,
a replica asks a Connect stream whose client follows redirects to move to the replica holding most
of its channels, once envelopes of a channel held elsewhere reach it; a client that did not ask for
redirects is never sent one.

Replicas are real gRPC servers in this process on one redis-server (tests/hubsvc/test_divided_replicas.py).
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from hubsvc.core.steering import best_replica
from tests.eventually import assert_eventually
from tests.hubsvc.harness import Participant, RunningHub, open_channel, register
from tests.hubsvc.test_divided_replicas import OPTIONS, Divided, divided, holder, holding_and_not, redis_url
from tests.hubsvc.test_replicas import on

__all__ = ["divided", "redis_url"]  # the fixtures this module's tests use


async def members_on_two_replicas(
    divided: Divided, *, steer_interval: float = OPTIONS.steer_interval
) -> tuple[RunningHub, RunningHub, Participant, Participant, Participant, str, str]:
    """Two settled replicas ``a`` (holding partitions) and ``b``; alice on ``a``; bob (following
    redirects) and carol (not) on ``b``; a conversation of alice with each, opened by her, held by ``a``."""
    options = dataclasses.replace(OPTIONS, steer_interval=steer_interval)
    a = await divided.start(options)
    b = await divided.start(options)
    await divided.settled()
    a, b = holding_and_not(a, b)
    alice = await register(a.target, "alice")
    bob = on(b, await register(a.target, "bob"))
    carol = on(b, await register(a.target, "carol"))
    await alice.connect()
    await bob.connect(follows_redirects=True)
    await carol.connect()
    with_bob = await open_channel(alice, "conversation", [bob])
    with_carol = await open_channel(alice, "conversation", [carol])
    assert holder(divided.hubs, with_bob) is a and holder(divided.hubs, with_carol) is a
    return a, b, alice, bob, carol, with_bob, with_carol


async def test_a_stream_whose_channel_is_held_elsewhere_is_redirected_to_its_holder(divided: Divided) -> None:
    a, b, alice, bob, carol, channel_id, with_carol = await members_on_two_replicas(divided)
    said = await alice.say(channel_id, "hello")
    await bob.until(said.envelope_id)
    await carol.until((await alice.say(with_carol, "hello")).envelope_id)

    async def redirected() -> bool:
        return bool(bob.redirects)

    await assert_eventually(redirected, timeout=10)
    [redirect] = bob.redirects
    assert redirect.address == b.core.placement.owner_address(channel_id) == a.target
    assert a.target in redirect.reason and "1 of your 1 live channels" in redirect.reason
    # The stream stays usable where it is until the client moves it; carol asked for no redirects.
    marker = await alice.say(channel_id, "still here")
    await bob.until(marker.envelope_id)
    await carol.until((await alice.say(with_carol, "still here")).envelope_id)
    assert carol.redirects == [] and len(bob.redirects) == 1  # at most one per --steer-interval
    # Moved, bob's stream is on the holder: nothing there is held elsewhere, so nothing redirects it.
    await bob.close()
    bob = on(a, bob)
    await bob.connect(follows_redirects=True)
    marker = await alice.say(channel_id, "on the holder now")
    await bob.until(marker.envelope_id)
    assert bob.redirects == []
    for p in (alice, bob, carol):
        await p.close()


async def test_steering_interval_zero_sends_no_redirect(divided: Divided) -> None:
    _, b, alice, bob, carol, channel_id, _ = await members_on_two_replicas(divided, steer_interval=0)
    assert b.core.sessions.steering is None
    for text in ("one", "two", "three"):
        said = await alice.say(channel_id, text)
        await bob.until(said.envelope_id)
    assert bob.redirects == []
    for p in (alice, bob, carol):
        await p.close()


def test_a_stream_moves_only_to_a_replica_holding_strictly_more_of_its_channels() -> None:
    assert best_replica(0, Counter()) is None
    assert best_replica(1, Counter({"h:1": 1})) is None  # a tie stays
    assert best_replica(1, Counter({"h:1": 2, "h:2": 1})) == "h:1"
    assert best_replica(0, Counter({"h:1": 1})) == "h:1"
    assert best_replica(3, Counter({"h:1": 2, "h:2": 2})) is None


async def test_a_stream_that_only_posts_into_a_channel_held_elsewhere_is_redirected_too(divided: Divided) -> None:
    a, b, alice, bob, carol, channel_id, _ = await members_on_two_replicas(divided)
    # Bob comes back after everything was delivered: nothing reaches him from a any more, but he posts.
    await bob.close()
    bob = on(b, bob)
    await bob.connect(follows_redirects=True)
    said = await bob.say(channel_id, "a question from b")
    await alice.until(said.envelope_id)

    async def redirected() -> bool:
        return bool(bob.redirects)

    await assert_eventually(redirected, timeout=10)
    assert bob.redirects[0].address == a.target
    for p in (alice, bob, carol):
        await p.close()
