"""RedisKnowledgeStore: files in Redis, shared by every process and host using the same server.

Keys under the prefix (default ``agentnet:knowledge:``):

* ``<prefix>data:<path>`` — the file's bytes (a string; ``APPEND`` grows it);
* ``<prefix>versions`` — hash path → version;
* ``<prefix>index`` — sorted set of all paths (``ZRANGEBYLEX`` lists a directory);
* channel ``<prefix>changes`` — one JSON message per change.

Mutations run as Lua scripts, so the content, version, index and change message
change together atomically. ``on_change`` subscribes to the channel (pushed by
Redis, not polled) and returns once Redis has confirmed the subscription.
"""

from __future__ import annotations

import asyncio
import builtins
import json
import logging
from importlib import resources
from typing import Any, cast

from netkernel.extras import missing_extra

try:
    import redis.asyncio as aioredis
    import redis.exceptions
    from redis.maint_notifications import MaintNotificationsConfig
except ImportError as exc:
    raise missing_extra("redis", exc) from exc

from knowledgestore.base import StoreBase
from knowledgestore.feed import ChangeFeed
from knowledgestore.paths import (
    ancestors,
    dir_prefix,
    directory_blocks_file,
    file_blocks_path,
    file_path,
    immediate_children,
    normalize_path,
)
from knowledgestore.text import check_offset, decode_text, encode_text, query_offset
from knowledgestore.types import AppendResult, ChangeCallback, ChangeEvent, FileInfo, Subscription
from netkernel.errors import NotFound
from netkernel.redis_packing import connection_class_for
from netkernel.tasks import cancel_and_wait

log = logging.getLogger("agentnet.knowledge")

DEFAULT_PREFIX = "agentnet:knowledge:"


def _load_lua(name: str) -> str:
    """The source of ``lua/<name>`` (package data beside this module), read from the installed package."""
    return resources.files("knowledgestore").joinpath("lua", name).read_text(encoding="utf-8")


_MUTATE = _load_lua("mutate.lua")
"""A write or an append: content, version, index and change message together (the file's head says its
arguments)."""
_DELETE = _load_lua("delete.lua")
"""A removal: content, version, index entry and change message together."""


