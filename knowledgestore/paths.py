"""Path and namespace rules shared by every backend.

A path is absolute, "/"-separated, with no empty, "." or ".." components after
normalisation. The name ``.agentnet`` (in any letter case) is reserved for a store's own
bookkeeping (the disk backend keeps its lock, versions and journal there) on every backend:
no path component and no namespace may use it. Directories are implicit: they exist while a file lies beneath
them. A path cannot be both a file and a directory.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from netkernel.errors import InvalidArgument

#: Longest accepted normalised path, in UTF-8 bytes.
MAX_PATH_BYTES = 4096

#: The name reserved for a store's bookkeeping, as a path component or a namespace (any letter case).
RESERVED_NAME = ".agentnet"

#: What a namespace name may look like (used by the knowledge service and namespace views).
NAMESPACE_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,64}")


def normalize_path(path: str) -> str:
    """Normalise ``path``: ``/a//b/../c`` → ``/a/c``; relative paths start at "/".

    Raises InvalidArgument for a path that climbs above the root (``/../x``),
    contains a NUL character or is not encodable as UTF-8.
    """
    if "\x00" in path:
        raise InvalidArgument(f"path {path!r} contains a NUL character", metadata={"path": path})
    parts: list[str] = []
    for component in path.split("/"):
        if component in ("", "."):
            continue
        if component == "..":
            if not parts:
                raise InvalidArgument(f"path {path!r} escapes the root directory", metadata={"path": path})
            parts.pop()
        else:
            if component.casefold() == RESERVED_NAME:
                raise InvalidArgument(
                    f"path {path!r} uses the name {RESERVED_NAME}, reserved for the store's own bookkeeping; "
                    "choose another name",
                    metadata={"path": path},
                )
            parts.append(component)
    normalized = "/" + "/".join(parts)
    try:
        size = len(normalized.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidArgument(f"path {path!r} is not valid Unicode text", metadata={"path": path}) from None
    if size > MAX_PATH_BYTES:
        raise InvalidArgument(f"path is {size} bytes long; the limit is {MAX_PATH_BYTES}", metadata={"path": path})
    return normalized


def file_path(path: str) -> str:
    """Normalise a path that must name a file (so not the root directory)."""
    normalized = normalize_path(path)
    if normalized == "/":
        raise InvalidArgument(f"path {path!r} names the root directory, not a file", metadata={"path": path})
    return normalized


def dir_prefix(path: str) -> str:
    """Normalise a directory path and return it with a trailing "/" (the root is "/")."""
    normalized = normalize_path(path)
    return normalized if normalized == "/" else normalized + "/"


def ancestors(path: str) -> list[str]:
    """The directories above normalised file ``path``, outermost first, without "/": ``/a/b/c`` → ``/a``, ``/a/b``."""
    parts = path.split("/")[1:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def is_under(path: str, prefix: str) -> bool:
    """Whether normalised ``path`` is the normalised ``prefix`` itself or lies beneath it."""
    return prefix == "/" or path == prefix or path.startswith(prefix + "/")


def immediate_children(directory: str, paths: Iterable[str]) -> list[str]:
    """Sorted names directly inside ``directory`` (as from :func:`dir_prefix`); sub-directories end in "/"."""
    names: set[str] = set()
    for path in paths:
        if not path.startswith(directory) or path == directory:
            continue
        head, sep, _ = path[len(directory) :].partition("/")
        names.add(head + "/" if sep else head)
    return sorted(names)


def file_blocks_path(blocking_file: str, path: str) -> InvalidArgument:
    """The error for creating ``path`` beneath an existing file."""
    return InvalidArgument(
        f"cannot create {path}: {blocking_file} is a file, not a directory",
        metadata={"path": path, "file": blocking_file},
    )


def directory_blocks_file(path: str) -> InvalidArgument:
    """The error for writing a file where a directory exists."""
    return InvalidArgument(f"cannot write {path}: it is a directory", metadata={"path": path})


def validate_namespace(name: str) -> str:
    """Return ``name`` if it is a valid namespace name (``[A-Za-z0-9._-]{1,64}``, not ``.``, ``..`` or the
    reserved ``.agentnet``), else raise InvalidArgument."""
    if not NAMESPACE_PATTERN.fullmatch(name) or name in (".", "..") or name.casefold() == RESERVED_NAME:
        raise InvalidArgument(
            f"invalid namespace {name!r}: use 1-64 characters from A-Z a-z 0-9 . _ - "
            f"(not '.', '..' or {RESERVED_NAME!r}, which is reserved for the store's own bookkeeping)",
            metadata={"namespace": name},
        )
    return name
