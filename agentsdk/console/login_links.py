"""One-time login links (as Jupyter prints one): ``agentnet console`` reads the operator token the
other commands use and prints ``http://HOST:PORT/login?once=LINK``. The link's token is random and
says nothing of the operator token (which stays in the console's memory); the first visit exchanges
it for a session cookie and it is gone. An unused link expires after :data:`LOGIN_LINK_SECONDS`."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable

LOGIN_LINK_SECONDS = 3600.0
"""An unused login link works this long after the console printed it."""
MAX_LINKS = 16
"""Unused links kept at once (issuing another forgets the oldest)."""


class LoginLinks:
    """Unused one-time login links: link token → (the operator token it logs in with, when it expires)."""

    def __init__(self, ttl: float = LOGIN_LINK_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl
        self._clock = clock
        self._links: dict[str, tuple[str, float]] = {}

    def issue(self, operator_token: str) -> str:
        """A new link token that logs in once with ``operator_token``."""
        while len(self._links) >= MAX_LINKS:
            del self._links[next(iter(self._links))]
        link = secrets.token_urlsafe(32)
        self._links[link] = (operator_token, self._clock() + self._ttl)
        return link

    def redeem(self, link: str) -> str | None:
        """The operator token of an unused, unexpired link (the link is used up), else None."""
        found = self._links.pop(link, None) if link else None
        if found is None or self._clock() > found[1]:
            return None
        return found[0]
