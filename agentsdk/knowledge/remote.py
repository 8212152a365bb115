"""RemoteKnowledgeStore: the KnowledgeStore protocol over gRPC, against ``knowledgesvc``.

Errors come back as the same exception classes the server raised (NotFound,
OutOfRange, InvalidArgument, Unauthenticated, PermissionDenied,
PayloadTooLarge, …) through :func:`netkernel.errors.error_from_rpc`.

``cache=True`` adds a read cache kept coherent by the service's Watch stream;
its rules are in :mod:`agentsdk.knowledge.read_cache`.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging

import grpc
from agentnet.v1 import knowledge_pb2

from agentsdk.knowledge.read_batch import ReadBatcher
from agentsdk.knowledge.read_cache import DEFAULT_CACHE_BYTES, CachedFile, CacheInfo, Key, NamespaceCache, ReadCache
from agentsdk.knowledge.rpc import KnowledgeRpc, WatchStream
from agentsdk.tls import TlsSetting, open_channel
from knowledgestore.base import StoreBase
from knowledgestore.convert import event_from_proto
from knowledgestore.feed import deliver, stop_task
from knowledgestore.types import AppendResult, ChangeCallback, FileInfo, Subscription
from netkernel.errors import AgentNetError, NotFound, OutOfRange, Unavailable

log = logging.getLogger("agentnet.knowledge")

#: Message size limit in both directions; matches the service's default.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024

#: First and longest pause before the cache's watch is opened again after it ended or failed.
WATCH_RETRY_SECONDS = (0.05, 2.0)


class RemoteKnowledgeStore(StoreBase):
    """A knowledge-service namespace, used like a local store.

    Reads made concurrently (the same event-loop turn, or while an earlier batch is in
    flight) go to the service together as one ``ReadMany`` call, each with its own result
    or error (:mod:`agentsdk.knowledge.read_batch`); a service without ``ReadMany`` gets
    single ``Read`` calls.

    ``target`` is ``host:port``; ``credential`` is a bearer token the service
    grants ``namespace``. ``tls`` switches to TLS: ``True`` (gRPC's default roots) or a
    :class:`~agentsdk.tls.TlsConfig` (private CA, client certificate for mTLS). ``timeout``
    bounds each call (not ``on_change`` streams). Use ``async with`` or call
    :meth:`close`.

    ``cache=True`` serves ``read``, ``exists`` and ``list`` from a local cache
    after the first fetch, within ``cache_bytes`` (shared with namespace views,
    least recently used evicted first). A Watch stream per namespace keeps it
    coherent: another client's change is seen once the service's change
    notification arrives (normally milliseconds), the store's own writes,
    appends and deletes at once. Nothing is cached while that watch is not
    confirmed, and a watch that ends drops the namespace's entries until it is
    open again (retried in the background). ``append`` and ``read_range``
    always go to the service (an append drops the file's entry). ``open()``
    waits (up to ``timeout``) for the first attempt to open the watch; without
    it the watch starts on first use. :meth:`cache_info` reports the state.
    """

    def __init__(
        self,
        target: str,
        *,
        namespace: str,
        credential: str,
        tls: TlsSetting = None,
        timeout: float | None = 60.0,
        cache: bool = False,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        super().__init__()
        self._target = target
        self._namespace = namespace
        self._credential = credential
        self._tls = tls
        self._timeout = timeout
        self._channel: grpc.aio.Channel | None = None
        self._rpc_instance: KnowledgeRpc | None = None
        self._batcher: ReadBatcher | None = None
        self._subscriptions: set[Subscription] = set()
        self._shared_cache = ReadCache(cache_bytes) if cache else None
        self._cache = self._shared_cache.namespace(namespace) if self._shared_cache is not None else None

    @property
    def target(self) -> str:
        """The service address."""
        return self._target

    def _make_view(self, name: str) -> RemoteKnowledgeStore:
        """The same service and credential, another namespace (sharing the connection and the cache budget)."""
        view = RemoteKnowledgeStore(
            self._target,
            namespace=name,
            credential=self._credential,
            tls=self._tls,
            timeout=self._timeout,
        )
        if self._shared_cache is not None:
            view._cache = self._shared_cache.namespace(name)
        return view

    def _check_namespace(self, name: str) -> None:
        """Accept any name here: the service validates it (InvalidArgument on first use)."""
        return None

    def _rpc(self) -> KnowledgeRpc:
        """The service's typed RPCs as this store's credential (the root's connection, opened on first use)."""
        # The channel is created on first use, inside the event loop that will use it.
        owner = self._view_root or self
        if owner._rpc_instance is None:
            options = [
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ]
            owner._channel = open_channel(owner._target, owner._tls, options)
            owner._rpc_instance = KnowledgeRpc(owner._channel, owner._credential, timeout=owner._timeout)
        return owner._rpc_instance

    def _reads(self) -> ReadBatcher:
        """The root's read batcher: this client's concurrent reads (of any namespace view) share ReadMany calls."""
        owner = self._view_root or self
        if owner._batcher is None:
            owner._batcher = ReadBatcher(self._rpc())
        return owner._batcher

    def _watched_cache(self) -> NamespaceCache | None:
        """This namespace's cache (None when off), its watch started on first use."""
        cache = self._cache
        if cache is not None and cache.task is None:
            loop = asyncio.get_running_loop()
            cache.task = loop.create_task(self._keep_watching(cache), name=f"cache watch {self._namespace}")
        return cache

    def _cache_key(self, path: str, *, directory: bool = False) -> tuple[NamespaceCache, Key] | None:
        """The cache and the key of ``path`` (a listing's with ``directory``); None: the cache is off or not for it."""
        cache = self._watched_cache()
        if cache is None:
            return None
        key = cache.dir_key(path) if directory else cache.file_key(path)
        return None if key is None else (cache, key)

    async def write_info(self, path: str, content: str) -> FileInfo:
        """Create or replace a file; return its new size and version."""
        request = knowledge_pb2.WriteRequest(namespace=self._namespace, path=path, content=content)
        cached_key = self._cache_key(path)
        if cached_key is None:
            response = await self._rpc().write(request)
            return FileInfo(response.size, response.version)
        cache, key = cached_key
        with cache.mutating(key) as ticket:
            response = await self._rpc().write(request)
            ticket.store(CachedFile(True, content, response.size, response.version))
        return FileInfo(response.size, response.version)

    async def read_info(self, path: str) -> tuple[str, FileInfo]:
        """Return a file's content with its size and version (NotFound if missing)."""
        cached_key = self._cache_key(path)
        if cached_key is None:
            return await self._read_info(path)
        cache, key = cached_key
        # Yield to the event loop as a request would, so a polling loop cannot starve the watch.
        await asyncio.sleep(0)
        cached = cache.cached_file(key, content=True)
        if cached is not None:
            if cached.content is None:
                raise NotFound(f"no file at {key[2]}", metadata={"path": key[2]})
            return cached.content, FileInfo(cached.size, cached.version)
        with cache.fetching(key) as ticket:
            try:
                content, info = await self._read_info(path)
            except NotFound:
                ticket.store(CachedFile(False))
                raise
            ticket.store(CachedFile(True, content, info.size, info.version))
        return content, info

    async def _read_info(self, path: str) -> tuple[str, FileInfo]:
        request = knowledge_pb2.ReadRequest(namespace=self._namespace, path=path)
        response = await self._reads().read(request)
        return response.content, FileInfo(response.size, response.version)

    async def append_info(self, path: str, text: str) -> AppendResult:
        """Append text (creating the file); return where it landed and the new size and version."""
        request = knowledge_pb2.AppendRequest(namespace=self._namespace, path=path, text=text)
        cached_key = self._cache_key(path)
        if cached_key is None:
            response = await self._rpc().append(request)
        else:
            cache, key = cached_key
            with cache.mutating(key):  # stores nothing: the next read fetches the file again
                response = await self._rpc().append(request)
        return AppendResult(response.offset, response.size, response.version)

    async def list(self, path: str) -> builtins.list[str]:
        """Immediate children of directory ``path``, sorted; directories end in "/"."""
        cached_key = self._cache_key(path, directory=True)
        if cached_key is None:
            return await self._list(path)
        cache, key = cached_key
        await asyncio.sleep(0)  # as in read_info
        cached = cache.cached_listing(key)
        if cached is not None:
            return builtins.list(cached)
        with cache.fetching(key) as ticket:
            entries = await self._list(path)
            ticket.store(tuple(entries))
        return entries

    async def _list(self, path: str) -> builtins.list[str]:
        request = knowledge_pb2.ListRequest(namespace=self._namespace, path=path)
        response = await self._rpc().list(request)
        return builtins.list(response.entries)

    async def delete(self, path: str) -> None:
        """Remove a file (NotFound if missing)."""
        request = knowledge_pb2.DeleteRequest(namespace=self._namespace, path=path)
        cached_key = self._cache_key(path)
        if cached_key is None:
            await self._rpc().delete(request)
            return
        cache, key = cached_key
        with cache.mutating(key) as ticket:
            await self._rpc().delete(request)
            ticket.store(CachedFile(False))

    async def exists(self, path: str) -> bool:
        """Whether a file exists at ``path``."""
        cached_key = self._cache_key(path)
        if cached_key is None:
            return await self._exists(path)
        cache, key = cached_key
        await asyncio.sleep(0)  # as in read_info
        cached = cache.cached_file(key, content=False)
        if cached is not None:
            return cached.exists
        with cache.fetching(key) as ticket:
            exists = await self._exists(path)
            ticket.store(CachedFile(exists))
        return exists

    async def _exists(self, path: str) -> bool:
        request = knowledge_pb2.ExistsRequest(namespace=self._namespace, path=path)
        response = await self._rpc().exists(request)
        return response.exists

    async def read_range(self, path: str, offset: int) -> str:
        """Everything from byte ``offset`` on (OutOfRange if negative, past the end or inside a character).

        Never cached: it always asks the service.
        """
        if offset < 0:  # the wire field is unsigned, so the server cannot be asked
            raise OutOfRange(f"offset {offset} is negative", metadata={"path": path, "offset": str(offset)})
        request = knowledge_pb2.ReadRangeRequest(namespace=self._namespace, path=path, offset=offset)
        response = await self._rpc().read_range(request)
        return response.content

    async def _open_watch(self, prefix: str) -> WatchStream:
        """Start a Watch and return it once the service's first frame confirms it is live."""
        request = knowledge_pb2.WatchRequest(namespace=self._namespace, prefix=prefix)
        call = self._rpc().watch(request)
        try:
            first = await call.read()
        except AgentNetError:
            raise
        except BaseException:
            call.cancel()
            raise
        if first is None or not first.subscribed:
            call.cancel()
            raise Unavailable(f"the knowledge service at {self._target} ended the watch before confirming it")
        return call

    async def on_change(self, prefix: str, callback: ChangeCallback) -> Subscription:
        """Stream changes at or under ``prefix``; returns once the service confirms the watch is live."""
        call = await self._open_watch(prefix)
        task = asyncio.get_running_loop().create_task(self._pump(call, callback), name=f"watch {prefix}")

        async def cancel() -> None:
            self._subscriptions.discard(subscription)
            call.cancel()
            await stop_task(task)

        subscription = Subscription(cancel)
        self._subscriptions.add(subscription)
        return subscription

    async def _pump(self, call: WatchStream, callback: ChangeCallback) -> None:
        try:
            while True:
                frame = await call.read()
                if frame is None:
                    log.warning("the knowledge service at %s ended a watch", self._target)
                    return
                if frame.HasField("change"):
                    await deliver(callback, event_from_proto(frame.change))
        except AgentNetError as err:
            if not call.cancelled:
                log.warning("a watch on %s ended: %s", self._target, err)

    async def _keep_watching(self, cache: NamespaceCache) -> None:
        """Keep ``cache``'s watch open, reopening it after a pause whenever it ends or cannot be opened."""
        pause, longest = WATCH_RETRY_SECONDS
        failures = 0
        while True:
            try:
                call = await self._open_watch("/")
            except Exception as err:  # the service is down, refuses the namespace, …: retry later
                failures += 1
                level = logging.WARNING if failures == 1 else logging.DEBUG
                log.log(level, "read cache of %s is off: cannot watch %s: %s", cache.namespace, self._target, err)
            else:
                failures = 0
                cache.connected()
                if cache.watches > 1:
                    log.info("read cache of namespace %s is on again", cache.namespace)
                try:
                    await self._pump(call, cache.apply)
                finally:
                    call.cancel()
                    cache.disconnected()
                log.warning("read cache of namespace %s is off until its watch is open again", cache.namespace)
                pause = WATCH_RETRY_SECONDS[0]
            cache.attempted.set()
            await asyncio.sleep(pause)
            pause = min(pause * 2, longest)

    def cache_info(self) -> CacheInfo | None:
        """The read cache's state (this namespace's watch, shared entries and counters); None without ``cache``."""
        return self._cache.info() if self._cache is not None else None

    async def open(self) -> None:
        """With ``cache``: start the cache's watch and wait (up to ``timeout``) for its first attempt."""
        cache = self._watched_cache()
        if cache is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(cache.attempted.wait(), self._timeout)

    async def _close_subscriptions(self) -> None:
        """Cancel this store's watches."""
        for subscription in builtins.list(self._subscriptions):
            await subscription.cancel()

    async def _close_resources(self) -> None:
        """Stop the read caches' watches and close the connection."""
        if self._shared_cache is not None:
            for cache in self._shared_cache.namespaces():
                task, cache.task = cache.task, None
                if task is not None:
                    await stop_task(task)
                cache.disconnected()
        batcher, self._batcher = self._batcher, None
        if batcher is not None:
            await batcher.close()
        channel, self._channel, self._rpc_instance = self._channel, None, None
        if channel is not None:
            await channel.close()
