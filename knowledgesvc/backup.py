"""``python -m knowledgesvc.backup``: a consistent copy of the knowledge service's files while it serves.

Run on the service's host, with the service's ``--backend`` and ``--data-dir``:

* ``sqlite`` — ``<data-dir>/knowledge.db`` is copied as of one moment into ``OUT`` (a new file) by
  SQLite's online backup API (:mod:`netkernel.sqlite_snapshot`): the service's writes go on
  meanwhile. Restore: stop the service, put ``OUT`` in place of ``knowledge.db`` (and delete any
  ``knowledge.db-wal`` / ``-shm`` beside it), start it.
* ``disk`` — ``<data-dir>/knowledge/`` is copied into the new directory ``OUT`` while a shared lock
  is held on every namespace's ``.agentnet/lock``: writes, appends and deletes (which take that lock
  exclusively, from any process) wait for the copy, so it is one moment of every namespace; reads go
  on. Restore: stop the service, put ``OUT`` in place of ``knowledge/``, start it.

``memory`` has nothing to copy; ``redis`` is backed up with the Redis server's own snapshot
(docs/operations.md "Data over time").
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from knowledgesvc.config import KnowledgeConfig, knowledge_option_specs
from netkernel.options import add_options
from netkernel.sqlite_snapshot import copy_snapshot

LOCK = Path(".agentnet") / "lock"
"""Each disk store's lock file, relative to its root (knowledgestore/disk_store.py)."""


@contextlib.contextmanager
def _shared_locks(root: Path) -> Iterator[None]:
    """A shared flock on every disk store's lock file under ``root`` (in path order: no deadlock with a
    writer, which holds one exclusive lock at a time)."""
    fds: list[int] = []
    try:
        for lock in sorted(root.rglob(str(LOCK))):
            fd = os.open(lock, os.O_RDONLY)
            fds.append(fd)
            fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        for fd in fds:
            os.close(fd)


def backup_disk(root: Path, out: Path) -> float:
    """Copy the disk store tree ``root`` into the new directory ``out`` as of one moment; returns seconds."""
    if out.exists():
        raise FileExistsError(f"{out} exists: a copy is written to a new directory only")
    if not root.is_dir():
        raise FileNotFoundError(f"no disk store at {root}")
    started = time.monotonic()
    with _shared_locks(root):
        shutil.copytree(root, out, symlinks=True, ignore=shutil.ignore_patterns("lock", "*.tmp"))
    return time.monotonic() - started


def backup(backend: str, data_dir: Path, out: Path) -> float:
    """Copy the ``backend``'s files under ``data_dir`` to ``out``; returns the seconds the copy took."""
    if backend == "sqlite":
        return copy_snapshot(str(data_dir / "knowledge.db"), out)
    if backend == "disk":
        return backup_disk(data_dir / "knowledge", out)
    raise ValueError(
        f"the {backend} backend is not copied here: memory keeps nothing, and a Redis server is backed up with "
        'its own snapshot (BGSAVE; docs/operations.md "Data over time")'
    )


def main(argv: list[str] | None = None) -> int:
    """Run the copy; exit status 2 for a refused one."""
    parser = argparse.ArgumentParser(prog="python -m knowledgesvc.backup", description=__doc__.split("\n")[0])
    # The service's own declarations of the two (knowledgesvc/config.py): same flags, variables and defaults.
    add_options(parser, [o for o in knowledge_option_specs() if o[0] in ("backend", "data_dir")], KnowledgeConfig())
    parser.add_argument("out", type=Path, help="the new file (sqlite) or directory (disk) to copy to")
    args = parser.parse_args(argv)
    try:
        seconds = backup(args.backend, args.data_dir, args.out)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"copied the {args.backend} knowledge store to {args.out} in {seconds:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
