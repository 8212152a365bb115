"""The change journal of a DiskKnowledgeStore.

Every mutation appends one JSON line (path, kind, offset, size, version) to
``<root>/.agentnet/changes.jsonl`` while holding the store's exclusive file
lock, so the journal lists changes in the order they happened, whichever
process made them. Watchers tail it (woken by watchdog) and turn the lines back
into ChangeEvents — exact offsets and versions that file-system notifications
alone cannot give. The journal rotates to ``changes.jsonl.1`` at a size limit;
tailers finish the old file through their open descriptor before switching.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from knowledgestore.types import ChangeEvent

log = logging.getLogger("agentnet.knowledge")

JOURNAL_NAME = "changes.jsonl"
_KINDS = ("written", "appended", "deleted")


def write_all(fd: int, data: bytes) -> None:
    """``os.write`` until every byte is written (writes may be partial)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class JournalWriter:
    """Appends change records; callers must hold the store's exclusive lock."""

    def __init__(self, directory: Path, max_bytes: int) -> None:
        self.path = directory / JOURNAL_NAME
        self._rotated = directory / (JOURNAL_NAME + ".1")
        self._max_bytes = max_bytes

    def append(self, event: ChangeEvent) -> None:
        """Record ``event``; rotate the journal once it reaches the size limit."""
        record = {
            "path": event.path,
            "kind": event.kind,
            "offset": event.offset,
            "size": event.size,
            "version": event.version,
        }
        line = json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            write_all(fd, line)
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        if size >= self._max_bytes:
            os.replace(self.path, self._rotated)


class JournalTailer:
    """Reads the records appended after it was created, across rotations. Not thread-safe."""

    def __init__(self, directory: Path) -> None:
        self._path = directory / JOURNAL_NAME
        self._fd = os.open(self._path, os.O_RDONLY | os.O_CREAT, 0o600)
        self._position = os.fstat(self._fd).st_size
        self._partial = b""

    def read_new(self) -> list[ChangeEvent]:
        """Every complete record appended since the last call."""
        events: list[ChangeEvent] = []
        while True:
            # Check for rotation *before* draining: once the name points at a new
            # file, nothing more is written to the one we hold open.
            rotated = self._rotated()
            events.extend(self._drain())
            if not rotated:
                return events
            os.close(self._fd)
            self._fd = os.open(self._path, os.O_RDONLY | os.O_CREAT, 0o600)
            self._position, self._partial = 0, b""

    def _rotated(self) -> bool:
        try:
            return os.stat(self._path).st_ino != os.fstat(self._fd).st_ino
        except FileNotFoundError:
            return False

    def _drain(self) -> list[ChangeEvent]:
        chunks = [self._partial]
        while chunk := os.pread(self._fd, 1 << 20, self._position):
            chunks.append(chunk)
            self._position += len(chunk)
        *lines, self._partial = b"".join(chunks).split(b"\n")
        return [event for line in lines if (event := _parse(line)) is not None]

    def close(self) -> None:
        """Close the journal descriptor."""
        os.close(self._fd)


def _parse(line: bytes) -> ChangeEvent | None:
    try:
        record = json.loads(line)
        kind = record["kind"]
        if kind not in _KINDS:
            raise ValueError(kind)
        return ChangeEvent(
            str(record["path"]), kind, int(record["offset"]), int(record["size"]), int(record["version"])
        )
    except (ValueError, KeyError, TypeError):
        log.warning("skipping a malformed change-journal line: %r", line[:200])
        return None
