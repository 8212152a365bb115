"""Client-side delivery cursors: exact, persistable, resumable.

The hub tells each delivery's ``prev_seq`` (the previous seq of this participant's
chain in the channel). A channel's cursor moves from ``prev_seq`` to ``seq`` once
that delivery — and every one before it in the chain — was processed, so the
cursor never skips an unprocessed envelope even when urgent ones overtake older
ones. Persist cursors with a :class:`CursorStore` to resume after a restart with
no repeats.

A store's :meth:`~CursorStore.save` runs off the event loop (:class:`_Saver`): one save at a time,
on the loop's default executor, each writing the cursors as they are when it starts; the moves
made while one runs are written together by the next. Replacing a file costs far more than
handling an envelope (hundreds of microseconds), so saving on every move in the loop's thread
held up every delivery; now the file trails the handlers by at most one write, and
:meth:`CursorBook.flush` (called when the client disconnects) writes the last moves. A process
killed in between hands the envelopes handled since the last write to the next process again,
as delivery is at least once across a crash anyway.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Protocol

from netkernel.files import private_dir

log = logging.getLogger("agentnet.sdk")


class CursorStore(Protocol):
    """Where an identity's cursors survive a restart."""

    def load(self) -> dict[str, int]:
        """The saved cursors (channel_id -> seq)."""
        ...

    def save(self, cursors: dict[str, int]) -> None:
        """Replace the saved cursors."""
        ...


class JsonFileCursorStore:
    """Cursors in a small JSON file, replaced atomically on every save."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def load(self) -> dict[str, int]:
        """The saved cursors ({} when the file does not exist yet)."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        return {str(k): int(v) for k, v in data.items()}

    def save(self, cursors: dict[str, int]) -> None:
        """Write atomically (a 0600 temp file + rename; a missing directory is created 0700)."""
        private_dir(self.path.parent)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(cursors, handle)
        os.replace(tmp, self.path)


class _Saver:
    """Saves a book's cursors to ``store`` off the event loop: one save at a time, each of the
    cursors as they are when it starts (the moves made meanwhile go in the next)."""

    def __init__(self, store: CursorStore, cursors: dict[str, int]) -> None:
        self._store = store
        self._cursors = cursors
        self._running: asyncio.Future[None] | None = None
        self._dirty = False

    def changed(self) -> None:
        """A cursor moved: save now, or once the save in progress is done."""
        if self._running is not None:
            self._dirty = True
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a book driven by plain code): save in this thread
            self._store.save(dict(self._cursors))
            return
        self._start(loop)

    def _start(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future[None]:
        self._dirty = False
        self._running = running = loop.run_in_executor(None, self._store.save, dict(self._cursors))
        running.add_done_callback(self._done)
        return running

    def _done(self, running: asyncio.Future[None]) -> None:
        self._running = None
        if not running.cancelled() and running.exception() is not None:
            self._dirty = True  # what it was to write is still unsaved
            log.warning("could not save the delivery cursors (%s); the next move tries again", running.exception())
        elif self._dirty:
            try:
                self._start(running.get_loop())
            except RuntimeError:  # the loop's executor shut down (the process ends): nothing can save now
                log.warning("the delivery cursors of the last moves were not saved: the event loop is closing")

    async def flush(self) -> None:
        """Return once every move made so far is saved (or its last try failed, logged)."""
        while (running := self._running) is not None:
            # Its done callback (added first, so run before this resumes) starts the next save if
            # moves came meanwhile, unless it failed.
            await asyncio.wait([running])
        if self._dirty:  # nothing saving, and a failed save left moves unsaved: one more try
            await asyncio.wait([self._start(asyncio.get_running_loop())])


class CursorBook:
    """The cursors of one identity, advanced along the hub's prev_seq chains."""

    def __init__(self, store: CursorStore | None = None) -> None:
        self._cursors: dict[str, int] = dict(store.load()) if store is not None else {}
        self._saver = _Saver(store, self._cursors) if store is not None else None
        self._waiting: dict[str, dict[int, int]] = {}

    def snapshot(self) -> dict[str, int]:
        """Cursors to send in Hello."""
        return dict(self._cursors)

    def resume(self, cursors: dict[str, int]) -> None:
        """Adopt the cursors the hub resumed from (Welcome.cursors)."""
        for channel_id, seq in cursors.items():
            self._cursors[channel_id] = seq
            self._waiting.pop(channel_id, None)

    def processed(self, channel_id: str, prev_seq: int, seq: int) -> bool:
        """Record a processed delivery; True when the channel's cursor moved."""
        cursor = self._cursors.get(channel_id, 0)
        if seq <= cursor:
            return False
        waiting = self._waiting.get(channel_id)
        if prev_seq == cursor and not waiting:  # the next of the chain, nothing processed ahead of it
            cursor = seq
        else:
            if waiting is None:
                waiting = self._waiting[channel_id] = {}
            waiting[prev_seq] = seq
            if cursor not in waiting:
                return False
            while cursor in waiting:
                cursor = waiting.pop(cursor)
        self._cursors[channel_id] = cursor
        if self._saver is not None:
            self._saver.changed()
        return True

    async def flush(self) -> None:
        """Wait until the store holds every move made so far (no-op without a store)."""
        if self._saver is not None:
            await self._saver.flush()

    def cursor(self, channel_id: str) -> int:
        """The channel's cursor (0 = nothing processed yet)."""
        return self._cursors.get(channel_id, 0)
