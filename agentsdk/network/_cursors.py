"""Client-side delivery cursors: exact, persistable, resumable.

The hub tells each delivery's ``prev_seq`` (the previous seq of this participant's
chain in the channel). A channel's cursor moves from ``prev_seq`` to ``seq`` once
that delivery — and every one before it in the chain — was processed, so the
cursor never skips an unprocessed envelope even when urgent ones overtake older
ones. Persist cursors with a :class:`CursorStore` to resume after a restart with
no repeats.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Protocol

from netkernel.files import private_dir


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


class CursorBook:
    """The cursors of one identity, advanced along the hub's prev_seq chains."""

    def __init__(self, store: CursorStore | None = None) -> None:
        self._store = store
        self._cursors: dict[str, int] = dict(store.load()) if store is not None else {}
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
        if self._store is not None:
            self._store.save(self._cursors)
        return True

    def cursor(self, channel_id: str) -> int:
        """The channel's cursor (0 = nothing processed yet)."""
        return self._cursors.get(channel_id, 0)
