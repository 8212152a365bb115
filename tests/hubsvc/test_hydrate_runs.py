"""Hydrate folds a channel's WAL a run at a time (``FOLD_RUN`` envelopes): a WAL of several runs
comes back as the live channel it was, with the same inbox count, and the cap refuses as before."""

from __future__ import annotations

from pathlib import Path

import pytest
from agentnet.v1 import channel_pb2

from hubsvc.core.live_channels import FOLD_RUN
from netkernel.errors import InboxFull
from tests.hubsvc.harness import Participant, conversation, running_hub
from tests.hubsvc.test_inbox_caps import inbox_policy


async def test_a_wal_of_several_runs_hydrates_to_the_live_channel(tmp_path: Path) -> None:
    db = tmp_path / "hub.db"
    posts = 2 * FOLD_RUN + 7
    async with running_hub(db) as hub:
        alice, bob, channel_id = await conversation(hub.target)
        await bob.sync()
        await bob.disconnect()  # everything alice posts from here waits for bob
        for i in range(posts):
            keyed = {"idempotency_key": f"k{i}"} if i % 50 == 0 else {}
            await alice.say(channel_id, f"m{i}", **keyed)
        live = hub.holder(channel_id).core.channels.get(channel_id)
        assert live is not None
        state, last_seq = live.state, live.last_seq
        meta = channel_pb2.ChannelMetadata()
        meta.CopyFrom(live.meta)
        keys = dict(live.idempotent.items())
        assert hub.holder(channel_id).core.inboxes.pending(bob.agent_id) == posts
        await alice.close()
        await bob.channel.close()

    async with running_hub(db) as hub:
        rebuilt = hub.holder(channel_id).core.channels.get(channel_id)
        assert rebuilt is not None
        assert rebuilt.state == state and rebuilt.state.turns == posts
        assert rebuilt.meta == meta
        assert rebuilt.last_seq == rebuilt.committed_seq == last_seq
        assert dict(rebuilt.idempotent.items()) == keys
        assert hub.holder(channel_id).core.inboxes.pending(bob.agent_id) == posts
        # A cap set after the restart counts what hydrate counted.
        hub.set_policy(inbox_policy("bob", posts))
        alice = Participant(hub.target, alice.record, alice.credential)
        await alice.connect()
        with pytest.raises(InboxFull):
            await alice.say(channel_id, "one too many")
        hub.set_policy(inbox_policy("bob", posts + 1))
        await alice.say(channel_id, "room for one more")
        await alice.close()
