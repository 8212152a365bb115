"""The KnowledgeStore protocol and the values it passes around.

Every backend (memory, sqlite, disk, redis, locked, remote) implements
:class:`KnowledgeStore`; callers depend on this protocol only.
"""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

ChangeKind = Literal["written", "appended", "deleted"]


@dataclass(frozen=True)
class ChangeEvent:
    """One change to a file, as delivered to ``on_change`` callbacks.

    ``offset`` is where appended bytes start (0 for writes and deletes), ``size``
    the file's new size in UTF-8 bytes and ``version`` its new version (both 0
    after a delete).
    """

    path: str
    kind: ChangeKind
    offset: int
    size: int
    version: int


#: An ``on_change`` callback: a plain function or a coroutine function.
ChangeCallback = Callable[[ChangeEvent], Awaitable[None] | None]


@dataclass(frozen=True)
class FileInfo:
    """Size (UTF-8 bytes) and version of a file after a write or read."""

    size: int
    version: int


@dataclass(frozen=True)
class AppendResult:
    """Where an append landed: start ``offset`` of the new bytes, new ``size`` and ``version``."""

    offset: int
    size: int
    version: int


class Subscription:
    """Handle of one ``on_change`` registration.

    ``await sub.cancel()`` stops delivery: once it returns, the callback is not
    invoked again (an async callback still running at that moment is cancelled).
    Cancelling twice is harmless.
    """

    def __init__(self, cancel: Callable[[], Awaitable[None]]) -> None:
        self._cancel = cancel
        self._active = True

    @property
    def active(self) -> bool:
        """False once :meth:`cancel` has been called."""
        return self._active

    async def cancel(self) -> None:
        """Stop delivering events to the callback."""
        if not self._active:
            return
        self._active = False
        await self._cancel()


@runtime_checkable
class KnowledgeStore(Protocol):
    """Path-addressed text storage for agent memory (all methods are async).

    Paths are normalised by :func:`agentsdk.knowledge.normalize_path`; offsets
    are byte offsets into the UTF-8 encoding of a file.
    """

    async def write(self, path: str, content: str) -> None:
        """Create or replace the file at ``path``."""
        ...

    async def read(self, path: str) -> str:
        """Return the file's content; raises NotFound if it does not exist."""
        ...

    async def list(self, path: str) -> builtins.list[str]:
        """Immediate children of directory ``path``, sorted; directories end in "/"."""
        ...

    async def delete(self, path: str) -> None:
        """Remove the file; raises NotFound if it does not exist."""
        ...

    async def exists(self, path: str) -> bool:
        """Whether a file exists at ``path``."""
        ...

    async def append(self, path: str, text: str) -> int:
        """Append ``text`` (creating the file) and return the byte offset where it starts."""
        ...

    async def read_range(self, path: str, offset: int) -> str:
        """Everything from byte ``offset`` on; raises OutOfRange for a bad offset."""
        ...

    async def on_change(self, prefix: str, callback: ChangeCallback) -> Subscription:
        """Call ``callback`` for every change to a file at or under ``prefix``."""
        ...
