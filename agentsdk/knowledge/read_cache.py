"""The opt-in read cache of :class:`~agentsdk.knowledge.RemoteKnowledgeStore` (``cache=True``).

It is kept coherent by the knowledge service's ``Watch`` stream, one per
namespace (prefix "/"), which the store keeps open and feeds to
:meth:`NamespaceCache.apply`. The rules:

* Nothing is cached unless the namespace's watch is *live* (the service has
  confirmed it). When the watch ends, every entry of the namespace is dropped and
  nothing is cached until a new watch is confirmed, since changes made meanwhile
  are never reported.
* A change event drops the file's entry — unless the entry already shows the
  event's version (the store's own write, or a read that saw it) — and the
  listings of every directory above the file.
* Every fetch takes a :class:`Ticket` before its request is sent. A change event
  or a mutation of the same key before the result comes back, or a watch outage,
  voids the ticket, so a result that may predate an already-processed change is
  never stored (the "fetch → remote write → event → store stale result" race).
  Generations are kept only for keys with a request in flight.
* The store's own writes and deletes store what they did (read-your-own-writes);
  its appends only drop the entry, so the next read fetches the file again.

Entries (file contents, ``exists`` answers, directory listings) share one byte
budget per root store and its namespace views and are evicted least recently
used first; the cost of an entry is its UTF-8 size plus :data:`ENTRY_OVERHEAD`.
Everything here runs on the event loop thread.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from knowledgestore.paths import ancestors, normalize_path
from knowledgestore.types import ChangeEvent
from netkernel.errors import InvalidArgument

#: Default budget of a store's cache (with its namespace views), in bytes.
DEFAULT_CACHE_BYTES = 32 * 1024 * 1024

#: Bytes charged per entry on top of its content, for the key and bookkeeping.
ENTRY_OVERHEAD = 128

#: A cache key: (namespace, is-a-directory-listing, normalised path).
Key = tuple[str, bool, str]


@dataclass(frozen=True, slots=True)
class CachedFile:
    """What is known about a file: whether it exists and, once read, its content, size and version."""

    exists: bool
    content: str | None = None  # None: absent, or only asked about by exists()
    size: int = 0
    version: int = 0

    @property
    def unread(self) -> bool:
        """Known to exist (from exists()) but the content was never read."""
        return self.exists and self.content is None

    def survives(self, event: ChangeEvent) -> bool:
        """Whether this entry already shows the state ``event`` reports."""
        if not self.exists:
            return event.kind == "deleted"
        return self.content is not None and event.kind != "deleted" and event.version == self.version


#: A cached value: a file, or the entries of a directory listing.
Value = CachedFile | tuple[str, ...]


@dataclass(frozen=True)
class CacheInfo:
    """A snapshot of a RemoteKnowledgeStore's read cache (see ``cache_info()``)."""

    live: bool
    """This namespace's watch is confirmed, so reads are being cached."""
    watches: int
    """How often this namespace's watch was confirmed (1, plus one per re-establishment)."""
    entries: int
    """Entries held, for the root store and all its namespace views."""
    bytes: int
    """Their cost in bytes (UTF-8 size plus ENTRY_OVERHEAD each), at most ``max_bytes``."""
    max_bytes: int
    """The budget (``cache_bytes``)."""
    hits: int
    """Reads, exists and lists answered from the cache (root store and views)."""
    misses: int
    """Those sent to the service although the cache was live."""


