"""Bearer-token authentication and namespace authorisation for the knowledge service.

Tokens come from a tokens file (``--tokens-file``), one grant per line::

    # token                              namespaces (fnmatch globs, comma-separated)
    3q2+7w...long-random-secret...       team-a,team-b-*
    Zx9...another-secret...              *

Without a tokens file the service creates ``<data-dir>/knowledge.token``
(a random secret, mode 0600) granting every namespace. Only SHA-256 digests of
the tokens are kept in memory, and presented tokens are looked up by digest, so
a lookup does not compare secrets byte by byte.
"""

from __future__ import annotations

import fnmatch
import hashlib
import logging
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from netkernel.errors import PermissionDenied, Unauthenticated
from servicekit.auth import MIN_SECRET_LENGTH, bearer_token, ensure_secret_file

log = logging.getLogger("agentnet.knowledge")

TOKEN_FILE_NAME = "knowledge.token"
MIN_TOKEN_LENGTH = MIN_SECRET_LENGTH


class TokensFileError(ValueError):
    """The tokens file cannot be used (unreadable, malformed line, weak token)."""


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


class TokenAuthority:
    """Knows which namespaces each bearer token may use."""

    def __init__(self, grants: Mapping[str, Sequence[str]]) -> None:
        self._grants = {_digest(token): tuple(globs) for token, globs in grants.items()}

    @classmethod
    def from_tokens_file(cls, path: Path) -> TokenAuthority:
        """Load a tokens file (see the module docstring for the format)."""
        try:
            text = path.read_text(encoding="utf-8")
            mode = path.stat().st_mode
        except OSError as exc:
            raise TokensFileError(f"cannot read tokens file {path}: {exc.strerror}") from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            log.warning("tokens file %s is accessible to other users; restrict it with chmod 600", path)
        return cls(parse_tokens(text, str(path)))

    def authenticate(self, metadata: Iterable[tuple[str, str | bytes]]) -> Grant:
        """The grant of the call's bearer token; Unauthenticated without a known token."""
        token = bearer_token(metadata)
        if token is None:
            raise Unauthenticated("missing credential: send the metadata 'authorization: Bearer <token>'")
        globs = self._grants.get(_digest(token))
        if globs is None:
            raise Unauthenticated("unknown token: use a token from the service's tokens file or knowledge.token")
        return Grant(globs)

    def authorize(self, metadata: Iterable[tuple[str, str | bytes]], namespace: str) -> None:
        """Raise Unauthenticated without a known token, PermissionDenied if it does not grant ``namespace``."""
        self.authenticate(metadata).check(namespace)


@dataclass(frozen=True)
class Grant:
    """The namespaces one authenticated token may use (fnmatch globs)."""

    globs: tuple[str, ...]

    def check(self, namespace: str) -> None:
        """PermissionDenied unless a glob matches ``namespace``."""
        if not any(fnmatch.fnmatchcase(namespace, glob) for glob in self.globs):
            raise PermissionDenied(
                f"this token is not granted namespace {namespace!r}", metadata={"namespace": namespace}
            )


def parse_tokens(text: str, source: str) -> dict[str, list[str]]:
    """Parse tokens-file ``text`` into token → namespace globs; ``source`` names it in errors."""
    grants: dict[str, list[str]] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) != 2:
            raise TokensFileError(f"{source}:{number}: expected 'TOKEN NAMESPACE-GLOB[,GLOB...]'")
        token, globs_text = fields
        if len(token) < MIN_TOKEN_LENGTH:
            raise TokensFileError(f"{source}:{number}: tokens must be at least {MIN_TOKEN_LENGTH} characters long")
        globs = [glob for glob in globs_text.split(",") if glob]
        if not globs:
            raise TokensFileError(f"{source}:{number}: name at least one namespace glob")
        grants.setdefault(token, []).extend(globs)
    if not grants:
        raise TokensFileError(f"{source}: no tokens; add a line 'TOKEN NAMESPACE-GLOB'")
    return grants


def ensure_generated_token(data_dir: Path) -> tuple[str, Path]:
    """Return the token in ``<data_dir>/knowledge.token``, creating it (random, mode 0600) if missing."""
    path = data_dir / TOKEN_FILE_NAME
    try:
        return ensure_secret_file(path), path
    except ValueError as exc:
        raise TokensFileError(str(exc)) from None


def load_authority(tokens_file: Path | None, data_dir: Path) -> TokenAuthority:
    """The authority for a service: from ``tokens_file``, or the generated token granting every namespace."""
    if tokens_file is not None:
        authority = TokenAuthority.from_tokens_file(tokens_file)
        log.info("bearer tokens loaded from %s", tokens_file)
        return authority
    token, path = ensure_generated_token(data_dir)
    log.info("no --tokens-file: clients authenticate with the token in %s (grants every namespace)", path)
    return TokenAuthority({token: ["*"]})
