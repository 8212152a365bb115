"""The Redis store's backup and restore procedure of docs/operations.md "Data over time", run as written:
BGSAVE while writers post, copy the RDB file, start a redis-server on the copy, point a hub at it."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import redis.asyncio as aioredis
from agentnet.v1 import hub_pb2

from agentsdk.operator import OperatorClient
from hubsvc.server import start_hub
from hubsvc.storage.redis_store import RedisHubStore
from netkernel.errors import FailedPrecondition
from tests.eventually import assert_eventually
from tests.hubsvc.harness import OPERATOR_TOKEN, Participant, conversation, make_envelope
from tests.redis_server import start_redis_server

PREFIX = "agentnet:"


async def _bgsave_and_copy(url: str, directory: Path, out: Path) -> None:
    """The documented procedure: note LASTSAVE, BGSAVE, wait for a newer LASTSAVE with the save ok, copy dump.rdb."""
    client = aioredis.Redis.from_url(url)
    try:
        before = await client.lastsave()
        await asyncio.sleep(1.01)  # LASTSAVE has one-second resolution
        await client.bgsave()

        async def saved() -> bool:
            info = await client.info("persistence")
            done = not info["rdb_bgsave_in_progress"] and await client.lastsave() > before
            return done and info["rdb_last_bgsave_status"] == "ok"

        await assert_eventually(saved, timeout=30)
    finally:
        await client.aclose()
    await asyncio.to_thread(shutil.copyfile, directory / "dump.rdb", out)


async def test_a_bgsave_copy_under_load_restores_as_it_was(tmp_path: Path) -> None:
    server = start_redis_server(tmp_path / "live")
    restored_server = None
    try:
        hub = await start_hub(RedisHubStore(server.url(0), prefix=PREFIX), operator_token=OPERATOR_TOKEN)
        alice, bob, channel_id = await conversation(hub.target)
        stop = asyncio.Event()

        async def write() -> int:
            posted = 0
            while not stop.is_set():
                batch = [make_envelope(channel_id, "ag2.msg.text", {"text": f"m{posted + i}"}) for i in range(20)]
                assert all(r.WhichOneof("result") == "envelope" for r in await alice.post_batch(batch))
                posted += 20
            return posted

        writer = asyncio.create_task(write())
        await asyncio.sleep(0.2)
        (tmp_path / "copy").mkdir()
        await _bgsave_and_copy(server.url(0), tmp_path / "live", tmp_path / "copy" / "dump.rdb")
        stop.set()
        assert await writer > 0
        async with OperatorClient(hub.target, OPERATOR_TOKEN) as operator:
            live = [e.SerializeToString() async for e in operator.read_wal(channel_id)]
            try:
                async for _ in operator.backup():
                    raise AssertionError("a Redis-backed hub streams no backup")
            except FailedPrecondition as refusal:
                assert "BGSAVE" in refusal.message
        for p in (alice, bob):
            await p.close()
        await hub.stop(0.5)

        restored_server = start_redis_server(tmp_path / "copy")  # loads dump.rdb from its directory
        hub = await start_hub(RedisHubStore(restored_server.url(0), prefix=PREFIX), operator_token=OPERATOR_TOKEN)
        try:
            async with OperatorClient(hub.target, OPERATOR_TOKEN) as operator:
                copied = [e async for e in operator.read_wal(channel_id)]
            assert [e.SerializeToString() for e in copied] == live[: len(copied)] and len(copied) > 3
            assert [e.seq for e in copied] == list(range(1, len(copied) + 1))
            for old in (alice, bob):
                again = Participant(hub.target, old.record, old.credential)
                assert (await again.rpc("ListChannels", hub_pb2.ListChannelsRequest())).channels
                await again.close()
            alice2 = Participant(hub.target, alice.record, alice.credential)
            await alice2.connect()
            assert (await alice2.say(channel_id, "after the restore")).seq == len(copied) + 1
            await alice2.close()
        finally:
            await hub.stop(0.5)
    finally:
        server.stop()
        if restored_server is not None:
            restored_server.stop()
