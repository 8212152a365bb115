"""OperatorService.Backup / `agentnet backup`: a consistent copy of the SQLite store taken while writers
post, which a hub then serves as it was (docs/operations.md "Data over time")."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
from pathlib import Path

import pytest
from agentnet.v1 import hub_pb2

from agentsdk.operator import OperatorClient, write_backup
from netkernel.errors import FailedPrecondition, NotFound
from tests.hubsvc.harness import Participant, conversation, make_envelope, open_channel, register, running_hub

pytestmark = pytest.mark.sqlite_only("the backup of a SQLite file (Redis: tests/hubsvc/test_redis_backup.py)")


async def _write_until(p: Participant, channel_id: str, stop: asyncio.Event, size: int = 50) -> int:
    """Post batches of ``size`` envelopes into the channel until ``stop``; returns how many."""
    posted = 0
    while not stop.is_set():
        text = "x" * 500
        batch = [make_envelope(channel_id, "ag2.msg.text", {"text": f"m{posted + i} {text}"}) for i in range(size)]
        results = await p.post_batch(batch)
        assert all(r.WhichOneof("result") == "envelope" for r in results)
        posted += size
    return posted


def _check_file(out: Path, size: int, sha256: str, hub_dir: Path) -> None:
    """The written copy is what the hub sent, its ``.part`` file is gone, and so is the hub's temporary copy."""
    assert size == os.path.getsize(out) and sha256 == hashlib.sha256(out.read_bytes()).hexdigest()
    assert not out.with_name(out.name + ".part").exists()
    assert not [p for p in hub_dir.iterdir() if p.name.startswith(".agentnet-backup-")]


async def _wal(operator: OperatorClient, channel_id: str) -> list[bytes]:
    return [env.SerializeToString() async for env in operator.read_wal(channel_id)]


async def test_a_backup_under_load_is_a_prefix_that_a_hub_serves(tmp_path: Path) -> None:
    out = tmp_path / "copy" / "hub-backup.db"
    out.parent.mkdir()
    async with running_hub(tmp_path / "hub.db") as hub:
        alice, bob, first = await conversation(hub.target)
        carol = await register(hub.target, "carol")
        await carol.connect()
        second = await open_channel(bob, "conversation", [carol])
        await alice.post_batch([make_envelope(first, "ag2.msg.text", {"text": "warm-up"})])
        stop = asyncio.Event()
        writers = [
            asyncio.create_task(_write_until(alice, first, stop)),
            asyncio.create_task(_write_until(carol, second, stop)),
        ]
        async with OperatorClient(hub.target, hub.operator_token) as operator:
            await asyncio.sleep(0.2)  # writers in full swing
            before = (await operator.describe_channel(first)).channel.last_seq
            summary = await write_backup(operator, out)
            after = (await operator.describe_channel(first)).channel.last_seq
            stop.set()
            posted = sum(await asyncio.gather(*writers))
            assert posted > 0 and after > before  # posts went on around the copy
            live_first, live_second = await _wal(operator, first), await _wal(operator, second)
            cursors = await hub.core.store.load_cursors(bob.agent_id)
        _check_file(out, summary.size_bytes, summary.sha256, tmp_path)
        for p in (alice, bob, carol):
            await p.close()

    # Restore: a hub on the copy serves it as it was at the moment of the copy.
    async with running_hub(out) as restored:
        async with OperatorClient(restored.target, restored.operator_token) as operator:
            for live, channel_id in ((live_first, first), (live_second, second)):
                copied = await _wal(operator, channel_id)
                assert copied == live[: len(copied)]  # a prefix, byte for byte
                assert len(copied) >= 3  # at least the open handshake and the warm-up
            seqs = [env.seq async for env in operator.read_wal(first)]
            assert seqs == list(range(1, len(seqs) + 1))  # contiguous
        copied_cursors = await restored.core.store.load_cursors(bob.agent_id)
        assert copied_cursors and all(copied_cursors[c] <= cursors[c] for c in copied_cursors)
        # Every identity authenticates against the copy with the credential it had, and posts go on.
        for old in (alice, bob, carol):
            again = Participant(restored.target, old.record, old.credential)
            me = await again.rpc("ListChannels", hub_pb2.ListChannelsRequest())
            assert me.channels
            await again.close()
        alice2 = Participant(restored.target, alice.record, alice.credential)
        await alice2.connect()
        env = await alice2.say(first, "after the restore")
        assert env.seq == len(seqs) + 1
        await alice2.close()


async def test_a_backup_never_overwrites_and_an_in_memory_hub_has_none(tmp_path: Path) -> None:
    async with running_hub(tmp_path / "hub.db") as hub:
        async with OperatorClient(hub.target, hub.operator_token) as operator:
            taken = tmp_path / "taken.db"
            taken.write_bytes(b"mine")
            with pytest.raises(FileExistsError):
                await write_backup(operator, taken)
            assert taken.read_bytes() == b"mine"
            with pytest.raises(NotFound):
                await operator.describe_channel("0" * 32)
    async with running_hub(Path(":memory:")) as hub:
        async with OperatorClient(hub.target, hub.operator_token) as operator:
            with pytest.raises(FailedPrecondition, match="in memory"):
                await write_backup(operator, tmp_path / "none.db")
    assert not (tmp_path / "none.db").exists()
    with contextlib.suppress(FileNotFoundError):
        assert not (tmp_path / "none.db.part").exists()
