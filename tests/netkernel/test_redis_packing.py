"""Commands packed with hiredis (netkernel/redis_packing.py): the same bytes as redis-py's Python packer,
the same refusal of an argument it cannot send, and the stores' clients use it against a real server."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis
from redis.asyncio.connection import Connection, SSLConnection, UnixDomainSocketConnection
from redis.exceptions import DataError

from hubsvc.storage.redis_connect import connect
from knowledgestore.redis_store import RedisKnowledgeStore
from netkernel.redis_packing import HiredisPacking, connection_class_for

ARGS = (
    "EVALSHA",
    "f" * 40,
    3,
    "agentnet:hub:{c:é}:wal",
    b"raw\x00bytes",
    memoryview(b"view"),
    2.5,
    10**20,
    -7,
    b"\xff" * 100_000,  # past redis-py's buffer cutoff: its packer sends it as a chunk of its own
    "",
)


@pytest.mark.parametrize(
    ("url", "base"),
    [
        ("redis://127.0.0.1:6379/0", Connection),
        ("rediss://127.0.0.1:6379/0", SSLConnection),
        ("unix:///tmp/redis.sock", UnixDomainSocketConnection),
    ],
)
def test_each_scheme_gets_its_own_connection_class_packing_with_hiredis(url: str, base: type[Connection]) -> None:
    chosen = connection_class_for(url)
    assert issubclass(chosen, base) and issubclass(chosen, HiredisPacking)


def test_the_bytes_are_redis_pys_own_and_bad_arguments_are_refused_alike() -> None:
    plain, packed = Connection(), connection_class_for("redis://localhost")()
    assert b"".join(bytes(part) for part in packed.pack_command(*ARGS)) == b"".join(
        bytes(part) for part in plain.pack_command(*ARGS)
    )
    with pytest.raises(DataError):
        plain.pack_command("SET", "k", None)  # type: ignore[arg-type]
    with pytest.raises(DataError):
        packed.pack_command("SET", "k", None)  # type: ignore[arg-type]


async def test_the_hub_and_knowledge_stores_clients_pack_with_hiredis_against_a_real_server(redis_url: str) -> None:
    hub_client = connect(redis_url, timeout=5.0)
    assert isinstance(hub_client, aioredis.Redis)
    knowledge = RedisKnowledgeStore(redis_url, prefix="packing-test:")
    try:
        for client in (hub_client, knowledge._client):
            assert issubclass(client.connection_pool.connection_class, HiredisPacking)
        value = bytes(range(256)) * 400
        await hub_client.set("packing-test:key", value)
        assert await hub_client.get("packing-test:key") == value
        assert await hub_client.eval("return ARGV[1] .. ARGV[2]", 0, "é", 12) == "é12".encode()
    finally:
        await hub_client.delete("packing-test:key")
        await hub_client.aclose()
        await knowledge.close()