class ReadCache:
    """The entries of a root store and its namespace views, least recently used first, within ``max_bytes``."""

    def __init__(self, max_bytes: int) -> None:
        if max_bytes <= 0:
            raise InvalidArgument(f"cache_bytes must be positive, not {max_bytes}")
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[Key, tuple[Value, int]] = OrderedDict()
        self._namespaces: dict[str, NamespaceCache] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def namespace(self, name: str) -> NamespaceCache:
        """The coherence state of namespace ``name`` (one per name, whichever store or view asks)."""
        cache = self._namespaces.get(name)
        if cache is None:
            cache = self._namespaces[name] = NamespaceCache(self, name)
        return cache

    def namespaces(self) -> list[NamespaceCache]:
        """Every namespace that was asked for."""
        return list(self._namespaces.values())

    def peek(self, key: Key) -> Value | None:
        """The entry, without counting it as used."""
        item = self._entries.get(key)
        return None if item is None else item[0]

    def use(self, key: Key) -> Value | None:
        """The entry, now the most recently used."""
        item = self._entries.get(key)
        if item is None:
            return None
        self._entries.move_to_end(key)
        return item[0]

    def put(self, key: Key, value: Value, cost: int) -> None:
        """Store ``value``, evicting least recently used entries to stay within the budget."""
        self.discard(key)
        if cost > self.max_bytes:
            return
        self._entries[key] = (value, cost)
        self.bytes += cost
        while self.bytes > self.max_bytes:
            _, (_, evicted) = self._entries.popitem(last=False)
            self.bytes -= evicted

    def discard(self, key: Key) -> None:
        """Drop the entry if there is one."""
        item = self._entries.pop(key, None)
        if item is not None:
            self.bytes -= item[1]

    def drop_namespace(self, name: str) -> None:
        """Drop every entry of namespace ``name``."""
        for key in [key for key in self._entries if key[0] == name]:
            self.discard(key)


class Ticket:
    """Permission to store the result of one request, valid while nothing may have changed the key since."""

    __slots__ = ("_cache", "_epoch", "_generation", "_mutation", "key", "stored")

    def __init__(self, cache: NamespaceCache, key: Key, epoch: int, generation: int, mutation: bool) -> None:
        self._cache = cache
        self.key = key
        self._epoch = epoch
        self._generation = generation
        self._mutation = mutation
        self.stored = False

    @property
    def valid(self) -> bool:
        """The watch was live all along and no change or mutation of the key was seen since the ticket was taken."""
        cache = self._cache
        pending = cache._pending.get(self.key)
        return cache.live and cache._epoch == self._epoch and pending is not None and pending[1] == self._generation

    def store(self, value: Value) -> None:
        """Cache ``value`` for the key if the ticket is still valid."""
        if not self.valid:
            return
        if self._mutation:  # fetches that began during this mutation may have seen the state before it
            self._cache._bump(self.key)
        self._cache.shared.put(self.key, value, _cost(self.key, value))
        self.stored = True


