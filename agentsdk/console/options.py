"""The console's limits (each has a flag of ``agentnet console`` and an environment variable)."""

from __future__ import annotations

from dataclasses import dataclass

MAX_PAGE_SIZE = 1000
"""The hub's default --max-operator-page-size: a console page never asks for more."""


@dataclass(frozen=True)
class ConsoleOptions:
    """How big pages are and how many sessions and live streams the console keeps."""

    page_size: int = 100
    """Rows per page (agents, channels, tasks, envelopes, audit records); at most 1000."""
    session_idle_seconds: float = 8 * 3600.0
    """A session unused this long is ended (the operator logs in again)."""
    max_sessions: int = 32
    """Sessions kept at once; a new login beyond it ends the least recently used one."""
    max_live_streams: int = 64
    """Live streams (server-sent events) open at once over every session; more are refused (503)."""
    live_rows: int = 500
    """Rows a live page keeps: the browser drops the oldest beyond it."""
    max_event_text_bytes: int = 4096
    """An envelope's event data is shown up to this many bytes (then clipped)."""
    list_refresh_seconds: float = 2.0
    """An open list page (agents, channels, tasks) reads its page from the hub again this often and shows
    what changed; in (0, 3600]."""

    def __post_init__(self) -> None:
        if not 1 <= self.page_size <= MAX_PAGE_SIZE:
            raise ValueError(f"page size {self.page_size} is out of range: use 1 to {MAX_PAGE_SIZE}.")
        if self.session_idle_seconds <= 0:
            raise ValueError(f"session idle timeout {self.session_idle_seconds} must be positive.")
        if not 0 < self.list_refresh_seconds <= 3600:
            raise ValueError(f"list refresh {self.list_refresh_seconds} must be in (0, 3600] seconds.")
        for name in ("max_sessions", "max_live_streams", "live_rows", "max_event_text_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name.replace('_', ' ')} must be at least 1.")