class RedisKnowledgeStore(StoreBase):
    """Stores files in Redis under ``prefix``.

    ``url_or_client`` is a Redis URL (the store creates and closes its client)
    or a ``redis.asyncio.Redis`` built with ``decode_responses=False`` (the
    caller keeps ownership and closes it).
    """

    def __init__(self, url_or_client: str | aioredis.Redis, *, prefix: str = DEFAULT_PREFIX) -> None:
        super().__init__()
        if isinstance(url_or_client, str):
            # Maintenance notifications off: redis-py's default ("auto") makes the pool skip the check
            # that replaces a connection the server closed, so a write after a Redis restart would fail.
            self._client: aioredis.Redis = aioredis.Redis.from_url(
                url_or_client,
                maint_notifications_config=MaintNotificationsConfig(enabled=False),
                connection_class=connection_class_for(
                    url_or_client
                ),  # commands packed with hiredis (netkernel/redis_packing.py)
            )
            self._owns_client = True
        else:
            if url_or_client.connection_pool.connection_kwargs.get("decode_responses"):
                raise ValueError("RedisKnowledgeStore needs a client with decode_responses=False (it stores bytes)")
            self._client, self._owns_client = url_or_client, False
        self._prefix = prefix
        self._versions = prefix + "versions"
        self._index = prefix + "index"
        self._channel = prefix + "changes"
        self._mutate = self._client.register_script(_MUTATE)
        self._delete = self._client.register_script(_DELETE)
        self._feed = ChangeFeed()
        self._listen_lock = asyncio.Lock()
        self._pubsub: Any = None
        self._listener: asyncio.Task[None] | None = None

    @property
    def prefix(self) -> str:
        """The key prefix of this store."""
        return self._prefix

    def _make_view(self, name: str) -> RedisKnowledgeStore:
        """An isolated store under the key prefix ``<prefix>ns:<name>:``, sharing the client."""
        return RedisKnowledgeStore(self._client, prefix=f"{self._prefix}ns:{name}:")

    def _data_key(self, path: str) -> str:
        return self._prefix + "data:" + path

    async def _run_mutation(self, path: str, kind: str, data: bytes) -> list[Any]:
        keys = [self._data_key(path), self._versions, self._index]
        result = cast(
            "list[Any]", await self._mutate(keys=keys, args=[path, kind, data, self._channel, *ancestors(path)])
        )
        if int(result[0]) == -1:
            raise file_blocks_path(_text(result[1]), path)
        if int(result[0]) == -2:
            raise directory_blocks_file(path)
        return result

    async def write_info(self, path: str, content: str) -> FileInfo:
        """Create or replace a file; return its new size and version."""
        path = file_path(path)
        _, size, version = await self._run_mutation(path, "written", encode_text(content))
        return FileInfo(int(size), int(version))

    async def append_info(self, path: str, text: str) -> AppendResult:
        """Append text atomically (creating the file); return where it landed and the new size and version."""
        path = file_path(path)
        offset, size, version = await self._run_mutation(path, "appended", encode_text(text))
        return AppendResult(int(offset), int(size), int(version))

    async def delete(self, path: str) -> None:
        """Remove a file (NotFound if missing)."""
        path = file_path(path)
        keys = [self._data_key(path), self._versions, self._index]
        if not int(cast("int", await self._delete(keys=keys, args=[path, self._channel]))):
            raise NotFound(f"no file at {path}", metadata={"path": path})

    async def read_info(self, path: str) -> tuple[str, FileInfo]:
        """Return a file's content with its size and version (NotFound if missing)."""
        path = file_path(path)
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.hget(self._versions, path)
            pipe.get(self._data_key(path))
            version, data = await pipe.execute()
        if version is None:
            raise NotFound(f"no file at {path}", metadata={"path": path})
        data = data or b""
        return decode_text(data, path), FileInfo(len(data), int(version))

    async def size_of(self, path: str) -> int:
        """A file's size in bytes, from STRLEN (NotFound if missing)."""
        path = file_path(path)
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.hexists(self._versions, path)
            pipe.strlen(self._data_key(path))
            found, size = await pipe.execute()
        if not found:
            raise NotFound(f"no file at {path}", metadata={"path": path})
        return int(size)

    async def read_range(self, path: str, offset: int) -> str:
        """Everything from byte ``offset`` on (OutOfRange if negative, past the end or inside a character)."""
        path = file_path(path)
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.hexists(self._versions, path)
            pipe.strlen(self._data_key(path))
            pipe.getrange(self._data_key(path), query_offset(offset), -1)
            found, size, data = await pipe.execute()
        if not found:
            raise NotFound(f"no file at {path}", metadata={"path": path})
        check_offset(path, offset, int(size), data[0] if data and 0 <= offset < int(size) else None)
        return decode_text(data, path) if offset < int(size) else ""

    async def exists(self, path: str) -> bool:
        """Whether a file exists at ``path``."""
        return await self._client.zscore(self._index, file_path(path)) is not None

    async def list(self, path: str) -> builtins.list[str]:
        """Immediate children of directory ``path``, sorted; directories end in "/"."""
        prefix = dir_prefix(path)
        members = await self._client.zrangebylex(self._index, "[" + prefix, "(" + prefix[:-1] + "0")
        return immediate_children(prefix, (_text(member) for member in members))

    async def on_change(self, prefix: str, callback: ChangeCallback) -> Subscription:
        """Deliver every later change at or under ``prefix``, from any process using this Redis and prefix."""
        prefix = normalize_path(prefix)
        async with self._listen_lock:
            if self._listener is None:
                await self._start_listener()
        return self._feed.subscribe(prefix, callback)

    async def _start_listener(self) -> None:
        pubsub: Any = self._client.pubsub()  # redis-py leaves PubSub methods untyped
        try:
            await pubsub.subscribe(self._channel)
            # Once Redis confirms, it forwards every later PUBLISH on the channel.
            async with asyncio.timeout(30):
                while True:
                    message = await pubsub.get_message(timeout=None)
                    if message is not None and message["type"] == "subscribe":
                        break
        except BaseException:
            await pubsub.aclose()
            raise
        self._pubsub = pubsub
        self._listener = asyncio.get_running_loop().create_task(self._listen(pubsub), name=f"redis {self._channel}")

    async def _listen(self, pubsub: Any) -> None:
        while True:
            try:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=None)
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
                # redis-py reconnects and re-subscribes on the next read; changes made meanwhile are missed.
                log.warning("change subscription %s lost its connection (%s); reconnecting", self._channel, exc)
                await asyncio.sleep(1.0)
                continue
            if message is not None and message["type"] == "message":
                event = _parse_change(message["data"])
                if event is not None:
                    self._feed.publish(event)

    async def open(self) -> None:
        """Check that Redis answers."""
        await self._client.ping()

    async def _close_resources(self) -> None:
        """Close the client if the store created it."""
        if self._owns_client:
            await self._client.aclose()

    async def _close_subscriptions(self) -> None:
        """Cancel this store's subscriptions and stop its change listener."""
        await self._feed.close()
        listener, self._listener = self._listener, None
        if listener is not None:
            await cancel_and_wait([listener])
        pubsub, self._pubsub = self._pubsub, None
        if pubsub is not None:
            await pubsub.aclose()


def _text(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _parse_change(data: bytes) -> ChangeEvent | None:
    try:
        record = json.loads(data)
        return ChangeEvent(
            str(record["path"]), record["kind"], int(record["offset"]), int(record["size"]), int(record["version"])
        )
    except (ValueError, KeyError, TypeError):
        log.warning("skipping a malformed change message: %r", data[:200])
        return None
