"""Online copy of a SQLite database file: one consistent snapshot, taken while others write to it.

The copy is SQLite's online backup API run in one step (``sqlite3.Connection.backup`` with every
page at once) on a connection of its own (run it on a thread: the GIL is released meanwhile). One
step is one read transaction, so the copy is the database as it was when the step began — a
step-by-step copy would start over each time another connection commits, i.e. never finish under
load. In WAL mode a reader neither waits for nor blocks writers: commits go on meanwhile, into the
WAL file, which cannot be checkpointed past the copy's snapshot until it ends. The hub
(:mod:`hubsvc.storage.sqlite.history`) and the knowledge service (:mod:`knowledgesvc.backup`) use it.

The copy is left in rollback-journal mode (one self-contained file, no ``-wal`` beside it); a hub
that opens it switches it back to WAL mode.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

BUSY_TIMEOUT_MS = 5000
"""How long the copying connection waits for a lock (only a WAL restart already running can hold it)."""


def copy_snapshot(source: str, target: Path) -> float:
    """Copy the database ``source`` as of one moment into a new file ``target`` (which must not
    exist); returns the seconds the copy took. Blocking: run it on a thread."""
    if target.exists():
        raise FileExistsError(f"{target} exists: a copy is written to a new file only")
    if not Path(source).exists():
        raise FileNotFoundError(f"no database at {source}")
    started = time.monotonic()
    src = sqlite3.connect(source, isolation_level=None)
    try:
        src.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        dst = sqlite3.connect(target, isolation_level=None)
        try:
            src.backup(dst)  # pages=-1: every page in one step, one read transaction (the GIL released)
            dst.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
        finally:
            dst.close()
    finally:
        src.close()
    return time.monotonic() - started
