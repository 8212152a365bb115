"""Private files: what the services store (databases, secrets, knowledge files) is readable by
its owner only.

New directories are created mode 0700 and new files 0600. A file the service owns (a database
and its ``-wal`` / ``-shm`` / ``-journal`` sidecars, a generated secret) found readable by other
users is tightened to 0600, with a warning. An existing directory is never changed (it may be a
shared one the operator chose); a warning says it is open to other users.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger("agentnet.files")

_OTHERS = stat.S_IRWXG | stat.S_IRWXO
#: Files SQLite keeps beside a database.
SQLITE_SIDECARS = ("-wal", "-shm", "-journal")


def private_dir(path: Path) -> None:
    """Create directory ``path`` (and its parents) with mode 0700 if missing; warn if it exists and is
    open to other users."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir(mode=0o700, exist_ok=True)
        os.chmod(path, 0o700)  # mkdir's mode is masked by the umask; this is exactly 0700
    elif path.stat().st_mode & _OTHERS:
        log.warning("directory %s is accessible to other users; restrict it with chmod 700", path)


def private_dirs(path: Path) -> None:
    """Create directory ``path`` and each missing parent with mode 0700 (``Path.mkdir(parents=True)``
    gives the parents the default 0777 less the umask: 0755). Raises FileExistsError when one of
    them is a file, NotADirectoryError when a file stands where a parent should be."""
    missing: list[Path] = []
    here = path
    while not here.is_dir() and here.parent != here:
        missing.append(here)
        here = here.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            if not directory.is_dir():  # else another process made it meanwhile
                raise


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path``, replacing its content; a new file gets mode 0600."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def private_file(path: Path) -> None:
    """Create ``path`` empty with mode 0600 if missing; tighten it to 0600 (with a warning) if it is
    open to other users."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        tighten(path)
    else:
        os.close(fd)


def tighten(path: Path) -> None:
    """Make an existing file ``path`` readable by its owner only, warning when it was not; a missing
    file is left alone."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return
    if mode & _OTHERS:
        os.chmod(path, stat.S_IMODE(mode) & ~_OTHERS)
        log.warning("%s was accessible to other users; its mode is now 0%o", path, stat.S_IMODE(mode) & ~_OTHERS)


def private_database(path: Path) -> None:
    """Prepare a SQLite database file: a private parent directory, the file itself created 0600 (SQLite
    gives its ``-wal`` and ``-shm`` files the database's mode) and existing sidecars tightened."""
    private_dir(path.parent)
    private_file(path)
    for suffix in SQLITE_SIDECARS:
        tighten(path.with_name(path.name + suffix))
