"""Fixtures for hub integration tests: a real hub on a free port."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.hub.harness import Participant, RunningHub, conversation, register, running_hub


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
