"""MemoryKnowledgeStore: a dict in this process (tests, temporary sessions)."""

from __future__ import annotations

import builtins
from collections import Counter
from dataclasses import dataclass

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
from knowledgestore.text import decode_text, encode_text, slice_from
from knowledgestore.types import AppendResult, ChangeCallback, ChangeEvent, FileInfo, Subscription
from netkernel.errors import NotFound


@dataclass
class _File:
    data: bytearray
    version: int


class MemoryKnowledgeStore(StoreBase):
    """Keeps files in memory; lost when the process ends.

    Every operation runs without awaiting in between, so each is atomic with
    respect to other tasks of the event loop.
    """

    def __init__(self) -> None:
        super().__init__()
        self._files: dict[str, _File] = {}
        # directory -> number of files beneath it; a directory exists while > 0
        self._dirs: Counter[str] = Counter()
        self._feed = ChangeFeed()

    def _file(self, path: str) -> _File:
        entry = self._files.get(path)
        if entry is None:
            raise NotFound(f"no file at {path}", metadata={"path": path})
        return entry

    def _create(self, path: str) -> _File:
        above = ancestors(path)
        for directory in above:
            if directory in self._files:
                raise file_blocks_path(directory, path)
        if self._dirs[path] > 0:
            raise directory_blocks_file(path)
        self._dirs.update(above)
        entry = self._files[path] = _File(bytearray(), 0)
        return entry

    async def write_info(self, path: str, content: str) -> FileInfo:
        """Create or replace a file; return its new size and version."""
        path = file_path(path)
        data = encode_text(content)
        entry = self._files.get(path) or self._create(path)
        entry.data = bytearray(data)
        entry.version += 1
        self._feed.publish(ChangeEvent(path, "written", 0, len(data), entry.version))
        return FileInfo(len(data), entry.version)

    async def read_info(self, path: str) -> tuple[str, FileInfo]:
        """Return a file's content with its size and version (NotFound if missing)."""
        path = file_path(path)
        entry = self._file(path)
        return decode_text(entry.data, path), FileInfo(len(entry.data), entry.version)

    async def read_within(self, path: str, max_bytes: int) -> tuple[str, FileInfo] | int:
        """The content, size and version when at most ``max_bytes`` long, else only the size (NotFound if missing)."""
        path = file_path(path)
        entry = self._file(path)
        if len(entry.data) > max_bytes:
            return len(entry.data)
        return decode_text(entry.data, path), FileInfo(len(entry.data), entry.version)

    async def append_info(self, path: str, text: str) -> AppendResult:
        """Append text (creating the file); return where it landed and the new size and version."""
        path = file_path(path)
        data = encode_text(text)
        entry = self._files.get(path) or self._create(path)
        offset = len(entry.data)
        entry.data += data
        entry.version += 1
        self._feed.publish(ChangeEvent(path, "appended", offset, len(entry.data), entry.version))
        return AppendResult(offset, len(entry.data), entry.version)

    async def list(self, path: str) -> builtins.list[str]:
        """Immediate children of directory ``path``, sorted; directories end in "/"."""
        return immediate_children(dir_prefix(path), self._files)

    async def delete(self, path: str) -> None:
        """Remove a file (NotFound if missing)."""
        path = file_path(path)
        self._file(path)
        del self._files[path]
        for directory in ancestors(path):
            self._dirs[directory] -= 1
            if self._dirs[directory] <= 0:
                del self._dirs[directory]
        self._feed.publish(ChangeEvent(path, "deleted", 0, 0, 0))

    async def exists(self, path: str) -> bool:
        """Whether a file exists at ``path``."""
        return file_path(path) in self._files

    async def size_of(self, path: str) -> int:
        """A file's size in bytes (NotFound if missing)."""
        return len(self._file(file_path(path)).data)

    async def read_range(self, path: str, offset: int) -> str:
        """Everything from byte ``offset`` on (OutOfRange if negative, past the end or inside a character)."""
        path = file_path(path)
        return slice_from(path, self._file(path).data, offset)

    async def read_range_within(self, path: str, offset: int, max_bytes: int) -> str | int:
        """:meth:`read_range` when at most ``max_bytes`` lie from ``offset`` on, else only that number of bytes."""
        path = file_path(path)
        data = self._file(path).data
        wanted = len(data) - max(0, min(offset, len(data)))
        return wanted if wanted > max_bytes else slice_from(path, data, offset)

    async def on_change(self, prefix: str, callback: ChangeCallback) -> Subscription:
        """Deliver every later change at or under ``prefix`` to ``callback``, in order."""
        return self._feed.subscribe(normalize_path(prefix), callback)

    def _make_view(self, name: str) -> MemoryKnowledgeStore:
        """An isolated in-memory store for namespace ``name``."""
        return MemoryKnowledgeStore()

    async def _close_subscriptions(self) -> None:
        """Cancel this store's subscriptions."""
        await self._feed.close()
