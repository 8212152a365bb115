"""A channel's envelopes reach every member's session in seq order, however their commits went.

A small SQLite write that finds the event loop idle is committed inline and its envelopes are
handed to the sessions at once, while a write through the database thread is handed over one
loop turn after its commit. A session takes a channel's envelopes in seq order only (it drops
one whose seq is below one it was given, as a replayed copy), so a batch written inline while
the batch before it still waited for that turn would overtake it, and the member would never
receive the earlier envelope (its cursor moved past it). The hub runs in a process of its own
here, as in production: sharing the test's event loop, it would seldom find the loop idle.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from netkernel.envelope import EV_TEXT
from tests.hubsvc.harness import conversation
from tests.procs import ROOT, serving

POSTS = 1000
"""Posts in flight together, each in a Post frame of its own (one small commit each, mostly)."""


async def test_every_post_of_a_burst_of_single_post_frames_is_delivered(tmp_path: Path) -> None:
    args = ["--db", str(tmp_path / "hub.db"), "--data-dir", str(tmp_path), "--log-level", "WARNING"]
    with serving("hubsvc", args, cwd=ROOT) as hub:
        alice, bob, channel_id = await conversation(hub.target)
        try:
            posted = await asyncio.gather(*(alice.say(channel_id, f"m{i}") for i in range(POSTS)))
            marker = await alice.say(channel_id, "marker")
            delivered = await bob.until(marker.envelope_id, timeout=60)
        finally:
            await alice.close()
            await bob.close()
    got = {env.seq for env in delivered if env.event_type == EV_TEXT}
    assert [p.seq for p in posted if p.seq not in got] == []
