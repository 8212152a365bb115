"""Login sessions: a random id in an HttpOnly cookie, everything else (the operator token, the hub
connection, the CSRF token) kept server-side; ended by logout, by idling, or by a newer login once
``max_sessions`` are open."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from agentsdk.console.options import ConsoleOptions
from agentsdk.operator import OperatorClient


@dataclass
class Session:
    """One operator's login: the hub client bound to the token they gave, and the session's CSRF token."""

    sid: str
    csrf: str
    client: OperatorClient
    last_seen: float
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the session ends: its live streams stop."""


class SessionStore:
    """The console's sessions, by id (never the token: the cookie carries only the random id)."""

    def __init__(self, options: ConsoleOptions, clock: Callable[[], float] = time.monotonic) -> None:
        self._options = options
        self._clock = clock
        self._sessions: dict[str, Session] = {}
        self._key = secrets.token_bytes(32)
        """Signs the login form's CSRF token (a fresh key per console process)."""

    def __len__(self) -> int:
        return len(self._sessions)

    async def create(self, client: OperatorClient) -> Session:
        """A new session for a client whose token the hub accepted (ending the oldest beyond the limit)."""
        await self.sweep()
        while len(self._sessions) >= self._options.max_sessions:
            oldest = min(self._sessions.values(), key=lambda s: s.last_seen)
            await self.end(oldest.sid)
        session = Session(
            sid=secrets.token_urlsafe(32), csrf=secrets.token_urlsafe(32), client=client, last_seen=self._clock()
        )
        self._sessions[session.sid] = session
        return session

    async def get(self, sid: str | None) -> Session | None:
        """The live session with this id (and mark it used), or None."""
        if not sid:
            return None
        session = self._sessions.get(sid)
        if session is None:
            return None
        now = self._clock()
        if now - session.last_seen > self._options.session_idle_seconds:
            await self.end(sid)
            return None
        session.last_seen = now
        return session

    async def end(self, sid: str) -> None:
        """End a session: its live streams stop and its hub connection closes."""
        session = self._sessions.pop(sid, None)
        if session is not None:
            session.ended.set()
            await session.client.close()

    async def sweep(self) -> None:
        """End every session idle for longer than the limit."""
        now = self._clock()
        for sid in [s.sid for s in self._sessions.values() if now - s.last_seen > self._options.session_idle_seconds]:
            await self.end(sid)

    async def close(self) -> None:
        """End every session (the console stops)."""
        for sid in list(self._sessions):
            await self.end(sid)

    def login_csrf(self, nonce: str) -> str:
        """The login form's CSRF token for the pre-login cookie's nonce."""
        return hmac.new(self._key, nonce.encode(), hashlib.sha256).hexdigest()

    def login_csrf_ok(self, nonce: str | None, token: str) -> bool:
        """Whether the login form's token matches its pre-login cookie."""
        return bool(nonce) and hmac.compare_digest(self.login_csrf(nonce or ""), token)
