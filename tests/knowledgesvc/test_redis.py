"""RedisKnowledgeStore specifics: client ownership, key prefix, sharing between store objects."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis

from agentsdk.knowledge import RedisKnowledgeStore
from tests.knowledgesvc.conftest import unique_name
from tests.knowledgesvc.helpers import Recorder, assert_eventually


async def test_constructed_client_is_used_and_left_open(redis_url: str) -> None:
    client = aioredis.Redis.from_url(redis_url)
    prefix = f"test:{unique_name()}:"
    try:
        async with RedisKnowledgeStore(client, prefix=prefix) as store:
            await store.write("/a/b.md", "x")
            await store.append("/log", "y")
        assert await client.ping()  # still open: the caller owns it
        keys = sorted(key.decode() for key in await client.keys("*") if key.decode().startswith("test:"))
        mine = [key for key in keys if key.startswith(prefix)]
        assert mine == sorted([prefix + "data:/a/b.md", prefix + "data:/log", prefix + "index", prefix + "versions"])
    finally:
        await client.aclose()


async def test_decoding_clients_are_refused(redis_url: str) -> None:
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    try:
        with pytest.raises(ValueError, match="decode_responses=False"):
            RedisKnowledgeStore(client)
    finally:
        await client.aclose()


async def test_store_objects_with_one_prefix_share_files_and_changes(redis_url: str) -> None:
    prefix = f"test:{unique_name()}:"
    async with (
        RedisKnowledgeStore(redis_url, prefix=prefix) as one,
        RedisKnowledgeStore(redis_url, prefix=prefix) as two,
    ):
        recorder = Recorder()
        await two.on_change("/", recorder)
        await one.write("/x", "from one")
        assert await two.read("/x") == "from one"

        def delivered() -> None:
            assert recorder.summary() == [("/x", "written", 0, 8, 1)]

        await assert_eventually(delivered)
        async with RedisKnowledgeStore(redis_url, prefix=f"test:{unique_name()}:") as other:
            assert not await other.exists("/x")
