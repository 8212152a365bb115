"""Common base of the built-in stores: versioned primitives, namespaces and lifecycle.

Backends implement the ``*_info`` primitives, which also report sizes and
versions (the knowledge service needs them for its responses); the protocol's
``write`` / ``read`` / ``append`` are derived from them here.
"""

from __future__ import annotations

import abc
import builtins
from collections.abc import Sequence
from types import TracebackType
from typing import Self

from knowledgestore.paths import validate_namespace
from knowledgestore.types import AppendResult, ChangeCallback, FileInfo, Subscription
from netkernel.errors import AgentNetError

#: One path's outcome of :meth:`StoreBase.read_many_within`: as :meth:`StoreBase.read_within`, or its error.
ReadWithin = tuple[str, FileInfo] | int | AgentNetError


class StoreBase(abc.ABC):
    """A :class:`~agentsdk.knowledge.KnowledgeStore` with versions, namespace views and ``close()``.

    Use as ``async with Store(...) as store:`` or call :meth:`close` when done.
    """

    @abc.abstractmethod
    async def write_info(self, path: str, content: str) -> FileInfo:
        """Create or replace a file; return its new size and version."""

    @abc.abstractmethod
    async def read_info(self, path: str) -> tuple[str, FileInfo]:
        """Return a file's content with its size and version (NotFound if missing)."""

    @abc.abstractmethod
    async def append_info(self, path: str, text: str) -> AppendResult:
        """Append text (creating the file); return where it landed and the new size and version."""

    @abc.abstractmethod
    async def list(self, path: str) -> builtins.list[str]:
        """Immediate children of directory ``path``, sorted; directories end in "/"."""

    @abc.abstractmethod
    async def delete(self, path: str) -> None:
        """Remove a file (NotFound if missing)."""

    @abc.abstractmethod
    async def exists(self, path: str) -> bool:
        """Whether a file exists at ``path``."""

    async def size_of(self, path: str) -> int:
        """A file's size in bytes, without reading its content (NotFound if missing).

        The knowledge service refuses an oversized read with it before loading anything;
        backends override this fallback (which reads the file) with a cheap lookup."""
        _, info = await self.read_info(path)
        return info.size

    async def read_within(self, path: str, max_bytes: int) -> tuple[str, FileInfo] | int:
        """A file's content with its size and version when it is at most ``max_bytes`` long;
        otherwise only its size, without loading the content (NotFound if missing).

        The knowledge service answers small reads with it in one storage call; backends
        override this fallback (a size lookup, then the read) with a single lookup."""
        size = await self.size_of(path)
        if size > max_bytes:
            return size
        return await self.read_info(path)

    async def read_many_within(self, paths: Sequence[str], max_bytes: int) -> builtins.list[ReadWithin]:
        """:meth:`read_within` of every path, in order, a path's error (NotFound, …) in its place.

        The knowledge service answers a ReadMany with it; backends override this fallback
        (one read_within per path) with a single lookup for the whole batch."""
        outcomes: builtins.list[ReadWithin] = []
        for path in paths:
            try:
                outcomes.append(await self.read_within(path, max_bytes))
            except AgentNetError as err:
                outcomes.append(err)
        return outcomes

    async def read_range_within(self, path: str, offset: int, max_bytes: int) -> str | int:
        """:meth:`read_range` when at most ``max_bytes`` lie from ``offset`` on; otherwise only that
        number of bytes, without loading them (errors as :meth:`read_range`).

        The knowledge service answers small ranges with it in one storage call; backends
        override this fallback (a size lookup, then the read) with a single lookup."""
        size = await self.size_of(path)
        wanted = size - max(0, min(offset, size))
        if wanted > max_bytes:
            return wanted
        return await self.read_range(path, offset)

    @abc.abstractmethod
    async def read_range(self, path: str, offset: int) -> str:
        """Everything from byte ``offset`` on (OutOfRange if negative, past the end or inside a character)."""

    @abc.abstractmethod
    async def on_change(self, prefix: str, callback: ChangeCallback) -> Subscription:
        """Deliver every later change at or under ``prefix`` to ``callback``, in order."""

    def __init__(self) -> None:
        self._view_root: Self | None = None  # set on namespace views: the store they belong to
        self._views: dict[str, Self] = {}  # a root store's namespace views by name

    def namespace(self, name: str) -> Self:
        """An isolated store named ``name`` that shares this store's resources.

        The same name always returns the same view, and namespaces are flat: a
        view's ``namespace(n)`` is its root store's ``namespace(n)``. Views are
        closed with their root store; their own ``close()`` does nothing.
        """
        self._check_namespace(name)
        root = self._view_root or self
        view = root._views.get(name)
        if view is None:
            view = root._views[name] = root._make_view(name)
            view._view_root = root
        return view

    @abc.abstractmethod
    def _make_view(self, name: str) -> Self:
        """A new view of this (root) store for namespace ``name``; :meth:`namespace` caches it."""

    def _check_namespace(self, name: str) -> None:
        """Raise InvalidArgument if ``name`` is not a valid namespace name."""
        validate_namespace(name)

    async def open(self) -> None:
        """Connect / create storage now instead of on first use (services call it to fail fast)."""
        return None  # nothing to prepare unless a backend holds connections

    async def close(self) -> None:
        """Cancel the subscriptions of this store and its namespace views, then release the
        store's connections and watchers. A view's own ``close()`` does nothing. Safe to call twice."""
        if self._view_root is not None:
            return
        for store in self._stores():
            await store._close_subscriptions()
        await self._close_resources()

    def _stores(self) -> builtins.list[Self]:
        """This root store's namespace views, then the store itself."""
        return [*self._views.values(), self]

    async def _close_subscriptions(self) -> None:
        """Cancel this store's (or view's) change subscriptions; :meth:`close` calls it for each."""
        return None  # nothing to cancel unless a backend delivers changes

    async def _close_resources(self) -> None:
        """Release what the root store holds, once every subscription is cancelled."""
        return None  # nothing to release unless a backend holds resources

    async def write(self, path: str, content: str) -> None:
        """Create or replace the file at ``path``."""
        await self.write_info(path, content)

    async def read(self, path: str) -> str:
        """Return the file's content; raises NotFound if it does not exist."""
        content, _ = await self.read_info(path)
        return content

    async def append(self, path: str, text: str) -> int:
        """Append ``text`` (creating the file) and return the byte offset where it starts."""
        return (await self.append_info(path, text)).offset

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
