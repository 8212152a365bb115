"""Credentials shared by the agentnet services: bearer metadata and generated secret files."""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
from collections.abc import Iterable
from pathlib import Path

from netkernel.files import private_dir, tighten

log = logging.getLogger("agentnet.service")

MIN_SECRET_LENGTH = 16


def bearer_token(metadata: Iterable[tuple[str, str | bytes]]) -> str | None:
    """The token of an ``authorization: Bearer <token>`` metadata entry, if any."""
    for key, value in metadata:
        if key.lower() != "authorization":
            continue
        text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
        scheme, _, token = text.strip().partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    return None


def ensure_secret_file(path: Path) -> str:
    """The secret stored in ``path``, creating the file (random secret, mode 0600) if missing.

    Raises ``ValueError`` when the file holds no usable secret (shorter than 16 characters).
    """
    if not path.exists():
        private_dir(path.parent)
        # Write a private temp file, then link it into place: never a readable or half-written secret.
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(secrets.token_urlsafe(32) + "\n")
            with contextlib.suppress(FileExistsError):  # another process created it first: use theirs
                os.link(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    tighten(path)  # a secret readable by other users is made private (with a warning)
    secret = path.read_text(encoding="utf-8").strip()
    if len(secret) < MIN_SECRET_LENGTH:
        raise ValueError(f"{path} holds no usable secret; delete it to have a new one generated")
    return secret
