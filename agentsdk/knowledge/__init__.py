"""Path-addressed agent memory: the KnowledgeStore protocol and its backends.

``from agentsdk.knowledge import SqliteKnowledgeStore`` etc. ``DiskKnowledgeStore`` and
``RedisKnowledgeStore`` are imported on first access, so this package imports without the
optional watchdog and redis packages; accessing one without its package raises ImportError
naming the extra (``[disk]``, ``[redis]``).
See ``docs/knowledge.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentsdk.knowledge.read_cache import CacheInfo
from agentsdk.knowledge.remote import RemoteKnowledgeStore
from agentsdk.tls import TlsConfig
from knowledgestore.base import StoreBase
from knowledgestore.locked import LockedKnowledgeStore
from knowledgestore.memory_store import MemoryKnowledgeStore
from knowledgestore.paths import normalize_path
from knowledgestore.sqlite_store import SqliteKnowledgeStore
from knowledgestore.types import (
    AppendResult,
    ChangeCallback,
    ChangeEvent,
    ChangeKind,
    FileInfo,
    KnowledgeStore,
    Subscription,
)

if TYPE_CHECKING:
    from knowledgestore.disk_store import DiskKnowledgeStore
    from knowledgestore.redis_store import RedisKnowledgeStore

__all__ = [
    "AppendResult",
    "CacheInfo",
    "ChangeCallback",
    "ChangeEvent",
    "ChangeKind",
    "DiskKnowledgeStore",
    "FileInfo",
    "KnowledgeStore",
    "LockedKnowledgeStore",
    "MemoryKnowledgeStore",
    "RedisKnowledgeStore",
    "RemoteKnowledgeStore",
    "SqliteKnowledgeStore",
    "StoreBase",
    "Subscription",
    "TlsConfig",
    "normalize_path",
]


def __getattr__(name: str) -> Any:
    # Lazy so that `import agentsdk.knowledge` works without watchdog or redis installed.
    if name == "DiskKnowledgeStore":
        from knowledgestore.disk_store import DiskKnowledgeStore

        return DiskKnowledgeStore
    if name == "RedisKnowledgeStore":
        from knowledgestore.redis_store import RedisKnowledgeStore

        return RedisKnowledgeStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
