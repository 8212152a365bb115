"""LockedKnowledgeStore: serialise the mutations of any store under a caller-supplied lock."""

from __future__ import annotations

import builtins
from contextlib import AbstractAsyncContextManager
from typing import Any

from knowledgestore.types import ChangeCallback, KnowledgeStore, Subscription


class LockedKnowledgeStore:
    """Wraps ``store`` so that ``write``, ``delete`` and ``append`` run one at a time under ``lock``.

    ``lock`` is anything usable as ``async with lock:`` — an ``asyncio.Lock``, or a
    distributed lock shared with other processes. Reads and ``on_change`` pass
    straight through without taking it.
    """

    def __init__(self, store: KnowledgeStore, lock: AbstractAsyncContextManager[Any]) -> None:
        self.store = store
        self.lock = lock

    async def write(self, path: str, content: str) -> None:
        """Create or replace the file at ``path`` while holding the lock."""
        async with self.lock:
            await self.store.write(path, content)

    async def delete(self, path: str) -> None:
        """Remove the file while holding the lock; raises NotFound if it does not exist."""
        async with self.lock:
            await self.store.delete(path)

    async def append(self, path: str, text: str) -> int:
        """Append ``text`` while holding the lock; return the byte offset where it starts."""
        async with self.lock:
            return await self.store.append(path, text)

    async def read(self, path: str) -> str:
        """Return the file's content (no lock)."""
        return await self.store.read(path)

    async def list(self, path: str) -> builtins.list[str]:
        """Immediate children of directory ``path`` (no lock)."""
        return await self.store.list(path)

    async def exists(self, path: str) -> bool:
        """Whether a file exists at ``path`` (no lock)."""
        return await self.store.exists(path)

    async def read_range(self, path: str, offset: int) -> str:
        """Everything from byte ``offset`` on (no lock)."""
        return await self.store.read_range(path, offset)

    async def on_change(self, prefix: str, callback: ChangeCallback) -> Subscription:
        """Delegated to the wrapped store."""
        return await self.store.on_change(prefix, callback)
