"""DiskKnowledgeStore: plain, human-readable files under a root directory.

``/notes/a.md`` is stored as ``<root>/notes/a.md``. Bookkeeping lives in
``<root>/.agentnet/`` (a reserved name): the lock file, temp files for atomic
writes, per-path versions and the change journal (see ``disk_journal``).

Every mutation holds an exclusive ``flock`` on ``.agentnet/lock`` (reads hold a
shared one), so writes, appends and deletes are atomic with respect to each
other in this and in other processes. Writes go to a temp file that
``os.replace`` moves into place. ``on_change`` tails the journal, woken by
watchdog, so changes made by other processes through a DiskKnowledgeStore on the
same root are reported too; files edited by hand are readable but not reported.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import errno
import fcntl
import hashlib
import os
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

try:
    from watchdog.events import (
        FileClosedEvent,
        FileCreatedEvent,
        FileModifiedEvent,
        FileMovedEvent,
        FileSystemEvent,
        FileSystemEventHandler,
    )
    from watchdog.observers import Observer
    from watchdog.observers.api import BaseObserver
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without watchdog
    raise ImportError(
        "DiskKnowledgeStore needs the watchdog package for on_change: pip install 'agent-network[disk]'"
    ) from exc

from knowledgestore.base import StoreBase
from knowledgestore.disk_journal import JOURNAL_NAME, JournalTailer, JournalWriter, write_all
from knowledgestore.feed import ChangeFeed
from knowledgestore.paths import (
    RESERVED_NAME,
    ancestors,
    dir_prefix,
    directory_blocks_file,
    file_blocks_path,
    file_path,
    normalize_path,
)
from knowledgestore.text import check_offset, decode_text, encode_text
from knowledgestore.types import AppendResult, ChangeCallback, ChangeEvent, FileInfo, Subscription
from netkernel.errors import InvalidArgument, NotFound
from netkernel.files import private_dir, private_dirs, write_private


class _JournalWatcher(FileSystemEventHandler):
    """Tails the journal whenever watchdog reports it changed and publishes its records on the loop."""

    def __init__(self, meta_dir: Path, feed: ChangeFeed, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._feed = feed
        self._loop = loop
        self._lock = threading.Lock()  # the tailer is read by the observer thread and once at start
        self._tailer = JournalTailer(meta_dir)

    def on_any_event(self, event: FileSystemEvent) -> None:
        """Watchdog callback (observer thread): read new journal records if the journal changed."""
        names = (os.path.basename(os.fsdecode(event.src_path)), os.path.basename(os.fsdecode(event.dest_path)))
        if any(name.startswith(JOURNAL_NAME) for name in names):
            self.drain()

    def drain(self) -> None:
        """Publish every journal record not yet published."""
        with self._lock:  # held while handing over too, so batches reach the loop in journal order
            events = self._tailer.read_new()
            if events:
                with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is listening any more
                    self._loop.call_soon_threadsafe(self._publish, events)

    def _publish(self, events: list[ChangeEvent]) -> None:
        for event in events:
            self._feed.publish(event)

    def close(self) -> None:
        """Release the journal descriptor."""
        with self._lock:
            self._tailer.close()


class DiskKnowledgeStore(StoreBase):
    """Stores files as plain files under ``root`` (created if missing).

    ``fsync=True`` also flushes each write and append to the disk before
    returning (slower; survives power loss). Files are created with mode 0600.
    """

    def __init__(self, root: str | os.PathLike[str], *, fsync: bool = False, journal_max_bytes: int = 8 << 20) -> None:
        super().__init__()
        self._root = Path(root).absolute()
        self._meta = self._root / RESERVED_NAME
        self._tmp = self._meta / "tmp"
        self._versions = self._meta / "versions"
        private_dir(self._root)  # the files are 0600 (mkstemp, appends, journal) inside a 0700 root
        for directory in (self._tmp, self._versions):
            private_dirs(directory)
        self._real_root = os.path.realpath(self._root)
        self._lock_path = self._meta / "lock"
        self._fsync = fsync
        self._journal_max_bytes = journal_max_bytes
        self._journal = JournalWriter(self._meta, journal_max_bytes)
        self._mutation_lock = asyncio.Lock()  # one mutation thread at a time; flock orders processes
        self._feed = ChangeFeed()
        self._watcher: _JournalWatcher | None = None
        self._watch_lock = asyncio.Lock()
        self._observer: BaseObserver | None = None
        self._observer_lock = threading.Lock()  # watchers of several views may start at once

    @property
    def root(self) -> Path:
        """The directory holding the files."""
        return self._root

    def _make_view(self, name: str) -> DiskKnowledgeStore:
        """An isolated store in the sub-directory ``<root>/<name>``."""
        return DiskKnowledgeStore(self._root / name, fsync=self._fsync, journal_max_bytes=self._journal_max_bytes)

    # --- path mapping and locking (run in worker threads) ---

    def _target(self, path: str) -> Path:
        parts = path.split("/")[1:]  # normalised: no part is the reserved bookkeeping name
        target = self._root.joinpath(*parts)
        real = os.path.realpath(target)
        if real != self._real_root and not real.startswith(self._real_root + os.sep):
            raise InvalidArgument(f"{path} leads outside the store root through a symbolic link")
        return target

    @contextlib.contextmanager
    def _flock(self, exclusive: bool) -> Iterator[None]:
        # A fresh descriptor per operation: flock excludes other descriptors,
        # including other threads of this process.
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)

    def _make_parents(self, path: str, target: Path) -> None:
        try:
            private_dirs(target.parent)  # 0700 like the root (mkdir -p would make them 0755)
        except (FileExistsError, NotADirectoryError):
            for directory in ancestors(path):
                if not (self._root / directory[1:]).is_dir():
                    raise file_blocks_path(directory, path) from None
            raise
        if target.is_dir():
            raise directory_blocks_file(path)

    def _version_file(self, path: str) -> Path:
        return self._versions / hashlib.sha256(path.encode("utf-8")).hexdigest()

    def _version(self, path: str) -> int:
        try:
            return int(self._version_file(path).read_text())
        except (FileNotFoundError, ValueError):
            return 0  # a file created by hand has no version yet

    def _bump_version(self, path: str) -> int:
        version = self._version(path) + 1
        write_private(self._version_file(path), str(version).encode())
        return version

    # --- operations (run in worker threads) ---

    def _write_sync(self, path: str, data: bytes) -> FileInfo:
        with _os_errors(path), self._flock(exclusive=True):
            target = self._target(path)
            self._make_parents(path, target)
            fd, tmp = tempfile.mkstemp(dir=self._tmp, prefix="write-")
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    if self._fsync:
                        handle.flush()
                        os.fsync(handle.fileno())
                os.replace(tmp, target)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
                raise
            version = self._bump_version(path)
            self._journal.append(ChangeEvent(path, "written", 0, len(data), version))
            return FileInfo(len(data), version)

    def _append_sync(self, path: str, data: bytes) -> AppendResult:
        with _os_errors(path), self._flock(exclusive=True):
            target = self._target(path)
            self._make_parents(path, target)
            fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                offset = os.fstat(fd).st_size
                write_all(fd, data)
                if self._fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            version = self._bump_version(path)
            size = offset + len(data)
            self._journal.append(ChangeEvent(path, "appended", offset, size, version))
            return AppendResult(offset, size, version)

    def _delete_sync(self, path: str) -> None:
        with _os_errors(path), self._flock(exclusive=True):
            target = self._target(path)
            if not target.is_file():
                raise NotFound(f"no file at {path}", metadata={"path": path})
            target.unlink()
            self._version_file(path).unlink(missing_ok=True)
            # Directories are implicit: drop the ones this delete left empty.
            parent = target.parent
            while parent != self._root:
                try:
                    parent.rmdir()
                except OSError:
                    break
                parent = parent.parent
            self._journal.append(ChangeEvent(path, "deleted", 0, 0, 0))

    def _read_sync(self, path: str) -> tuple[str, FileInfo]:
        with _os_errors(path), self._flock(exclusive=False):
            target = self._target(path)
            try:
                data = target.read_bytes()
            except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
                raise NotFound(f"no file at {path}", metadata={"path": path}) from None
            return decode_text(data, path), FileInfo(len(data), self._version(path))

    def _read_range_sync(self, path: str, offset: int) -> str:
        with _os_errors(path), self._flock(exclusive=False):
            target = self._target(path)
            try:
                fd = os.open(target, os.O_RDONLY)
            except (FileNotFoundError, NotADirectoryError):
                raise NotFound(f"no file at {path}", metadata={"path": path}) from None
            try:
                status = os.fstat(fd)
                if not stat.S_ISREG(status.st_mode):
                    raise NotFound(f"no file at {path}", metadata={"path": path})
                size = status.st_size
                if offset < 0 or offset >= size:
                    check_offset(path, offset, size, None)
                    return ""
                chunks = []
                position = offset
                while chunk := os.pread(fd, 1 << 20, position):
                    chunks.append(chunk)
                    position += len(chunk)
            finally:
                os.close(fd)
            data = b"".join(chunks)
            check_offset(path, offset, size, data[0] if data else None)
            return decode_text(data, path)

    def _list_sync(self, prefix: str) -> builtins.list[str]:
        directory = self._target(prefix.rstrip("/")) if prefix != "/" else self._root
        names: builtins.list[str] = []
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    if entry.name == RESERVED_NAME:
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        names.append(entry.name + "/")
                    elif entry.is_file(follow_symlinks=False):
                        names.append(entry.name)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(names)

    # --- the async API ---

    async def write_info(self, path: str, content: str) -> FileInfo:
        """Create or replace a file atomically; return its new size and version."""
        path, data = file_path(path), encode_text(content)
        async with self._mutation_lock:
            return await asyncio.to_thread(self._write_sync, path, data)

    async def append_info(self, path: str, text: str) -> AppendResult:
        """Append text (creating the file); return where it landed and the new size and version."""
        path, data = file_path(path), encode_text(text)
        async with self._mutation_lock:
            return await asyncio.to_thread(self._append_sync, path, data)

    async def delete(self, path: str) -> None:
        """Remove a file (NotFound if missing)."""
        path = file_path(path)
        async with self._mutation_lock:
            await asyncio.to_thread(self._delete_sync, path)

    async def read_info(self, path: str) -> tuple[str, FileInfo]:
        """Return a file's content with its size and version (NotFound if missing)."""
        return await asyncio.to_thread(self._read_sync, file_path(path))

    async def size_of(self, path: str) -> int:
        """A file's size in bytes, from ``stat`` (NotFound if missing)."""
        return await asyncio.to_thread(self._size_sync, file_path(path))

    def _size_sync(self, path: str) -> int:
        with _os_errors(path):
            try:
                status = self._target(path).stat()
            except (FileNotFoundError, NotADirectoryError):
                raise NotFound(f"no file at {path}", metadata={"path": path}) from None
            if not stat.S_ISREG(status.st_mode):
                raise NotFound(f"no file at {path}", metadata={"path": path})
            return status.st_size

    async def read_range(self, path: str, offset: int) -> str:
        """Everything from byte ``offset`` on (OutOfRange if negative, past the end or inside a character)."""
        return await asyncio.to_thread(self._read_range_sync, file_path(path), offset)

    async def exists(self, path: str) -> bool:
        """Whether a file exists at ``path``."""
        path = file_path(path)
        return await asyncio.to_thread(lambda: self._target(path).is_file())

    async def list(self, path: str) -> builtins.list[str]:
        """Immediate children of directory ``path``, sorted; directories end in "/"."""
        return await asyncio.to_thread(self._list_sync, dir_prefix(path))

    async def on_change(self, prefix: str, callback: ChangeCallback) -> Subscription:
        """Deliver every later change at or under ``prefix``, from any process using this root."""
        prefix = normalize_path(prefix)
        async with self._watch_lock:
            if self._watcher is None:
                self._watcher = await asyncio.to_thread(self._start_watcher, asyncio.get_running_loop())
        return self._feed.subscribe(prefix, callback)

    def _start_watcher(self, loop: asyncio.AbstractEventLoop) -> _JournalWatcher:
        watcher = _JournalWatcher(self._meta, self._feed, loop)
        self._shared_observer().schedule(
            watcher,
            str(self._meta),
            recursive=False,
            event_filter=[FileModifiedEvent, FileClosedEvent, FileCreatedEvent, FileMovedEvent],
        )
        # Records appended between opening the tailer and the watch going live raised no event.
        watcher.drain()
        return watcher

    def _shared_observer(self) -> BaseObserver:
        """One observer thread for a store and all its namespace views."""
        owner = self._view_root or self
        with owner._observer_lock:
            if owner._observer is None:
                owner._observer = Observer()
                owner._observer.start()
            return owner._observer

    async def _close_subscriptions(self) -> None:
        """Cancel this store's subscriptions."""
        await self._feed.close()

    async def _close_resources(self) -> None:
        """Stop the file watcher thread, then close the journal tailers of every view."""
        with self._observer_lock:
            observer, self._observer = self._observer, None
        if observer is not None:
            observer.stop()
            await asyncio.to_thread(observer.join)
        # Only now that the observer thread is gone may the tailers' descriptors close.
        for store in self._stores():
            watcher, store._watcher = store._watcher, None
            if watcher is not None:
                watcher.close()


@contextlib.contextmanager
def _os_errors(path: str) -> Iterator[None]:
    """Turn OS errors caused by the path itself into InvalidArgument."""
    try:
        yield
    except OSError as exc:
        if exc.errno in (errno.ENAMETOOLONG, errno.EILSEQ):
            raise InvalidArgument(f"{path} is not a valid file name here: {exc.strerror}") from None
        raise