class NamespaceCache:
    """The cache of one namespace: its watch state, requests in flight, and the rules of the module docstring."""

    def __init__(self, shared: ReadCache, namespace: str) -> None:
        self.shared = shared
        self.namespace = namespace
        self.live = False
        self.watches = 0
        #: The store's task keeping the watch open (set by the store that starts it).
        self.task: asyncio.Task[None] | None = None
        #: Set once the first attempt to open the watch has succeeded or failed.
        self.attempted = asyncio.Event()
        self._epoch = 0  # advances whenever the watch goes up or down
        self._pending: dict[Key, list[int]] = {}  # key -> [requests in flight, generation]

    # -- keys -------------------------------------------------------------------------------

    def file_key(self, path: str) -> Key | None:
        """The key of file ``path``; None where the service will refuse the path (left to it)."""
        try:
            normalized = normalize_path(path)
        except InvalidArgument:
            return None
        return None if normalized == "/" else (self.namespace, False, normalized)

    def dir_key(self, path: str) -> Key | None:
        """The key of the listing of directory ``path``; None where the service will refuse it."""
        try:
            return (self.namespace, True, normalize_path(path))
        except InvalidArgument:
            return None

    def _dirs_above(self, key: Key) -> list[Key]:
        return [(self.namespace, True, directory) for directory in ["/", *ancestors(key[2])]]

    # -- lookups ----------------------------------------------------------------------------

    def _lookup(self, key: Key, *, content: bool = False) -> Value | None:
        """The entry if the watch is live and it answers the question; counts a hit or a miss."""
        if not self.live:
            return None
        value = self.shared.use(key)
        # An entry made by exists() answers a read only when it says the file is absent.
        if value is None or (content and isinstance(value, CachedFile) and value.unread):
            self.shared.misses += 1
            return None
        self.shared.hits += 1
        return value

    def cached_file(self, key: Key, *, content: bool) -> CachedFile | None:
        """The entry of a file if it answers the question (``content``: a read; else exists())."""
        value = self._lookup(key, content=content)
        return value if isinstance(value, CachedFile) else None

    def cached_listing(self, key: Key) -> tuple[str, ...] | None:
        """The cached listing of a directory."""
        value = self._lookup(key)
        return value if isinstance(value, tuple) else None

    # -- requests ---------------------------------------------------------------------------

    @contextmanager
    def fetching(self, key: Key) -> Iterator[Ticket]:
        """Around a read request: ``ticket.store(value)`` caches its result unless it may be stale."""
        ticket = self._begin(key, mutation=False)
        try:
            yield ticket
        finally:
            self._end(key)

    @contextmanager
    def mutating(self, key: Key) -> Iterator[Ticket]:
        """Around a write or delete (``ticket.store`` the new state) or an append (store nothing).

        The file's entry and the listings above it are dropped before the request
        is sent and again after it, so neither the state before the mutation nor
        a concurrent fetch's result can outlive it.
        """
        self._invalidate(key, with_dirs=True)
        ticket = self._begin(key, mutation=True)
        try:
            yield ticket
        finally:
            self._end(key)
            self._invalidate(key, with_dirs=True, keep_file=ticket.stored)

    def _begin(self, key: Key, *, mutation: bool) -> Ticket:
        pending = self._pending.setdefault(key, [0, 0])
        pending[0] += 1
        return Ticket(self, key, self._epoch, pending[1], mutation)

    def _end(self, key: Key) -> None:
        pending = self._pending[key]
        pending[0] -= 1
        if pending[0] == 0:
            del self._pending[key]

    def _bump(self, key: Key) -> None:
        """Void the tickets of requests in flight for ``key``."""
        pending = self._pending.get(key)
        if pending is not None:
            pending[1] += 1

    def _invalidate(self, key: Key, *, with_dirs: bool = False, keep_file: bool = False) -> None:
        """Drop the entry (unless ``keep_file``) and, ``with_dirs``, the listings above it; void their tickets."""
        if not keep_file:
            self.shared.discard(key)
        self._bump(key)
        if with_dirs:
            for directory in self._dirs_above(key):
                self.shared.discard(directory)
                self._bump(directory)

    # -- the watch --------------------------------------------------------------------------

    def apply(self, event: ChangeEvent) -> None:
        """A change reported by the watch: drop what it makes stale."""
        key: Key = (self.namespace, False, event.path)
        value = self.shared.peek(key)
        self._invalidate(key, with_dirs=True, keep_file=isinstance(value, CachedFile) and value.survives(event))

    def connected(self) -> None:
        """The service confirmed the watch: start caching."""
        self._epoch += 1
        self.live = True
        self.watches += 1
        self.attempted.set()

    def disconnected(self) -> None:
        """The watch ended (or never started): drop the namespace's entries and stop caching."""
        self._epoch += 1
        self.live = False
        self.shared.drop_namespace(self.namespace)

    def info(self) -> CacheInfo:
        """A snapshot of this namespace's watch state and the shared entries."""
        shared = self.shared
        counts = (len(shared), shared.bytes, shared.max_bytes, shared.hits, shared.misses)
        return CacheInfo(self.live, self.watches, *counts)


def _cost(key: Key, value: Value) -> int:
    if isinstance(value, CachedFile):
        size = value.size
    else:
        size = sum(len(name.encode("utf-8")) for name in value)
    return size + len(key[2]) + ENTRY_OVERHEAD
