"""Pending turns through a replica whose holder is silent (docs/scale-out.md "Channels divided among the
replicas"): the Welcome comes without them, marked truncated, and the SDK lists them again while the
listing answers UNAVAILABLE — so a turn the identity acked before its process went away is still run
once the channel's holder answers (here: once the channel moved to a replica that does).

Two replicas are real gRPC servers in this process on one redis-server with 8 partitions
(tests/hubsvc/test_divided_replicas.py); the clients are the public SDK.
"""

from __future__ import annotations

from agentsdk.network import HubClient, Passport
from tests.agentsdk.network.test_session_steering import open_conversation, recording
from tests.eventually import assert_eventually
from tests.hubsvc.test_divided_replicas import Divided, divided, holder, holding_and_not, redis_url

__all__ = ["divided", "redis_url"]  # the fixtures this module's tests use


async def test_a_turn_left_out_of_a_truncated_welcome_is_run_once_its_holder_answers(divided: Divided) -> None:
    a = await divided.start()
    b = await divided.start()
    await divided.settled()
    a, b = holding_and_not(a, b)
    async with HubClient.connect(a.target) as on_a, HubClient.connect(b.target, follow_redirects=False) as on_b:
        alice = await on_a.register_human(Passport(name="alice", kind="human"), pull=False)
        bob = await on_b.register_human(Passport(name="bob", kind="human"), pull=False)
        channel_id = await open_conversation(alice, bob, type="consulting")
        assert holder(divided.hubs, channel_id) is a
        handled: list[str] = []
        bob.on_envelope(recording(handled))
        question = await alice.send(channel_id, "what is 6 x 7?")

        async def acked() -> bool:
            return handled == [question.text]

        await assert_eventually(acked, timeout=10)

        async def cursor_stored() -> bool:  # acked, and the hub's periodic flush stored the cursor
            cursors = await b.core.store.load_cursors(bob.agent_id)
            return cursors.get(channel_id, 0) >= question.seq

        await assert_eventually(cursor_stored, timeout=10)
        credential = bob.credential
        await bob.disconnect()
        # a stops answering gRPC but keeps its leases: b cannot ask it for bob's turn.
        await a.server.running.server.stop(0)
        async with HubClient.connect(b.target, follow_redirects=False) as again:
            back: list[str] = []
            bob = await again.resume_human(credential, on_envelope=recording(back))
            assert bob.pending_turns == []  # the Welcome came without the holder's turn
            await divided.stop(a)  # a's partitions move to b, which then lists the turn itself

            async def run_again() -> bool:
                return back == [question.text]

            await assert_eventually(run_again, timeout=20)
