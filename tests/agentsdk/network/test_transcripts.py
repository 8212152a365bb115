"""The transcript cache and the delivery's turn hint: what a turn needs from the hub without asking again."""

from __future__ import annotations

import pytest

from agentsdk.network._transcripts import TranscriptCache
from agentsdk.network.hub_client import Hub
from netkernel.envelope import Envelope
from netkernel.identity import Passport


def env(seq: int) -> Envelope:
    return Envelope(channel_id="c", sender_id="a", audience=None, event_type="x", event_data={}, seq=seq)


def test_prefix_is_what_was_recorded_up_to_the_bound() -> None:
    cache = TranscriptCache()
    assert cache.prefix("c", 10) == ([], 0)
    cache.extend("c", 0, 5, [(env(2), 10), (env(4), 10)])  # 1, 3 and 5 were not for this reader
    envelopes, covered = cache.prefix("c", 3)
    assert [e.seq for e in envelopes] == [2] and covered == 3
    envelopes, covered = cache.prefix("c", 9)
    assert [e.seq for e in envelopes] == [2, 4] and covered == 5
    cache.extend("c", 5, 8, [(env(7), 10)])
    assert [e.seq for e in cache.prefix("c", 8)[0]] == [2, 4, 7] and cache.size == 30


def test_a_read_that_does_not_continue_the_prefix_is_ignored() -> None:
    cache = TranscriptCache()
    cache.extend("c", 0, 5, [(env(5), 10)])
    cache.extend("c", 7, 9, [(env(9), 10)])  # a gap (6, 7) would make later prefixes wrong
    cache.extend("c", 2, 6, [(env(6), 10)])  # overlaps what is held
    assert [e.seq for e in cache.prefix("c", 100)[0]] == [5] and cache.prefix("c", 100)[1] == 5


def test_bounded_in_bytes_least_recently_read_channel_first() -> None:
    cache = TranscriptCache(max_bytes=100)
    cache.extend("old", 0, 1, [(env(1), 60)])
    cache.extend("new", 0, 1, [(env(1), 30)])
    cache.prefix("old", 1)  # read again: "new" is now the least recently read
    cache.extend("third", 0, 1, [(env(1), 30)])
    assert cache.prefix("new", 1) == ([], 0) and cache.prefix("old", 1)[1] == 1 and cache.size == 90
    off = TranscriptCache(max_bytes=0)
    off.extend("c", 0, 1, [(env(1), 1)])
    assert off.prefix("c", 1) == ([], 0)
    with pytest.raises(ValueError, match="max_bytes"):
        TranscriptCache(max_bytes=-1)


async def test_reads_before_a_seq_match_the_hub_as_the_channel_grows() -> None:
    async with Hub.open() as hub:
        alice = await hub.register_human(Passport(name="alice", kind="human"))
        bob = await hub.register_human(Passport(name="bob", kind="human"))
        carol = await hub.register_human(Passport(name="carol", kind="human"))
        channel = await alice.open(type="discussion", target=["bob", "carol"])
        cid = channel.channel_id
        for round_ in range(3):
            last = None
            for i, audience in enumerate([None, [bob.agent_id], [carol.agent_id]]):
                last = await alice.send_envelope(
                    Envelope(
                        channel_id=cid,
                        sender_id=alice.agent_id,
                        audience=audience,
                        event_type="myapp.note",
                        event_data={"round": round_, "i": i},
                    )
                )
            assert last is not None
            for reader in (bob, carol):
                hub_view = await reader.read_wal(cid, until_seq=last.seq - 1)
                cached = await reader.read_wal_before(cid, last.seq)
                assert [(e.seq, e.envelope_id, e.event_data) for e in cached] == [
                    (e.seq, e.envelope_id, e.event_data) for e in hub_view
                ]
                assert reader.transcripts.prefix(cid, last.seq - 1)[1] == last.seq - 1  # kept for the next turn
        # What bob may not see never enters his transcript; carol's holds hers.
        assert all(e.audience in (None, [bob.agent_id]) for e in await bob.read_wal_before(cid, last.seq + 1))
        # A forgotten channel is read again in full, with the same result.
        before = await carol.read_wal_before(cid, last.seq)
        carol.transcripts.forget(cid)
        assert [e.envelope_id for e in await carol.read_wal_before(cid, last.seq)] == [e.envelope_id for e in before]


def test_delivered_can_send_belongs_to_its_envelope_only() -> None:
    from agentsdk.network.turn_context import delivered_can_send, delivery_scope

    assert delivered_can_send("e1") is None
    with delivery_scope("e1", False):
        assert delivered_can_send("e1") is False
        assert delivered_can_send("e2") is None  # a handler delegating another envelope asks CanSend
        with delivery_scope("e2", None):
            assert delivered_can_send("e2") is None
        assert delivered_can_send("e1") is False
    assert delivered_can_send("e1") is None
