"""Opens the storage backend a knowledge-service process was configured with."""

from __future__ import annotations

from knowledgestore.base import StoreBase
from knowledgestore.memory_store import MemoryKnowledgeStore
from knowledgestore.sqlite_store import SqliteKnowledgeStore
from knowledgesvc.config import KnowledgeConfig


def open_backend(config: KnowledgeConfig) -> StoreBase:
    """The root store for ``config.backend``; each request namespace is a view of it."""
    if config.backend == "memory":
        return MemoryKnowledgeStore()
    if config.backend == "sqlite":
        return SqliteKnowledgeStore(config.data_dir / "knowledge.db")
    if config.backend == "disk":
        from knowledgestore.disk_store import DiskKnowledgeStore  # optional dependency: import only when chosen

        return DiskKnowledgeStore(config.data_dir / "knowledge")
    if config.backend == "redis":
        from knowledgestore.redis_store import RedisKnowledgeStore  # optional dependency ([redis])

        return RedisKnowledgeStore(config.redis_url, prefix=config.redis_prefix)
    raise ValueError(f"unknown backend {config.backend!r}; choose one of memory, sqlite, disk, redis")
